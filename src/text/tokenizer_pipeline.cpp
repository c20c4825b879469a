// Each stage reproduces the behaviour of the tokenizers component of the same JSON "type"; unknown
// types and unknown keys are errors, never defaults.
#include "text/tokenizer_pipeline.hpp"

#include <array>
#include <initializer_list>

#include <nlohmann/json.hpp>

#include "text/tokenizer_regex.hpp"
#include "text/unicode.hpp"

namespace met::text {

namespace {

using nlohmann::json;

Expected<void> check_keys(const json& obj, std::initializer_list<std::string_view> keys, const std::string& where) {
  if (!obj.is_object()) return fail(where + ": expected an object");
  for (const auto& [k, v] : obj.items()) {
    bool known = false;
    for (auto key : keys) known = known || key == k;
    if (!known) return fail(where + ": unknown key '" + k + "'");
  }
  return {};
}

Expected<std::string> req_string(const json& obj, const char* key, const std::string& where) {
  auto it = obj.find(key);
  if (it == obj.end() || !it->is_string()) return fail(where + "." + key + ": expected a string");
  return it->get<std::string>();
}

Expected<bool> opt_bool(const json& obj, const char* key, bool fallback, const std::string& where) {
  auto it = obj.find(key);
  if (it == obj.end()) return fallback;
  if (!it->is_boolean()) return fail(where + "." + key + ": expected a boolean");
  return it->get<bool>();
}

// {"String": "..."} or {"Regex": "..."}: a literal or an Oniguruma pattern.
Expected<TokenizerRegex> pattern(const json& obj, const std::string& where) {
  auto it = obj.find("pattern");
  const std::string at = where + ".pattern";
  if (it == obj.end() || !it->is_object() || it->size() != 1)
    return fail(at + ": expected {\"String\": ...} or {\"Regex\": ...}");
  if (auto s = it->find("String"); s != it->end() && s->is_string()) return TokenizerRegex::literal(s->get<std::string>(), at);
  if (auto r = it->find("Regex"); r != it->end() && r->is_string()) return TokenizerRegex::compile(r->get<std::string>(), at);
  return fail(at + ": expected {\"String\": ...} or {\"Regex\": ...}");
}

std::string replace_all(std::string_view text, const TokenizerRegex& re, std::string_view content) {
  std::string out;
  std::size_t prev = 0;
  for (auto [b, e] : re.find_all(text)) {
    out.append(text.substr(prev, b - prev));
    out.append(content);
    prev = e;
  }
  out.append(text.substr(prev));
  return out;
}

// GPT-2's byte <-> character map: printable bytes stand for themselves, the rest map to 256+n.
struct ByteMap {
  std::array<std::string, 256> to_char;
  std::unordered_map<char32_t, unsigned char> to_byte;
  ByteMap() {
    int n = 0;
    for (int b = 0; b < 256; ++b) {
      const bool printable = (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174 && b <= 255);
      const char32_t cp = printable ? static_cast<char32_t>(b) : static_cast<char32_t>(256 + n++);
      unicode::append(to_char[static_cast<std::size_t>(b)], cp);
      to_byte[cp] = static_cast<unsigned char>(b);
    }
  }
};
const ByteMap& byte_map() {
  static const ByteMap m;
  return m;
}

constexpr std::string_view kGpt2Pattern = "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+";

// ---- normalisers -------------------------------------------------------------------------------

class FormNormalizer final : public Normalizer {
 public:
  explicit FormNormalizer(unicode::Form f) : form_(f) {}
  void apply(std::string& text) const override { unicode::normalize(form_, text); }

 private:
  unicode::Form form_;
};

class ReplaceNormalizer final : public Normalizer {
 public:
  ReplaceNormalizer(TokenizerRegex re, std::string content) : re_(std::move(re)), content_(std::move(content)) {}
  void apply(std::string& text) const override { text = replace_all(text, re_, content_); }

