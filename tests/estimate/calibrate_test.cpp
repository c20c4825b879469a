// The calibration fit (estimate/calibrate): figures recovered from samples made here by arithmetic,
// its constraints, the evidence file it writes read back by the planner, and the choice of cases by
// plan digest.
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "estimate/calibrate.hpp"
#include "model/checkpoint.hpp"
#include "planner/real_tree.hpp"

namespace estimate = met::estimate;
using met::testing::Loaded;

namespace {

// A decode sample at C of model `model`: one gemv family with its ceiling and instructions, timed as
// ceiling / eff + instructions x fixed; the step adds `overhead_ms_per_group` per group.
estimate::Sample gemv_sample(const std::string& model, std::int64_t c, double ceiling_ms, double instructions, double eff,
                             double fixed_us, double overhead_ms_per_group = 0.001) {
  estimate::Sample s;
  s.measured.model = model;
  s.measured.source = "perf-data/x/" + model + ".json";
  s.measured.kind = "decode";
  s.measured.rows = c;
  s.measured.context = 4096;
  const double t = ceiling_ms / eff + instructions * fixed_us * 1e-3;
  s.measured.family_ms["gemv"] = t;
  s.measured.median_ms = t + instructions * overhead_ms_per_group;
  s.families["gemv"] = estimate::FamilyTerms{ceiling_ms, instructions};
  s.groups = instructions;
  return s;
}

const estimate::FittedPoint& only_point(const estimate::Calibration& cal) {
  REQUIRE(cal.families.size() == 1);
  REQUIRE(cal.families[0].points.size() == 1);
  return cal.families[0].points[0];
}

}  // namespace

TEST_CASE("the fit recovers a family's efficiency and fixed time per instruction from three model sizes (catches a fit that drops the "
          "instruction term or swaps the two)") {
  const std::vector<estimate::Sample> samples = {gemv_sample("big", 1, 5.0, 200, 0.8, 9.0), gemv_sample("mid", 1, 1.5, 100, 0.8, 9.0),
                                                 gemv_sample("small", 1, 0.4, 120, 0.8, 9.0)};
  auto cal = estimate::fit("hopper", "h200-sxm", samples);
  REQUIRE(cal.ok());
  const auto& p = only_point(*cal);
  CHECK(p.efficiency == doctest::Approx(0.8).epsilon(1e-9));
  CHECK(p.fixed_us == doctest::Approx(9.0).epsilon(1e-9));
  CHECK(p.rows == 1);
  CHECK_FALSE(p.prefill);
  CHECK(p.sources == std::vector<std::string>{"perf-data/x/big.json", "perf-data/x/mid.json", "perf-data/x/small.json"});
  CHECK(cal->packet_overhead_us == doctest::Approx(1.0).epsilon(1e-9));
}

TEST_CASE("a fit whose fixed time would be negative keeps the efficiency alone, and one faster than the ceiling keeps efficiency 1 "
          "(catches an unconstrained solve writing figures the planner refuses)") {
  // Per-instruction time shrinking with more instructions: the unconstrained fixed time is negative.
  const std::vector<estimate::Sample> negative = {gemv_sample("a", 4, 4.0, 100, 0.5, 0.0), gemv_sample("b", 4, 2.0, 300, 0.55, 0.0)};
  auto cal = estimate::fit("hopper", "h200-sxm", negative);
  REQUIRE(cal.ok());
  CHECK(only_point(*cal).fixed_us == 0.0);
  CHECK(only_point(*cal).efficiency > 0.5);
  CHECK(only_point(*cal).efficiency < 0.55);
  // Measured below the ceiling: efficiency 1, no fixed time to add.
  const std::vector<estimate::Sample> fast = {gemv_sample("a", 4, 4.0, 100, 1.25, 0.0)};
  auto one = estimate::fit("hopper", "h200-sxm", fast);
  REQUIRE(one.ok());
  CHECK(only_point(*one).efficiency == 1.0);
  CHECK(only_point(*one).fixed_us == 0.0);
  CHECK_FALSE(estimate::fit("hopper", "h200-sxm", {}).ok());
}

