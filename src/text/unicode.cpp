// Byte-level UTF-8 work is done by hand (it must match Rust's rules exactly); normalisation and
// character properties come from ICU.
#include "text/unicode.hpp"

#include <unicode/normalizer2.h>
#include <unicode/uchar.h>
#include <unicode/unistr.h>

namespace met::text::unicode {

std::size_t char_len(std::string_view s, std::size_t i) {
  const auto b = static_cast<unsigned char>(s[i]);
  if (b < 0x80) return 1;
  if (b < 0xE0) return 2;
  if (b < 0xF0) return 3;
  return 4;
}

char32_t next(std::string_view s, std::size_t& i) {
  const auto b0 = static_cast<unsigned char>(s[i]);
  const std::size_t n = char_len(s, i);
  char32_t cp = n == 1 ? b0 : n == 2 ? (b0 & 0x1Fu) : n == 3 ? (b0 & 0x0Fu) : (b0 & 0x07u);
  for (std::size_t k = 1; k < n && i + k < s.size(); ++k) cp = (cp << 6) | (static_cast<unsigned char>(s[i + k]) & 0x3Fu);
  i += n;
  return cp;
}

void append(std::string& out, char32_t cp) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

std::size_t prev_len(std::string_view s, std::size_t end) {
  std::size_t b = end - 1;
  while (b > 0 && end - b < 4 && (static_cast<unsigned char>(s[b]) & 0xC0) == 0x80) --b;
  return end - b;
}

char32_t prev(std::string_view s, std::size_t end) {
  std::size_t i = end - prev_len(s, end);
  return next(s, i);
}

namespace {

// How many bytes of the sequence at s[i] are valid (1..4), and whether the sequence is complete.
// A lone invalid lead byte reports 1 and incomplete; callers replace what is invalid.
struct Scan {
  std::size_t valid;  // bytes that belong to a valid (possibly incomplete) sequence; 0 for a bad lead
  bool complete;
};

Scan scan(std::string_view s, std::size_t i) {
  const auto b = static_cast<unsigned char>(s[i]);
  if (b < 0x80) return {1, true};
  std::size_t need = 0;
  unsigned char lo = 0x80, hi = 0xBF;
  if (b >= 0xC2 && b <= 0xDF) {
    need = 1;
  } else if (b >= 0xE0 && b <= 0xEF) {
    need = 2;
    if (b == 0xE0) lo = 0xA0;
    if (b == 0xED) hi = 0x9F;
  } else if (b >= 0xF0 && b <= 0xF4) {
    need = 3;
    if (b == 0xF0) lo = 0x90;
    if (b == 0xF4) hi = 0x8F;
  } else {
    return {0, false};
  }
  std::size_t k = 1;
  for (; k <= need; ++k) {
    if (i + k >= s.size()) return {k, false};
    const auto c = static_cast<unsigned char>(s[i + k]);
    const unsigned char l = k == 1 ? lo : 0x80, h = k == 1 ? hi : 0xBF;
    if (c < l || c > h) return {k, false};
  }
  return {k, true};
}

}  // namespace

bool is_valid_utf8(std::string_view s) {
  for (std::size_t i = 0; i < s.size();) {
    const Scan r = scan(s, i);
    if (!r.complete) return false;
    i += r.valid;
  }
  return true;
}

std::string lossy(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (std::size_t i = 0; i < s.size();) {
    const Scan r = scan(s, i);
    if (r.complete) {
      out.append(s.substr(i, r.valid));
      i += r.valid;
    } else {
      out += kReplacement;
      i += r.valid == 0 ? 1 : r.valid;
    }
  }
  return out;
}

std::size_t incomplete_tail(std::string_view s) {
  for (std::size_t back = 1; back <= 3 && back <= s.size(); ++back) {
    const std::size_t i = s.size() - back;
    const auto b = static_cast<unsigned char>(s[i]);
    if ((b & 0xC0) == 0x80) continue;  // continuation byte: look further back
    const Scan r = scan(s, i);
    return (!r.complete && r.valid == back) ? back : 0;
  }
  return 0;
}

bool normalize(Form form, std::string& text) {
  UErrorCode status = U_ZERO_ERROR;
  const icu::Normalizer2* n = nullptr;
  switch (form) {
    case Form::nfc:
      n = icu::Normalizer2::getNFCInstance(status);
      break;
    case Form::nfd:
      n = icu::Normalizer2::getNFDInstance(status);
      break;
    case Form::nfkc:
      n = icu::Normalizer2::getNFKCInstance(status);
      break;
    case Form::nfkd:
      n = icu::Normalizer2::getNFKDInstance(status);
      break;
  }
  if (U_FAILURE(status) || n == nullptr) return false;
  const icu::UnicodeString src = icu::UnicodeString::fromUTF8(icu::StringPiece(text.data(), static_cast<int32_t>(text.size())));
  if (n->isNormalized(src, status) && U_SUCCESS(status)) return true;
  status = U_ZERO_ERROR;
  const icu::UnicodeString dst = n->normalize(src, status);
  if (U_FAILURE(status)) return false;
  text.clear();
  dst.toUTF8String(text);
  return true;
}

bool is_whitespace(char32_t cp) { return u_isUWhiteSpace(static_cast<UChar32>(cp)) != 0; }

bool is_alphanumeric(char32_t cp) {
  const auto c = static_cast<UChar32>(cp);
  if (u_isUAlphabetic(c)) return true;
  const auto t = u_charType(c);
  return t == U_DECIMAL_DIGIT_NUMBER || t == U_LETTER_NUMBER || t == U_OTHER_NUMBER;
}

bool is_word_char(char32_t cp) {
  const auto c = static_cast<UChar32>(cp);
  if (u_isUAlphabetic(c) || u_hasBinaryProperty(c, UCHAR_JOIN_CONTROL)) return true;
  const auto t = u_charType(c);
  return t == U_DECIMAL_DIGIT_NUMBER || t == U_CONNECTOR_PUNCTUATION || t == U_NON_SPACING_MARK || t == U_ENCLOSING_MARK ||
         t == U_COMBINING_SPACING_MARK;
}

}  // namespace met::text::unicode