 private:
  TokenizerRegex re_;
  std::string content_;
};

class PrependNormalizer final : public Normalizer {
 public:
  explicit PrependNormalizer(std::string p) : prepend_(std::move(p)) {}
  void apply(std::string& text) const override {
    if (!text.empty()) text.insert(0, prepend_);
  }

 private:
  std::string prepend_;
};

class SequenceNormalizer final : public Normalizer {
 public:
  explicit SequenceNormalizer(std::vector<std::unique_ptr<Normalizer>> s) : steps_(std::move(s)) {}
  void apply(std::string& text) const override {
    for (const auto& s : steps_) s->apply(text);
  }

 private:
  std::vector<std::unique_ptr<Normalizer>> steps_;
};

// ---- pre-tokenizers ----------------------------------------------------------------------------

enum class Behavior { removed, isolated, merged_with_previous, merged_with_next, contiguous };

// Splits one piece at the given matches the way tokenizers' SplitDelimiterBehavior does.
void split_piece(const TextPiece& piece, const std::vector<std::pair<std::size_t, std::size_t>>& matches, Behavior behavior,
                 bool invert, std::vector<TextPiece>& out) {
  struct Part {
    std::size_t b, e;
    bool is_match;
  };
  std::vector<Part> parts;
  std::size_t prev = 0;
  for (auto [b, e] : matches) {
    if (prev != b) parts.push_back({prev, b, invert});
    parts.push_back({b, e, !invert});
    prev = e;
  }
  if (prev != piece.text.size()) parts.push_back({prev, piece.text.size(), invert});

  std::vector<Part> merged;
  switch (behavior) {
    case Behavior::removed:
      for (const Part& p : parts)
        if (!p.is_match) merged.push_back(p);
      break;
    case Behavior::isolated:
      merged = parts;
      break;
    case Behavior::merged_with_previous: {
      bool prev_match = false;
      for (const Part& p : parts) {
        if (p.is_match && !prev_match && !merged.empty())
          merged.back().e = p.e;
        else
          merged.push_back(p);
        prev_match = p.is_match;
      }
      break;
    }
    case Behavior::merged_with_next: {
      bool prev_match = false;
      for (auto it = parts.rbegin(); it != parts.rend(); ++it) {
        if (it->is_match && !prev_match && !merged.empty())
          merged.back().b = it->b;
        else
          merged.push_back(*it);
        prev_match = it->is_match;
      }
      std::reverse(merged.begin(), merged.end());
      break;
    }
    case Behavior::contiguous: {
      bool prev_match = false;
      for (const Part& p : parts) {
        if (p.is_match == prev_match && !merged.empty())
          merged.back().e = p.e;
        else
          merged.push_back(p);
        prev_match = p.is_match;
      }
      break;
    }
  }
  for (const Part& p : merged)
    if (p.e > p.b) out.push_back(TextPiece{piece.text.substr(p.b, p.e - p.b), piece.at_start && p.b == 0});
}

class SplitPreTokenizer final : public PreTokenizer {
 public:
  SplitPreTokenizer(TokenizerRegex re, Behavior b, bool invert) : re_(std::move(re)), behavior_(b), invert_(invert) {}
  void apply(std::vector<TextPiece>& pieces) const override {
    std::vector<TextPiece> out;
    for (const TextPiece& p : pieces) split_piece(p, re_.find_all(p.text), behavior_, invert_, out);
    pieces = std::move(out);
  }

 private:
  TokenizerRegex re_;
  Behavior behavior_;
  bool invert_;
};

class ByteLevelPreTokenizer final : public PreTokenizer {
 public:
  ByteLevelPreTokenizer(bool add_prefix_space, std::optional<TokenizerRegex> re)
      : add_prefix_space_(add_prefix_space), re_(std::move(re)) {}
  void apply(std::vector<TextPiece>& pieces) const override {
    std::vector<TextPiece> split;
    for (TextPiece p : pieces) {
      if (add_prefix_space_ && (p.text.empty() || p.text[0] != ' ')) p.text.insert(0, " ");
      if (re_)
        split_piece(p, re_->find_all(p.text), Behavior::isolated, /*invert=*/false, split);
      else if (!p.text.empty())
        split.push_back(std::move(p));
    }
    const ByteMap& m = byte_map();
    for (TextPiece& p : split) {
      std::string mapped;
      mapped.reserve(p.text.size() * 2);
      for (unsigned char c : p.text) mapped += m.to_char[c];
      p.text = std::move(mapped);
    }
    pieces = std::move(split);
  }

