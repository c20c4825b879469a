// UTF-8 and Unicode helpers for the tokenizer: code point iteration, Rust-compatible lossy UTF-8
// repair (one U+FFFD per maximal invalid subpart, as String::from_utf8_lossy), ICU normalisation
// forms and the character properties Rust's char methods use.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace met::text::unicode {

// U+FFFD in UTF-8.
inline constexpr std::string_view kReplacement = "\xEF\xBF\xBD";

// Length in bytes of the valid UTF-8 sequence starting at s[i] (s must be valid UTF-8).
std::size_t char_len(std::string_view s, std::size_t i);
// Decodes the code point at s[i] of valid UTF-8 and advances i past it.
char32_t next(std::string_view s, std::size_t& i);
void append(std::string& out, char32_t cp);
// The code point that ends at byte offset `end` (> 0) of valid UTF-8, and its length in bytes.
char32_t prev(std::string_view s, std::size_t end);
std::size_t prev_len(std::string_view s, std::size_t end);

bool is_valid_utf8(std::string_view s);
// Valid UTF-8 with each maximal invalid subpart replaced by one U+FFFD (Rust's from_utf8_lossy).
std::string lossy(std::string_view bytes);
// Number of trailing bytes of `s` that begin a UTF-8 sequence that is valid so far but incomplete.
std::size_t incomplete_tail(std::string_view s);

enum class Form { nfc, nfd, nfkc, nfkd };
// Normalises valid UTF-8 with ICU; an ICU failure leaves the text unchanged and returns false.
bool normalize(Form form, std::string& text);

bool is_whitespace(char32_t cp);    // Unicode White_Space (Rust char::is_whitespace)
bool is_alphanumeric(char32_t cp);  // Alphabetic or a Number category (Rust char::is_alphanumeric)
bool is_word_char(char32_t cp);     // Rust regex \w: Alphabetic, marks, Nd, Pc, Join_Control

}  // namespace met::text::unicode
