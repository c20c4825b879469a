// The Hugging Face Hub as a checkpoint source for planning: config.json, hf_quant_config.json,
// the safetensors index and each shard's header (by HTTP range request; weight bytes are never
// downloaded), cached under <cache>/met/hub/<org>--<name>/<commit sha>/ so a revision is
// fetched once. HubCheckpoint serves such a cache directory to the model layer.
#pragma once

#include <cstdint>
#include <map>
#include <string>

#include "core/expected.hpp"
#include "tree/checkpoint_dir.hpp"

namespace met::hub {

struct HubOptions {
  std::string endpoint;    // "https://huggingface.co" or a mirror; no trailing '/'
  std::string token;       // HF_TOKEN; sent as a bearer token, never printed
  std::string cache_root;  // "$XDG_CACHE_HOME" or "$HOME/.cache"
  std::string revision = "main";
};

// "ORG/NAME": letters, digits, '-', '_', '.'; neither part empty, "." or "..".
bool valid_repo_id(const std::string& repo);

// Resolves the revision to a commit through the Hub API and makes sure the cache holds the files
// planning reads; returns the cache directory. Errors name the URL (never the token) and say
// what to do for a network failure, 401/403 (gated or private: HF_TOKEN) and 404.
Expected<std::string> fetch_model(const HubOptions& options, const std::string& repo);

// A cache directory written by fetch_model: small files are read whole, a shard from its saved
// header, and its size is the size the server reported.
class HubCheckpoint final : public CheckpointSource {
 public:
  // repo: "ORG/NAME" (for messages); dir: what fetch_model returned.
  static Expected<HubCheckpoint> open(const std::string& repo, const std::string& dir);
  std::string name() const override;
  bool exists(const std::string& file) const override;
  Expected<std::string> read(const std::string& file) const override;
  Expected<std::string> read_prefix(const std::string& file, std::uint64_t n) const override;
  Expected<std::uint64_t> size(const std::string& file) const override;
  std::string display(const std::string& file) const override;

 private:
  std::string repo_, dir_;
  std::map<std::string, std::uint64_t> shard_sizes_;  // shard file -> size on the Hub
};

}  // namespace met::hub