 private:
  bool add_prefix_space_;
  std::optional<TokenizerRegex> re_;
};

enum class Prepend { always, first, never };

class MetaspacePreTokenizer final : public PreTokenizer {
 public:
  MetaspacePreTokenizer(std::string rep, Prepend scheme, bool split) : rep_(std::move(rep)), scheme_(scheme), split_(split) {}
  void apply(std::vector<TextPiece>& pieces) const override {
    std::vector<TextPiece> out;
    for (TextPiece p : pieces) {
      std::string t;
      for (char c : p.text) {
        if (c == ' ')
          t += rep_;
        else
          t += c;
      }
      const bool starts = t.compare(0, rep_.size(), rep_) == 0;
      if ((scheme_ == Prepend::always && !starts) || (scheme_ == Prepend::first && !starts && p.at_start)) t.insert(0, rep_);
      p.text = std::move(t);
      if (!split_) {
        if (!p.text.empty()) out.push_back(std::move(p));
        continue;
      }
      std::vector<std::pair<std::size_t, std::size_t>> matches;
      for (std::size_t i = p.text.find(rep_); i != std::string::npos; i = p.text.find(rep_, i + rep_.size()))
        matches.emplace_back(i, i + rep_.size());
      split_piece(p, matches, Behavior::merged_with_next, /*invert=*/false, out);
    }
    pieces = std::move(out);
  }

 private:
  std::string rep_;
  Prepend scheme_;
  bool split_;
};

class SequencePreTokenizer final : public PreTokenizer {
 public:
  explicit SequencePreTokenizer(std::vector<std::unique_ptr<PreTokenizer>> s) : steps_(std::move(s)) {}
  void apply(std::vector<TextPiece>& pieces) const override {
    for (const auto& s : steps_) s->apply(pieces);
  }

