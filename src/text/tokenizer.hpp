// A tokenizer.json (Hugging Face tokenizers format) loaded for encode and decode that agree with
// the tokenizers library token for token: added tokens split off the raw text first, then the
// normaliser, pre-tokenizer and BPE model run on the rest, then the post-processor. Decoding
// chains the file's decoders; invalid UTF-8 becomes U+FFFD as tokenizers does.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/expected.hpp"

namespace met::text {

struct TokenizerPipeline;  // normaliser, pre-tokenizer, model, post-processor, decoder, added tokens

class Tokenizer {
 public:
  // `display` names the file in error messages ("models/x/tokenizer.json: model.merges[3]: ...").
  static Expected<Tokenizer> from_json(std::string_view json, const std::string& display);

  Tokenizer(Tokenizer&&) noexcept;
  Tokenizer& operator=(Tokenizer&&) noexcept;
  ~Tokenizer();

  // add_special_tokens: apply the post-processor's template (e.g. a leading BOS).
  // parse_special_tokens: false encodes the text of special added tokens like any other text
  // (tokenizers' encode_special_tokens); non-special added tokens still split.
  // Invalid UTF-8 in `text` is first replaced as String::from_utf8_lossy would.
  std::vector<std::int32_t> encode(std::string_view text, bool add_special_tokens, bool parse_special_tokens = true) const;
  // Ids the vocabulary lacks are dropped, as tokenizers does.
  std::string decode(const std::vector<std::int32_t>& ids, bool skip_special_tokens) const;

  std::optional<std::int32_t> token_id(std::string_view token) const;  // added tokens first
  std::optional<std::string> token(std::int32_t id) const;
  bool is_special(std::int32_t id) const;
  // One past the largest id of the model vocabulary and the added tokens (the embedding rows).
  std::int32_t vocab_size() const;

  // For streaming: whether a later id can still change the text of `id`. True for a <0xNN> byte
  // token when the decoder has ByteFallback (it turns a whole run of byte tokens into U+FFFDs if
  // any of it is invalid); nullopt for an id decode drops (unknown, or skipped as special).
  std::optional<bool> pending_in_stream(std::int32_t id, bool skip_special_tokens) const;

  // The ids the post-processor puts around a sequence when add_special_tokens is set.
  const std::vector<std::int32_t>& special_prefix() const;
  const std::vector<std::int32_t>& special_suffix() const;

 private:
  Tokenizer();
  std::unique_ptr<TokenizerPipeline> p_;
};

// Streaming detokenisation: feed ids one at a time, get the text they complete. Never returns a
// partial UTF-8 sequence: text that so far ends in an incomplete (or invalid) byte sequence is
// held back until a later id completes it or finish() is called. The concatenation of every
// push() and finish() equals Tokenizer::decode of all the ids.
class IncrementalDecoder {
 public:
  IncrementalDecoder(const Tokenizer& tokenizer, bool skip_special_tokens);
  std::string push(std::int32_t id);
  std::string finish();  // whatever is held back, with U+FFFD for bytes that never completed

 private:
  std::string emit(bool final);
  const Tokenizer* tok_;
  bool skip_special_;
  std::vector<std::int32_t> ids_;  // from the start of the text already emitted (prefix) on
  std::size_t read_ = 0;           // ids_[0, read_) decode to text already emitted
};

}  // namespace met::text