TEST_CASE("a point measured on one model only fits its fixed time per instruction at efficiency 1, the model's time to the "
          "instruction (catches a fit that carries one model's time per byte to every other model)") {
  // One model at three contexts: bytes and instructions do not move apart, so the two terms cannot be told apart.
  std::vector<estimate::Sample> samples;
  for (const std::int64_t ctx : {512, 4096, 16384}) {
    samples.push_back(gemv_sample("gemma", 4, 0.002, 100, 0.002, 0.0));  // 1 ms: bytes-proportional, as a latency fit reads
    samples.back().measured.context = ctx;
  }
  auto cal = estimate::fit("hopper", "h200-sxm", samples);
  REQUIRE(cal.ok());
  const auto& p = only_point(*cal);
  CHECK(p.efficiency == 1.0);
  CHECK(p.fixed_us == doctest::Approx((1.0 - 0.002) / 100 * 1e3).epsilon(1e-9));
  // A second model turns the two-term fit back on.
  samples.push_back(gemv_sample("other", 4, 1.0, 100, 0.5, 3.0));
  auto two = estimate::fit("hopper", "h200-sxm", samples);
  REQUIRE(two.ok());
  CHECK(only_point(*two).efficiency < 1.0);
}

TEST_CASE("the evidence file a fit writes is read back by the planner with the fitted figures, and a second render is byte-identical "
          "(catches a writer the loader disagrees with)") {
  std::vector<estimate::Sample> samples = {gemv_sample("big", 1, 5.0, 200, 0.8, 9.0), gemv_sample("small", 1, 0.4, 120, 0.8, 9.0),
                                           gemv_sample("big", 16, 6.0, 200, 0.6, 12.0), gemv_sample("small", 16, 0.6, 120, 0.6, 12.0)};
  auto cal = estimate::fit("hopper", "h200-sxm", samples);
  REQUIRE(cal.ok());
  const std::string text = estimate::render_evidence(*cal, "met circuit calibrate test");
  CHECK(text == estimate::render_evidence(*cal, "met circuit calibrate test"));
  auto tree = met::testing::real_tree();
  tree.files()["hopper/EVIDENCE.toml"] = text;
  Loaded l(std::move(tree));
  const auto t = l.target("h200-sxm");
  const auto& gemv = t.rules.families.at("gemv");
  CHECK(*gemv.efficiency_at(false, 1) == doctest::Approx(0.8).epsilon(1e-3));
  CHECK(*gemv.efficiency_at(false, 16) == doctest::Approx(0.6).epsilon(1e-3));
  CHECK(gemv.fixed_seconds_at(false, 16) == doctest::Approx(12e-6).epsilon(1e-3));
  CHECK(gemv.evidence == "perf-data/x/big.json, perf-data/x/small.json");
  REQUIRE(t.rules.packet_overhead_us.has_value());
  CHECK(*t.rules.packet_overhead_us == doctest::Approx(1.0).epsilon(1e-3));
}

TEST_CASE("only a campaign case whose plan digest is today's counts, the newest per model and case (catches a stale campaign used "
          "as evidence, or an older file winning)") {
  Loaded l;
  const auto t = l.target("h200-sxm");
  auto graph = l.graph("qwen3-0.6b", /*declared=*/true);
  std::map<std::string, met::model::ModelGraph> models;
  models.emplace("qwen3-0.6b", graph);
  auto today = estimate::estimate_case(l.lib, t, graph, estimate::make_basis(*t.device, estimate::BasisChoice::datasheet),
                                       met::planner::Mode::batch, 4, 4096, 1);
  estimate::CampaignCase c;
  c.model = "qwen3-0.6b";
  c.hardware = "h200-sxm";
  c.kind = "decode";
  c.rows = 4;
  c.context = 4096;
  c.median_ms = 2.0;
  c.family_ms["gemv"] = 1.0;
  std::vector<estimate::CampaignCase> cases;
  for (const char* stamp : {"20261201T000000Z", "20261203T000000Z", "20261202T000000Z"}) {
    c.stamp = stamp;
    c.source = std::string("perf-data/x/") + stamp + ".json";
    c.plan_digest = today.digest;
    cases.push_back(c);
  }
  c.stamp = "20261209T000000Z";  // the newest, but of another plan
  c.source = "perf-data/x/stale.json";
  c.plan_digest = "0000";
  cases.push_back(c);
  std::size_t aside = 0;
  auto samples = estimate::sample_campaigns(l.lib, t, models, cases, &aside);
  REQUIRE(samples.ok());
  REQUIRE(samples->size() == 1);
  CHECK(samples->front().measured.source == "perf-data/x/20261203T000000Z.json");
  CHECK(aside == 1);
  CHECK(samples->front().families.count("gemv") == 1);
  cases.back().model = "unknown-model";
  CHECK_FALSE(estimate::sample_campaigns(l.lib, t, models, cases).ok());
}