 private:
  std::vector<std::unique_ptr<PreTokenizer>> steps_;
};

// ---- decoders ----------------------------------------------------------------------------------

class ByteLevelDecoder final : public Decoder {
 public:
  void apply(std::vector<std::string>& tokens) const override {
    const ByteMap& m = byte_map();
    std::string bytes;
    for (const std::string& t : tokens) {
      std::string mapped;
      bool all = true;
      for (std::size_t i = 0; i < t.size() && all;) {
        auto it = m.to_byte.find(unicode::next(t, i));
        if (it == m.to_byte.end())
          all = false;
        else
          mapped += static_cast<char>(it->second);
      }
      bytes += all ? mapped : t;  // a token with a character outside the map passes as its own bytes
    }
    tokens.assign(1, unicode::lossy(bytes));
  }
};

// "<0xNN>" -> the byte (Rust's u8::from_str_radix, which also takes a leading '+').
std::optional<unsigned char> byte_token(const std::string& t) {
  if (t.size() != 6 || t.compare(0, 3, "<0x") != 0 || t[5] != '>') return std::nullopt;
  auto hex = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  };
  if (t[3] == '+') {
    const int v = hex(t[4]);
    if (v < 0) return std::nullopt;
    return static_cast<unsigned char>(v);
  }
  const int hi = hex(t[3]), lo = hex(t[4]);
  if (hi < 0 || lo < 0) return std::nullopt;
  return static_cast<unsigned char>(hi * 16 + lo);
}

class ByteFallbackDecoder final : public Decoder {
 public:
  void apply(std::vector<std::string>& tokens) const override {
    std::vector<std::string> out;
    std::string pending;
    auto flush = [&] {
      if (pending.empty()) return;
      if (unicode::is_valid_utf8(pending)) {
        out.push_back(pending);
      } else {
        for (std::size_t i = 0; i < pending.size(); ++i) out.emplace_back(unicode::kReplacement);  // one per byte
      }
      pending.clear();
    };
    for (std::string& t : tokens) {
      if (auto b = byte_token(t)) {
        pending += static_cast<char>(*b);
        continue;
      }
      flush();
      out.push_back(std::move(t));
    }
    flush();
    tokens = std::move(out);
  }
};

class FuseDecoder final : public Decoder {
 public:
  void apply(std::vector<std::string>& tokens) const override {
    std::string all;
    for (const auto& t : tokens) all += t;
    tokens.assign(1, std::move(all));
  }
};

class StripDecoder final : public Decoder {
 public:
  StripDecoder(char32_t c, std::size_t start, std::size_t stop) : c_(c), start_(start), stop_(stop) {}
  void apply(std::vector<std::string>& tokens) const override {
    for (std::string& t : tokens) {
      std::vector<std::pair<std::size_t, char32_t>> chars;  // byte offset, code point
      for (std::size_t i = 0; i < t.size();) {
        const std::size_t at = i;
        chars.emplace_back(at, unicode::next(t, i));
      }
      std::size_t first = 0;
      for (std::size_t i = 0; i < start_ && i < chars.size() && chars[i].second == c_; ++i) first = i + 1;
      std::size_t last = chars.size();
      for (std::size_t i = 0; i < stop_ && i < chars.size() && chars[chars.size() - 1 - i].second == c_; ++i)
        last = chars.size() - 1 - i;
      if (last <= first) {
        t.clear();
        continue;
      }
      const std::size_t b = chars[first].first, e = last == chars.size() ? t.size() : chars[last].first;
      t = t.substr(b, e - b);
    }
  }

 private:
  char32_t c_;
  std::size_t start_, stop_;
};

class ReplaceDecoder final : public Decoder {
 public:
  ReplaceDecoder(TokenizerRegex re, std::string content) : re_(std::move(re)), content_(std::move(content)) {}
  void apply(std::vector<std::string>& tokens) const override {
    for (std::string& t : tokens) t = replace_all(t, re_, content_);
  }

 private:
  TokenizerRegex re_;
  std::string content_;
};

class MetaspaceDecoder final : public Decoder {
 public:
  MetaspaceDecoder(std::string rep, Prepend scheme) : rep_(std::move(rep)), scheme_(scheme) {}
  void apply(std::vector<std::string>& tokens) const override {
    for (std::size_t k = 0; k < tokens.size(); ++k) {
      std::string out;
      const std::string& t = tokens[k];
      for (std::size_t i = 0; i < t.size();) {
        if (t.compare(i, rep_.size(), rep_) == 0) {
          if (!(k == 0 && scheme_ != Prepend::never)) out += ' ';
          i += rep_.size();
        } else {
          out += t[i++];
        }
      }
      tokens[k] = std::move(out);
    }
  }

 private:
  std::string rep_;
  Prepend scheme_;
};

class SequenceDecoder final : public Decoder {
 public:
  explicit SequenceDecoder(std::vector<std::unique_ptr<Decoder>> s) : steps_(std::move(s)) {}
  void apply(std::vector<std::string>& tokens) const override {
    for (const auto& s : steps_) s->apply(tokens);
  }

