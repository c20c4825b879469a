// The BPE model of tokenizer.json: vocabulary, ranked merges, unknown-token and byte-fallback
// rules, and a bounded cache of pre-token results. Merging follows tokenizers exactly: the
// lowest-ranked adjacent pair first, ties to the leftmost, until no ranked pair is left.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "core/expected.hpp"

namespace met::text {

class BpeModel {
 public:
  // `where` is the error prefix of the model object ("tok.json: model").
  static Expected<BpeModel> from_json(const nlohmann::json& model, const std::string& where);

  // Appends the ids of one pre-token (valid UTF-8, non-empty).
  void tokenize(std::string_view word, std::vector<std::int32_t>& out) const;

  std::optional<std::int32_t> token_id(std::string_view token) const;
  const std::string* token(std::int32_t id) const;  // null for an id the vocabulary lacks
  std::int32_t id_end() const { return static_cast<std::int32_t>(id_to_token_.size()); }

 private:
  struct Merge {
    std::uint32_t rank;
    std::int32_t id;
  };
  struct Cache {
    std::mutex mu;
    std::unordered_map<std::string, std::vector<std::int32_t>> map;
  };
  // Pre-tokens at most this many bytes long are cached, up to kCacheEntries of them.
  static constexpr std::size_t kCacheWordBytes = 256;
  static constexpr std::size_t kCacheEntries = 1 << 16;

  void merge_word(std::string_view word, std::vector<std::int32_t>& out) const;
  static std::uint64_t pair_key(std::int32_t a, std::int32_t b) {
    return (static_cast<std::uint64_t>(static_cast<std::uint32_t>(a)) << 32) | static_cast<std::uint32_t>(b);
  }

  std::unordered_map<std::string, std::int32_t> vocab_;
  std::vector<std::string> id_to_token_;
  std::vector<bool> has_id_;
  std::unordered_map<std::uint64_t, Merge> merges_;
  std::optional<std::int32_t> unk_id_;
  std::string prefix_;  // continuing_subword_prefix ("" = none)
  std::string suffix_;  // end_of_word_suffix ("" = none)
  bool fuse_unk_ = false;
  bool byte_fallback_ = false;
  bool ignore_merges_ = false;
  std::array<std::int32_t, 256> byte_ids_{};  // <0xNN> ids, -1 where absent
  std::unique_ptr<Cache> cache_ = std::make_unique<Cache>();
};

}  // namespace met::text
