#include <doctest/doctest.h>

#include <optional>

#include "model/instantiate.hpp"
#include "planner/model_toml.hpp"
#include "planner/plan.hpp"
#include "tree/disk_tree.hpp"

namespace {

met::MemTree real_tree() { return met::snapshot(met::DiskTree(MET_SOURCE_DIR "/kernels", "kernels/")); }

// The real tree with one MODEL.toml added for llama-3.1-8b-instruct on hopper, loaded for h200-sxm.
struct WithModelToml {
  met::MemTree tree = real_tree();
  std::optional<met::planner::Library> lib;
  std::optional<met::planner::Target> target;
  std::optional<met::model::ModelGraph> graph;

  explicit WithModelToml(const std::string& text) {
    tree.files()["hopper/llama-3.1-8b-instruct/bf16/MODEL.toml"] = text;
    auto l = met::planner::load_library(tree);
    REQUIRE(l);
    lib = std::move(l).value();
    auto t = met::planner::resolve_target(*lib, "h200-sxm");
    REQUIRE(t);
    target = std::move(t).value();
    auto g = met::model::instantiate_instance(tree, lib->circuits, *lib->instance("llama-3.1-8b-instruct"), false);
    REQUIRE(g);
    graph = std::move(g).value();
  }
};

}  // namespace

TEST_CASE("a kernel declared absent by MODEL.toml turns its groups into gaps and names MODEL.toml in the port list") {
  WithModelToml w(
      "model = \"llama-3.1-8b-instruct\"\nquant = \"bf16\"\nabsent = [\"met_gemv_o_residual\", \"met_gemv\"]\n"
      "reason = \"o projection not yet tuned for this model\"\n");
  auto& lib = w.lib;
  auto& target = w.target;
  auto& graph = w.graph;
  auto& tree = w.tree;
  auto mt = met::planner::target_for_model(*lib, *target, *graph);
  REQUIRE(mt);
  CHECK_FALSE(mt->availability.status("met_gemv_o_residual").available);
  CHECK(target->availability.status("met_gemv_o_residual").available);

  met::planner::PlanInput in{&tree, &lib->registry, mt->device, &mt->chain, &mt->availability, &mt->rules, &*graph,
                             met::planner::Mode::decode, 1};
  const auto plan = met::planner::build_plan(in);
  bool port = false;
  for (const auto& p : plan.ports) {
    if (p.kernel.find("met_gemv_o_residual") != std::string::npos) {
      port = true;
      CHECK(p.why.find("MODEL.toml") != std::string::npos);
    }
  }
  CHECK(port);
}

TEST_CASE("a MODEL.toml naming another model than its directory is a located error") {
  WithModelToml w("model = \"qwen3-8b\"\nquant = \"bf16\"\nabsent = []\nreason = \"x\"\n");
  auto mt = met::planner::target_for_model(*w.lib, *w.target, *w.graph);
  REQUIRE_FALSE(mt);
  CHECK(mt.error().message.find("kernels/hopper/llama-3.1-8b-instruct/bf16/MODEL.toml:1") != std::string::npos);
  CHECK(mt.error().message.find("qwen3-8b") != std::string::npos);
}