 private:
  std::vector<std::unique_ptr<Decoder>> steps_;
};

Expected<std::string> type_of(const json& j, const std::string& where) {
  if (!j.is_object()) return fail(where + ": expected an object");
  return req_string(j, "type", where);
}

// Metaspace's prepend_scheme, or the older add_prefix_space flag.
Expected<Prepend> prepend_scheme(const json& j, const std::string& where) {
  if (auto it = j.find("prepend_scheme"); it != j.end()) {
    const std::string s = it->is_string() ? it->get<std::string>() : "";
    if (s == "always") return Prepend::always;
    if (s == "first") return Prepend::first;
    if (s == "never") return Prepend::never;
    return fail(where + ".prepend_scheme: expected \"always\", \"first\" or \"never\"");
  }
  MET_TRY(bool add, opt_bool(j, "add_prefix_space", true, where));
  return add ? Prepend::always : Prepend::never;
}

Expected<std::string> replacement_char(const json& j, const std::string& where) {
  MET_TRY(std::string rep, req_string(j, "replacement", where));
  std::size_t i = 0;
  if (rep.empty() || !unicode::is_valid_utf8(rep) || (unicode::next(rep, i), i != rep.size()))
    return fail(where + ".replacement: expected one character");
  return rep;
}

}  // namespace

// ---- added tokens ------------------------------------------------------------------------------

std::int32_t AddedTokenMatcher::child(std::int32_t node, unsigned char c) const {
  auto it = edges_.find((static_cast<std::uint64_t>(node) << 8) | c);
  return it == edges_.end() ? -1 : it->second;
}

void AddedTokenMatcher::add(const AddedToken& token, std::string content) {
  if (content.empty()) return;
  std::int32_t node = 0;
  for (unsigned char c : content) {
    std::int32_t next = child(node, c);
    if (next < 0) {
      next = static_cast<std::int32_t>(terminal_.size());
      terminal_.push_back(nullptr);
      edges_.emplace((static_cast<std::uint64_t>(node) << 8) | c, next);
    }
    node = next;
  }
  if (terminal_[static_cast<std::size_t>(node)] == nullptr) terminal_[static_cast<std::size_t>(node)] = &token;
}

std::vector<AddedTokenMatcher::Split> AddedTokenMatcher::split(std::string_view text, bool parse_special) const {
  std::vector<Split> out;
  std::size_t done = 0;  // text before this is already in `out`
  for (std::size_t i = 0; i < text.size();) {
    // The longest token starting at i.
    const AddedToken* best = nullptr;
    std::size_t best_end = 0;
    std::int32_t node = 0;
    for (std::size_t k = i; k < text.size(); ++k) {
      node = child(node, static_cast<unsigned char>(text[k]));
      if (node < 0) break;
      const AddedToken* t = terminal_[static_cast<std::size_t>(node)];
      if (t != nullptr && (parse_special || !t->special)) {
        best = t;
        best_end = k + 1;
      }
    }
    if (best == nullptr) {
      ++i;
      continue;
    }
    std::size_t start = i, stop = best_end;
    if (best->single_word) {
      std::size_t j = stop;
      const bool word_before = start > 0 && unicode::is_word_char(unicode::prev(text, start));
      const bool word_after = stop < text.size() && unicode::is_word_char(unicode::next(text, j));
      if (word_before || word_after) {
        i = best_end;  // the automaton resumes after the discarded match
        continue;
      }
    }
    // As tokenizers: stripping may reach past the next match, which the automaton still reports
    // (it resumes at the end of this match); `done` then moves back and that token is emitted too.
    if (best->lstrip) {
      std::size_t s = start;
      while (s > 0 && unicode::is_whitespace(unicode::prev(text, s))) s -= unicode::prev_len(text, s);
      start = std::max(s, done);
    }
    if (best->rstrip) {
      while (stop < text.size()) {
        std::size_t j = stop;
        if (!unicode::is_whitespace(unicode::next(text, j))) break;
        stop = j;
      }
    }
    if (done < start) out.push_back(Split{done, start, nullptr});
    out.push_back(Split{start, stop, best});
    done = stop;
    i = best_end;
  }
  if (done < text.size()) out.push_back(Split{done, text.size(), nullptr});
  return out;
}

// ---- factories ---------------------------------------------------------------------------------

