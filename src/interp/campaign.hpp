// Measured campaigns (`met circuit run --campaign`): decode at C sequences of a given context and
// prefill of T tokens, each timed on the cuda backend with CUDA events around the one launch of
// its program, after warm-up, over repeats (median, p10, p90, min), with the planner's ceiling for
// the same case beside it and the time per kernel family from in-kernel timestamps. Under --tp
// each case also holds every rank's step times and the walls of its collectives.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/expected.hpp"
#include "estimate/analysis.hpp"
#include "interp/assets.hpp"
#include "interp/cuda_backend.hpp"

namespace met::interp {

struct CampaignCase {
  std::string kind;       // "decode" or "prefill"
  std::int64_t rows = 0;  // C sequences, or T tokens
  std::int64_t ctx = 0;   // decode: tokens already in each sequence's cache
};

// "decode:1,2,4,8,16@ctx=4096" or "prefill:128,512,4096" (decode without @ctx: ctx 4096). A prefill
// of T tokens without a bucket of T rows runs in the chunks a prompt of T tokens takes.
Expected<std::vector<CampaignCase>> parse_campaign(const std::string& spec);

struct CampaignOptions {
  int warmup = 3;
  int repeats = 20;
  std::uint64_t seed = 1;
};

// The planner's ceilings for a case (seconds), from the same library, target and model as the
// emit: on the datasheet basis (the plan's default) and on the measured basis.
struct Ceilings {
  double datasheet_s = 0, measured_s = 0;
};
using CeilingFn = std::function<Ceilings(const CampaignCase&)>;

// Runs every case; the JSON holds the device, the assets, and per case the measured times, the
// ceiling, ms per token and the per-family split.
Expected<nlohmann::json> run_campaign(CudaBackend& backend, const Assets& assets, const std::vector<CampaignCase>& cases,
                                      const CeilingFn& ceiling, const CampaignOptions& options);

// The Markdown table of a campaign's JSON.
std::string campaign_markdown(const nlohmann::json& j);

}  // namespace met::interp
