// A property of every golden cell (instance x device of the golden matrix): the ceiling never
// falls when the step does more work: decode in the batch C and in the context, prefill in the
// prompt length T.
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "estimate/analysis.hpp"
#include "planner/model_toml.hpp"
#include "planner/real_tree.hpp"
#include "report/matrix.hpp"

namespace estimate = met::estimate;
namespace planner = met::planner;
using met::testing::Loaded;

namespace {

struct Ladder {
  std::string what;  // "decode C", "decode context", "prefill T"
  std::vector<std::int64_t> steps;
};

}  // namespace

TEST_CASE("every golden cell's ceiling is non-decreasing in C, in the context and in T (catches a rule chosen by priority where a "
          "costlier one takes a larger step, or a cost that shrinks with more work)") {
  const Loaded l;
  const auto spec = met::report::default_matrix(l.lib);
  REQUIRE(spec.instances.size() > 5);
  REQUIRE(spec.devices.size() > 3);
  int cells = 0, falls = 0;
  for (const auto& id : spec.instances) {
    const auto graph = l.graph(id);
    for (const auto& dev : spec.devices) {
      const auto device_target = l.target(dev);
      auto t = planner::target_for_model(l.lib, device_target, graph);
      REQUIRE_MESSAGE(t.ok(), (t.ok() ? "" : t.error().message));
      const auto basis = estimate::make_basis(*t->device, estimate::BasisChoice::datasheet);
      ++cells;
      auto ceiling = [&](const std::string& what, std::int64_t step) {
        if (what == "prefill T") return estimate::estimate_case(l.lib, *t, graph, basis, planner::Mode::prefill, step, 4096, 1).ceiling_s;
        if (what == "decode context") return estimate::estimate_case(l.lib, *t, graph, basis, planner::Mode::decode, 1, step, 1).ceiling_s;
        const auto mode = step == 1 ? planner::Mode::decode : planner::Mode::batch;
        return estimate::estimate_case(l.lib, *t, graph, basis, mode, step, 4096, 1).ceiling_s;
      };
      for (const Ladder& ladder : {Ladder{"decode C", {1, 2, 4, 8, 16, 32, 64, 128}}, Ladder{"decode context", {512, 4096, 16384, 32768}},
                                   Ladder{"prefill T", {128, 512, 2048, 4096, 32768}}}) {
        double last = 0;
        std::int64_t last_step = 0;
        for (auto step : ladder.steps) {
          const double c = ceiling(ladder.what, step);
          if (c < last * (1 - 1e-12)) {
            ++falls;
            const std::string where = id + " on " + dev + ": " + ladder.what;
            CAPTURE(where);
            CAPTURE(last_step);
            CAPTURE(step);
            CHECK_MESSAGE(c >= last, "the ceiling falls from " << last << " s to " << c << " s");
          }
          last = c;
          last_step = step;
        }
      }
    }
  }
  CHECK(cells == static_cast<int>(spec.instances.size() * spec.devices.size()));
  CHECK(falls == 0);
}