Expected<std::unique_ptr<Normalizer>> make_normalizer(const json& j, const std::string& where) {
  MET_TRY(std::string type, type_of(j, where));
  if (type == "NFC" || type == "NFD" || type == "NFKC" || type == "NFKD") {
    MET_CHECK(check_keys(j, {"type"}, where));
    const unicode::Form f = type == "NFC"    ? unicode::Form::nfc
                            : type == "NFD"  ? unicode::Form::nfd
                            : type == "NFKC" ? unicode::Form::nfkc
                                             : unicode::Form::nfkd;
    return std::unique_ptr<Normalizer>(std::make_unique<FormNormalizer>(f));
  }
  if (type == "Replace") {
    MET_CHECK(check_keys(j, {"type", "pattern", "content"}, where));
    MET_TRY(TokenizerRegex re, pattern(j, where));
    MET_TRY(std::string content, req_string(j, "content", where));
    return std::unique_ptr<Normalizer>(std::make_unique<ReplaceNormalizer>(std::move(re), std::move(content)));
  }
  if (type == "Prepend") {
    MET_CHECK(check_keys(j, {"type", "prepend"}, where));
    MET_TRY(std::string p, req_string(j, "prepend", where));
    return std::unique_ptr<Normalizer>(std::make_unique<PrependNormalizer>(std::move(p)));
  }
  if (type == "Sequence") {
    MET_CHECK(check_keys(j, {"type", "normalizers"}, where));
    auto it = j.find("normalizers");
    if (it == j.end() || !it->is_array()) return fail(where + ".normalizers: expected an array");
    std::vector<std::unique_ptr<Normalizer>> steps;
    for (std::size_t i = 0; i < it->size(); ++i) {
      MET_TRY(auto s, make_normalizer((*it)[i], where + ".normalizers[" + std::to_string(i) + "]"));
      steps.push_back(std::move(s));
    }
    return std::unique_ptr<Normalizer>(std::make_unique<SequenceNormalizer>(std::move(steps)));
  }
  return fail(where + ": unsupported normalizer type '" + type + "'");
}

Expected<std::unique_ptr<PreTokenizer>> make_pre_tokenizer(const json& j, const std::string& where) {
  MET_TRY(std::string type, type_of(j, where));
  if (type == "Split") {
    MET_CHECK(check_keys(j, {"type", "pattern", "behavior", "invert"}, where));
    MET_TRY(TokenizerRegex re, pattern(j, where));
    MET_TRY(std::string b, req_string(j, "behavior", where));
    Behavior behavior;
    if (b == "Removed")
      behavior = Behavior::removed;
    else if (b == "Isolated")
      behavior = Behavior::isolated;
    else if (b == "MergedWithPrevious")
      behavior = Behavior::merged_with_previous;
    else if (b == "MergedWithNext")
      behavior = Behavior::merged_with_next;
    else if (b == "Contiguous")
      behavior = Behavior::contiguous;
    else
      return fail(where + ".behavior: unknown split behavior '" + b + "'");
    MET_TRY(bool invert, opt_bool(j, "invert", false, where));
    return std::unique_ptr<PreTokenizer>(std::make_unique<SplitPreTokenizer>(std::move(re), behavior, invert));
  }
  if (type == "ByteLevel") {
    MET_CHECK(check_keys(j, {"type", "add_prefix_space", "trim_offsets", "use_regex"}, where));
    MET_TRY(bool prefix, opt_bool(j, "add_prefix_space", true, where));
    MET_TRY(bool use_regex, opt_bool(j, "use_regex", true, where));
    std::optional<TokenizerRegex> re;
    if (use_regex) {
      MET_TRY(TokenizerRegex r, TokenizerRegex::compile(kGpt2Pattern, where + ".use_regex"));
      re = std::move(r);
    }
    return std::unique_ptr<PreTokenizer>(std::make_unique<ByteLevelPreTokenizer>(prefix, std::move(re)));
  }
  if (type == "Metaspace") {
    MET_CHECK(check_keys(j, {"type", "replacement", "prepend_scheme", "split", "add_prefix_space", "str_rep"}, where));
    MET_TRY(std::string rep, replacement_char(j, where));
    MET_TRY(Prepend scheme, prepend_scheme(j, where));
    MET_TRY(bool split, opt_bool(j, "split", true, where));
    return std::unique_ptr<PreTokenizer>(std::make_unique<MetaspacePreTokenizer>(std::move(rep), scheme, split));
  }
  if (type == "Sequence") {
    MET_CHECK(check_keys(j, {"type", "pretokenizers"}, where));
    auto it = j.find("pretokenizers");
    if (it == j.end() || !it->is_array()) return fail(where + ".pretokenizers: expected an array");
    std::vector<std::unique_ptr<PreTokenizer>> steps;
    for (std::size_t i = 0; i < it->size(); ++i) {
      MET_TRY(auto s, make_pre_tokenizer((*it)[i], where + ".pretokenizers[" + std::to_string(i) + "]"));
      steps.push_back(std::move(s));
    }
    return std::unique_ptr<PreTokenizer>(std::make_unique<SequencePreTokenizer>(std::move(steps)));
  }
  return fail(where + ": unsupported pre_tokenizer type '" + type + "'");
}

