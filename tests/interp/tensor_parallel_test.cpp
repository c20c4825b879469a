// The cpu backend's simulated ranks (emit --tp N): N worker groups in one process meeting at every
// all-reduce and gather. A TP emit must give TP=1's greedy tokens and logits. The cuda backend's
// ranks are wired by the collective plan (collective_plan_test.cpp).
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <functional>

#include "cpu_run.hpp"

namespace met {
namespace {

// Logits may differ from TP=1's by the fp32 reassociation of the row-parallel sums (each rank sums
// its columns, then the ranks' sums are added): a bf16 ulp now and then, which later layers carry
// on. 2e-2 of the largest |logit| is the bound the issue sets for the 8B at TP=2; the tiny models
// stay within 1e-2 (a rank that dropped a peer's partial or a gathered slice is off by far more).
constexpr double kLogitTolerance = 2e-2;
constexpr std::int64_t kSteps = 32;

}  // namespace

TEST_CASE("a TP emit on the cpu backend (2, 4 and 8 simulated ranks) gives TP=1's greedy tokens for 32 steps and its logits within 2e-2 of the largest, for a tiny Llama-3 (bf16, modelopt fp8 and block-scaled fp8), a tiny Qwen3 and a tiny Qwen3-MoE (an all-reduce that misses a rank, a gather out of order, a wrong weight window or an expert's slice lost fails)") {
  // Prompts of 5 and 12 tokens: the 8-row and the 32-row prefill buckets, then decode at 2 rows.
  const std::vector<std::vector<std::int32_t>> prompts = {{11, 200, 3, 47, 5}, {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}};
  struct Model {
    std::string name, config;
    std::vector<int> tps;
    bool routed = false;  // routing decisions can flip on a ulp: free-running paths may part
    bool modelopt = false;  // fp8 weights of per-tensor scales, static activation scales (W8A8)
    bool block128 = false;  // fp8 weights of 128 x 128 scale blocks (W8A16): windows of whole blocks
  };
  // The tiny Qwen3-MoE with 8 heads over 8 KV heads, so that 4 and 8 ranks split them too.
  std::string moe8 = testing::oracle_config("tiny-qwen3-moe.json");
  for (const char* key : {"\"num_attention_heads\": 4", "\"num_key_value_heads\": 2"}) {
    const auto at = moe8.find(key);
    REQUIRE(at != std::string::npos);
    moe8.replace(at, std::string(key).size(), std::string(key).substr(0, std::string(key).size() - 1) + "8");
  }
  const Model models[] = {{"tiny-llama3-kv8.json", testing::oracle_config("tiny-llama3-kv8.json"), {2, 4, 8}},
                          {"tiny-qwen3-kv8.json", testing::oracle_config("tiny-qwen3-kv8.json"), {2, 4, 8}},
                          // tied head, 2 KV heads (at TP 4 and 8 one per rank, each shared by 2 or 4 ranks)
                          {"tiny-llama3.json", testing::oracle_config("tiny-llama3.json"), {2, 4, 8}},
                          // tied head, q/k norms, 4 heads over 2 KV heads
                          {"tiny-qwen3.json", testing::oracle_config("tiny-qwen3.json"), {2, 4}},
                          // routed experts: the router replicated, each expert's intermediate size split
                          {"tiny-qwen3-moe.json", testing::oracle_config("tiny-qwen3-moe.json"), {2, 4}, true},
                          {"tiny-qwen3-moe-kv8", moe8, {2, 4, 8}, true},
                          // modelopt fp8: each window keeps its tensor's weight and input scales
                          {"tiny-llama3-kv8-fp8-modelopt", testing::oracle_config("tiny-llama3-kv8.json"), {2, 4, 8}, false, true},
                          // block-scaled fp8: 256-wide projections cut into whole 128-blocks at TP 2
                          {"tiny-llama3-kv8-fp8-block128", testing::oracle_config("tiny-llama3-kv8.json"), {2}, false, false, true}};
  for (const auto& m : models) {
    const std::string cfg = m.name;
    CAPTURE(cfg);
    const auto ckpt = m.modelopt   ? testing::tiny_checkpoint("tp-run-" + cfg, m.config, /*seed=*/5, Format::fp8_e4m3,
                                                              model::Fp8Layout::modelopt)
                      : m.block128 ? testing::tiny_checkpoint("tp-run-" + cfg, m.config, /*seed=*/5, Format::fp8_e4m3)
                                   : testing::tiny_checkpoint("tp-run-" + cfg, m.config, /*seed=*/5);
    testing::EmitSpec spec;
    spec.threads = 2;
    spec.rungs = {1, 2};
    spec.max_ctx = 64;
    const auto one = testing::must_run(testing::write_assets(ckpt, spec, "tp1-" + cfg), prompts, kSteps);
    std::set<std::int32_t> distinct;
    for (const auto& seq : one.tokens) distinct.insert(seq.begin(), seq.end());
    CHECK(distinct.size() >= 2);  // the tokens move (the logits are compared in full at every step)
    double largest = 0;
    for (const auto& seq : one.logits)
      for (const auto& step : seq)
        for (float v : step) largest = std::max(largest, static_cast<double>(std::fabs(v)));
    for (int tp : m.tps) {
      CAPTURE(tp);
      spec.tp = tp;
      const auto dir = testing::write_assets(ckpt, spec, "tp" + std::to_string(tp) + "-" + cfg);
      // Teacher-forced with TP=1's tokens, so one near tie cannot send the two runs down different
      // paths; the dense models must also match free-running.
      auto forced = testing::run_assets(dir, prompts, kSteps, 0, {}, one.tokens);
      REQUIRE_MESSAGE(forced.ok(), (forced.ok() ? "" : forced.error().message));
      const auto& run = *forced;
      if (!m.routed) CHECK(testing::must_run(dir, prompts, kSteps).tokens == one.tokens);
      double worst = 0;  // over the steps within tolerance
      std::int64_t judged = 0, steps = 0, flipped = 0;
      REQUIRE(run.logits.size() == one.logits.size());
      for (std::size_t s = 0; s < one.logits.size(); ++s) {
        REQUIRE(run.logits[s].size() == one.logits[s].size());
        for (std::size_t t = 0; t < one.logits[s].size(); ++t) {
          ++steps;
          double step = 0;
          for (std::size_t v = 0; v < one.logits[s][t].size(); ++v)
            step = std::max(step, static_cast<double>(std::fabs(run.logits[s][t][v] - one.logits[s][t][v])));
          // A routed model's step may route one row to another expert where TP=1's router scores
          // two nearly tie (a ulp of the residual decides): such a step is counted, not compared.
          if (m.routed && step > kLogitTolerance * largest) {
            ++flipped;
            continue;
          }
          worst = std::max(worst, step);
          // The argmax is judged where TP=1's best two logits are further apart than the tolerance.
          std::vector<float> top = one.logits[s][t];
          std::partial_sort(top.begin(), top.begin() + 2, top.end(), std::greater<>());
          if (top[0] - top[1] <= 2 * kLogitTolerance * largest) continue;
          ++judged;
          CHECK(run.tokens[s][t] == one.tokens[s][t]);
        }
      }
      MESSAGE(cfg << " TP " << tp << ": worst |logit - TP=1's| " << worst << " of largest " << largest << ", argmax judged at "
                  << judged << " of " << steps << " steps, " << flipped << " step(s) routed apart");
      CHECK(judged >= steps / 4);  // the argmax check is not vacuous
      CHECK(flipped * 16 <= steps);  // a lost expert slice or all-reduce moves every step, not one in 16
      CHECK(worst <= kLogitTolerance * largest);
    }
  }
}

TEST_CASE("TP assets with a rank's packet missing or swapped are refused at load") {
  const auto ckpt = testing::tiny_checkpoint("tp-load", testing::oracle_config("tiny-llama3-kv8.json"));
  testing::EmitSpec spec;
  spec.tp = 4;
  spec.rungs = {1};
  spec.buckets = {8};
  spec.max_ctx = 32;
  const auto dir = testing::write_assets(ckpt, spec, "tp-load");
  auto a = interp::load_assets(dir.string());
  REQUIRE_MESSAGE(a.ok(), (a.ok() ? "" : a.error().message));
  CHECK(a->other_ranks.size() == 3);

  std::filesystem::rename(dir / "model.rank2.pkt", dir / "model.rank2.bak");
  std::filesystem::copy_file(dir / "model.rank1.pkt", dir / "model.rank2.pkt");
  auto swapped = interp::load_assets(dir.string());
  REQUIRE_FALSE(swapped.ok());
  CHECK(swapped.error().message.find("model.rank2.pkt: is not rank 2 of this emit (rank 1 of 4") != std::string::npos);
  std::filesystem::remove(dir / "model.rank2.pkt");
  auto missing = interp::load_assets(dir.string());
  REQUIRE_FALSE(missing.ok());
  CHECK(missing.error().message == (dir / "model.rank2.pkt").string() + ": cannot open");
}

TEST_CASE(
    "an h200-sxm --tp 2 emit runs on the cpu backend only while every rank places its collective slices on the same streams: "
    "rank 1 with two streams swapped is refused (a rendezvous that paired slices placed differently could hang)") {
  const auto ckpt = testing::tiny_checkpoint("tp-place-ckpt", testing::oracle_config("tiny-llama3-kv8.json"));
  testing::EmitSpec spec;
  spec.device = "h200-sxm";
  spec.tp = 2;
  spec.rungs = {1};
  spec.buckets = {32};
  spec.max_ctx = 64;
  const auto dir = testing::write_assets(ckpt, spec, "tp-place");
  auto a = interp::load_assets(dir.string());
  REQUIRE_MESSAGE(a.ok(), (a.ok() ? "" : a.error().message));
  {
    auto ok = interp::CpuBackend::create(*a, 0, /*any_class=*/true);
    CHECK_MESSAGE(ok.ok(), (ok.ok() ? "" : ok.error().message));
  }
  auto& streams = a->other_ranks[0].programs[0].streams;
  REQUIRE(streams.size() > 1);
  std::swap(streams[0], streams[1]);
  auto swapped = interp::CpuBackend::create(*a, 0, /*any_class=*/true);
  REQUIRE_FALSE(swapped.ok());
  CHECK(swapped.error().message.find("places its slices on other streams than rank 0's") != std::string::npos);
}

}  // namespace met
