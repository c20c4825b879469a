// Test helpers of the cpu backend tests: assets of a checkpoint emitted at 4 and at 1 threads, and a
// greedy (or sampled, or teacher-forced) generation over them with every step's logits kept.
#pragma once

#include <memory>
#include <tuple>

#include "interp/assets.hpp"
#include "interp/backend_factory.hpp"
#include "interp/cpu_backend.hpp"
#include "interp/generate.hpp"
#include "tiny_model.hpp"

namespace met::testing {

// host-cpu assets of ckpt at 4 threads and at 1 (name4, name1), the spec's other fields as given.
inline std::pair<std::filesystem::path, std::filesystem::path> assets_4_and_1_threads(const std::filesystem::path& ckpt,
                                                                                     const std::string& name,
                                                                                     EmitSpec spec = {}) {
  spec.threads = 4;
  auto four = write_assets(ckpt, spec, name + "4");
  spec.threads = 1;
  return {four, write_assets(ckpt, spec, name + "1")};
}

struct Run {
  std::vector<std::vector<std::int32_t>> tokens;
  std::vector<std::vector<std::vector<float>>> logits;
};

inline Expected<Run> run_assets(const std::filesystem::path& assets, const std::vector<std::vector<std::int32_t>>& prompts,
                                std::int64_t max_tokens, std::uint32_t threads = 0, interp::Sampling sampling = {},
                                std::vector<std::vector<std::int32_t>> forced = {}) {
  MET_TRY(interp::Assets a, interp::load_assets(assets.string()));
  MET_TRY(std::unique_ptr<interp::CpuBackend> b, interp::CpuBackend::create(a, threads));
  interp::GenerateRequest req;
  req.prompts = prompts;
  req.max_tokens = max_tokens;
  req.keep_logits = true;
  req.sampling = sampling;
  req.forced = std::move(forced);  // teacher forcing (GenerateRequest::forced)
  MET_TRY(interp::GenerateResult r, interp::generate(*b, a.packet, a.build, req));
  return Run{r.tokens, r.logits};
}

// A GPU class's assets on the cpu bodies (the cpu-oracle backend, one worker per stream), greedy.
inline Run run_oracle(const std::filesystem::path& assets, const std::vector<std::vector<std::int32_t>>& prompts,
                      std::int64_t max_tokens) {
  auto a = interp::load_assets(assets.string());
  REQUIRE_MESSAGE(a.ok(), (a.ok() ? "" : a.error().message));
  auto b = interp::make_backend("cpu-oracle", *a);
  REQUIRE_MESSAGE(b.ok(), (b.ok() ? "" : b.error().message));
  interp::GenerateRequest req;
  req.prompts = prompts;
  req.max_tokens = max_tokens;
  req.keep_logits = true;
  auto r = interp::generate(**b, a->packet, a->build, req);
  REQUIRE_MESSAGE(r.ok(), (r.ok() ? "" : r.error().message));
  return Run{r->tokens, r->logits};
}

inline Run must_run(const std::filesystem::path& assets, const std::vector<std::vector<std::int32_t>>& prompts,
                    std::int64_t max_tokens, std::uint32_t threads = 0) {
  auto r = run_assets(assets, prompts, max_tokens, threads);
  REQUIRE_MESSAGE(r.ok(), (r.ok() ? "" : r.error().message));
  return *r;
}

}  // namespace met::testing