Expected<std::unique_ptr<Decoder>> make_decoder(const json& j, const std::string& where) {
  MET_TRY(std::string type, type_of(j, where));
  if (type == "ByteLevel") {
    MET_CHECK(check_keys(j, {"type", "add_prefix_space", "trim_offsets", "use_regex"}, where));
    return std::unique_ptr<Decoder>(std::make_unique<ByteLevelDecoder>());
  }
  if (type == "ByteFallback") {
    MET_CHECK(check_keys(j, {"type"}, where));
    return std::unique_ptr<Decoder>(std::make_unique<ByteFallbackDecoder>());
  }
  if (type == "Fuse") {
    MET_CHECK(check_keys(j, {"type"}, where));
    return std::unique_ptr<Decoder>(std::make_unique<FuseDecoder>());
  }
  if (type == "Strip") {
    MET_CHECK(check_keys(j, {"type", "content", "start", "stop"}, where));
    MET_TRY(std::string content, req_string(j, "content", where));
    std::size_t i = 0;
    if (content.empty() || !unicode::is_valid_utf8(content)) return fail(where + ".content: expected one character");
    const char32_t c = unicode::next(content, i);
    if (i != content.size()) return fail(where + ".content: expected one character");
    auto num = [&](const char* key) -> Expected<std::size_t> {
      auto it = j.find(key);
      if (it == j.end() || !it->is_number_unsigned()) return fail(where + "." + key + ": expected a non-negative integer");
      return it->get<std::size_t>();
    };
    MET_TRY(std::size_t start, num("start"));
    MET_TRY(std::size_t stop, num("stop"));
    return std::unique_ptr<Decoder>(std::make_unique<StripDecoder>(c, start, stop));
  }
  if (type == "Replace") {
    MET_CHECK(check_keys(j, {"type", "pattern", "content"}, where));
    MET_TRY(TokenizerRegex re, pattern(j, where));
    MET_TRY(std::string content, req_string(j, "content", where));
    return std::unique_ptr<Decoder>(std::make_unique<ReplaceDecoder>(std::move(re), std::move(content)));
  }
  if (type == "Metaspace") {
    MET_CHECK(check_keys(j, {"type", "replacement", "prepend_scheme", "split", "add_prefix_space", "str_rep"}, where));
    MET_TRY(std::string rep, replacement_char(j, where));
    MET_TRY(Prepend scheme, prepend_scheme(j, where));
    return std::unique_ptr<Decoder>(std::make_unique<MetaspaceDecoder>(std::move(rep), scheme));
  }
  if (type == "Sequence") {
    MET_CHECK(check_keys(j, {"type", "decoders"}, where));
    auto it = j.find("decoders");
    if (it == j.end() || !it->is_array()) return fail(where + ".decoders: expected an array");
    std::vector<std::unique_ptr<Decoder>> steps;
    for (std::size_t i = 0; i < it->size(); ++i) {
      MET_TRY(auto s, make_decoder((*it)[i], where + ".decoders[" + std::to_string(i) + "]"));
      steps.push_back(std::move(s));
    }
    return std::unique_ptr<Decoder>(std::make_unique<SequenceDecoder>(std::move(steps)));
  }
  return fail(where + ": unsupported decoder type '" + type + "'");
}

