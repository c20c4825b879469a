// Test helpers over the checked-in kernel tree: a MemTree snapshot of kernels/ (mutable per test),
// a Library loaded from it, and one analysed case kept alive with the graph it points to.
// Shared by the planner, estimate and report tests; it asserts with doctest's REQUIRE.
#pragma once

#include <doctest/doctest.h>

#include <memory>
#include <string>

#include "estimate/analysis.hpp"
#include "model/instantiate.hpp"
#include "planner/library.hpp"
#include "tree/disk_tree.hpp"

namespace met::testing {

inline MemTree real_tree() {
  const DiskTree disk(std::string(MET_SOURCE_DIR) + "/kernels", "kernels/");
  return snapshot(disk);
}

// A tree and the library loaded from it (the library points at the tree: never moved).
struct Loaded {
  MemTree tree;
  planner::Library lib;

  explicit Loaded(MemTree t) : tree(std::move(t)) {
    auto l = planner::load_library(tree);
    REQUIRE_MESSAGE(l.ok(), (l.ok() ? "" : l.error().message));
    lib = std::move(l).value();
    lib.tree = &tree;
  }
  Loaded() : Loaded(real_tree()) {}
  Loaded(const Loaded&) = delete;
  Loaded& operator=(const Loaded&) = delete;

  planner::Target target(const std::string& device) const {
    auto t = planner::resolve_target(lib, device);
    REQUIRE_MESSAGE(t.ok(), (t.ok() ? "" : t.error().message));
    return std::move(t).value();
  }

  // The instance's recipe formats, or with `declared` the formats its config directory declares.
  model::ModelGraph graph(const std::string& instance, bool declared = false) const {
    const auto* inst = lib.instance(instance);
    REQUIRE_MESSAGE(inst != nullptr, instance);
    auto g = model::instantiate_instance(tree, lib.circuits, *inst, declared);
    REQUIRE_MESSAGE(g.ok(), (g.ok() ? "" : g.error().message));
    return std::move(g).value();
  }
};

// One analysed (instance, device, options) case; the Analysis points into `graph` and `target`.
struct Case {
  model::ModelGraph graph;
  planner::Target target;
  estimate::Analysis an;
};

inline std::unique_ptr<Case> analyse(const Loaded& l, const std::string& instance, const std::string& device,
                                     const estimate::Options& opt = {}, bool declared = false) {
  auto c = std::make_unique<Case>();
  c->graph = l.graph(instance, declared);
  c->target = l.target(device);
  auto an = estimate::analyze(l.lib, c->target, c->graph, opt);
  REQUIRE_MESSAGE(an.ok(), (an.ok() ? "" : an.error().message));
  c->an = std::move(an).value();
  return c;
}

// The plan of one case, built directly by the planner.
inline planner::Plan plan_of(const Loaded& l, const planner::Target& t, const model::ModelGraph& g, planner::Mode mode,
                             std::int64_t rows) {
  planner::PlanInput in;
  in.tree = &l.tree;
  in.registry = &l.lib.registry;
  in.device = t.device;
  in.chain = &t.chain;
  in.availability = &t.availability;
  in.rules = &t.rules;
  in.model = &g;
  in.mode = mode;
  in.rows = rows;
  return planner::build_plan(in);
}

inline bool contains(const std::string& hay, const std::string& needle) { return hay.find(needle) != std::string::npos; }

}  // namespace met::testing
