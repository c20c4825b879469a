// The stages of a tokenizer.json, each a small class built from its JSON object: normalisers,
// pre-tokenizers, post-processor (as the ids it puts before and after a sequence), decoders and
// the added-token matcher. Internal to the tokenizer; tokenizer.hpp is the interface.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "core/expected.hpp"
#include "text/tokenizer_bpe.hpp"

namespace met::text {

// A piece of text on its way through the pipeline; `at_start` marks one that begins at offset 0
// of the caller's text (Metaspace's prepend_scheme "first" asks).
struct TextPiece {
  std::string text;
  bool at_start = false;
};

class Normalizer {
 public:
  virtual ~Normalizer() = default;
  virtual void apply(std::string& text) const = 0;
};

class PreTokenizer {
 public:
  virtual ~PreTokenizer() = default;
  virtual void apply(std::vector<TextPiece>& pieces) const = 0;
};

class Decoder {
 public:
  virtual ~Decoder() = default;
  virtual void apply(std::vector<std::string>& tokens) const = 0;
};

struct AddedToken {
  std::string content;
  std::int32_t id = 0;
  bool special = false;
  bool single_word = false;
  bool lstrip = false;
  bool rstrip = false;
  bool normalized = false;
};

// Leftmost-longest matching of added tokens (what tokenizers' Aho-Corasick automaton finds).
class AddedTokenMatcher {
 public:
  struct Split {
    std::size_t begin, end;
    const AddedToken* token;  // null: ordinary text
  };
  void add(const AddedToken& token, std::string content);
  bool empty() const { return terminal_.size() <= 1; }
  // Splits `text` into ordinary text and added tokens; `parse_special` false ignores special ones.
  std::vector<Split> split(std::string_view text, bool parse_special) const;

 private:
  std::int32_t child(std::int32_t node, unsigned char c) const;
  std::unordered_map<std::uint64_t, std::int32_t> edges_;
  std::vector<const AddedToken*> terminal_ = {nullptr};  // per node; node 0 is the root
};

struct TokenizerPipeline {
  std::vector<std::unique_ptr<AddedToken>> added;  // owned; the matchers point into it
  std::unordered_map<std::string, std::int32_t> added_by_content;
  std::unordered_map<std::int32_t, const AddedToken*> added_by_id;
  AddedTokenMatcher raw_matcher;         // added tokens with normalized = false, on the raw text
  AddedTokenMatcher normalized_matcher;  // normalized = true, on each normalised segment
  std::unique_ptr<Normalizer> normalizer;
  std::unique_ptr<PreTokenizer> pre_tokenizer;
  std::optional<BpeModel> model;
  std::vector<std::int32_t> prefix, suffix;  // the post-processor with add_special_tokens
  std::unique_ptr<Decoder> decoder;
  bool byte_fallback_decoder = false;  // the decoder chain holds a ByteFallback step
  std::int32_t id_end = 0;
};

Expected<std::unique_ptr<Normalizer>> make_normalizer(const nlohmann::json& j, const std::string& where);
Expected<std::unique_ptr<PreTokenizer>> make_pre_tokenizer(const nlohmann::json& j, const std::string& where);
Expected<std::unique_ptr<Decoder>> make_decoder(const nlohmann::json& j, const std::string& where);
// Adds the post-processor's ids around a sequence to `prefix` and `suffix`.
Expected<void> make_post_processor(const nlohmann::json& j, const std::string& where, std::vector<std::int32_t>& prefix,
                                   std::vector<std::int32_t>& suffix);

}  // namespace met::text