Expected<void> make_post_processor(const json& j, const std::string& where, std::vector<std::int32_t>& prefix,
                                   std::vector<std::int32_t>& suffix) {
  MET_TRY(std::string type, type_of(j, where));
  if (type == "ByteLevel") {  // adjusts offsets only
    return check_keys(j, {"type", "add_prefix_space", "trim_offsets", "use_regex"}, where);
  }
  if (type == "Sequence") {
    MET_CHECK(check_keys(j, {"type", "processors"}, where));
    auto it = j.find("processors");
    if (it == j.end() || !it->is_array()) return fail(where + ".processors: expected an array");
    for (std::size_t i = 0; i < it->size(); ++i)
      MET_CHECK(make_post_processor((*it)[i], where + ".processors[" + std::to_string(i) + "]", prefix, suffix));
    return {};
  }
  if (type == "BertProcessing" || type == "RobertaProcessing") {
    if (type == "BertProcessing")
      MET_CHECK(check_keys(j, {"type", "sep", "cls"}, where));
    else
      MET_CHECK(check_keys(j, {"type", "sep", "cls", "trim_offsets", "add_prefix_space"}, where));
    auto id_of = [&](const char* key) -> Expected<std::int32_t> {
      auto it = j.find(key);
      if (it == j.end() || !it->is_array() || it->size() != 2 || !(*it)[1].is_number_integer())
        return fail(where + "." + key + ": expected [token, id]");
      return (*it)[1].get<std::int32_t>();
    };
    MET_TRY(std::int32_t cls, id_of("cls"));
    MET_TRY(std::int32_t sep, id_of("sep"));
    prefix.insert(prefix.begin(), cls);
    suffix.push_back(sep);
    return {};
  }
  if (type == "TemplateProcessing") {
    MET_CHECK(check_keys(j, {"type", "single", "pair", "special_tokens"}, where));
    auto single = j.find("single");
    auto specials = j.find("special_tokens");
    if (single == j.end() || !single->is_array()) return fail(where + ".single: expected an array");
    if (specials == j.end() || !specials->is_object()) return fail(where + ".special_tokens: expected an object");
    std::vector<std::int32_t> pre, post;
    bool seen_sequence = false;
    for (std::size_t i = 0; i < single->size(); ++i) {
      const json& item = (*single)[i];
      const std::string at = where + ".single[" + std::to_string(i) + "]";
      if (item.is_object() && item.contains("Sequence")) {
        if (seen_sequence) return fail(at + ": a single-sequence template holds one sequence");
        seen_sequence = true;
        continue;
      }
      if (!item.is_object() || !item.contains("SpecialToken") || !item["SpecialToken"].is_object() ||
          !item["SpecialToken"].contains("id") || !item["SpecialToken"]["id"].is_string())
        return fail(at + ": expected {\"SpecialToken\": {\"id\": ...}} or {\"Sequence\": ...}");
      const std::string name = item["SpecialToken"]["id"].get<std::string>();
      auto st = specials->find(name);
      if (st == specials->end() || !st->is_object() || !st->contains("ids") || !(*st)["ids"].is_array())
        return fail(at + ": special token '" + name + "' is not in special_tokens");
      for (const json& id : (*st)["ids"]) {
        if (!id.is_number_integer()) return fail(where + ".special_tokens['" + name + "'].ids: expected integers");
        (seen_sequence ? post : pre).push_back(id.get<std::int32_t>());
      }
    }
    if (!seen_sequence) return fail(where + ".single: the template has no sequence");
    prefix.insert(prefix.begin(), pre.begin(), pre.end());
    suffix.insert(suffix.end(), post.begin(), post.end());
    return {};
  }
  return fail(where + ": unsupported post_processor type '" + type + "'");
}

}  // namespace met::text
