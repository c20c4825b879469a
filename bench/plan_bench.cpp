// met_plan_bench: how long planning takes, measured on the kernel tree of this checkout. Prints
// each figure beside its target with PASS/MISS; a benchmark reports, it never fails the build.
// Phases: tree snapshot from disk, library load, one decode analysis (all ladders), rendering,
// and the whole golden matrix.
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "estimate/analysis.hpp"
#include "model/instantiate.hpp"
#include "planner/library.hpp"
#include "report/matrix.hpp"
#include "report/render.hpp"
#include "tree/disk_tree.hpp"

namespace {

using Clock = std::chrono::steady_clock;

constexpr int kPlanRepeats = 20;
constexpr int kMatrixRepeats = 3;
constexpr double kPlanTargetMs = 50.0;
constexpr double kMatrixTargetMs = 2000.0;
constexpr const char* kModel = "llama-3.1-8b-instruct";
constexpr const char* kDevice = "h200-sxm";

double ms_since(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

struct Stats {
  double median = 0;
  double min = 0;
};

// Runs body `repeats` times; body returns false on an error (already printed).
bool time_repeated(int repeats, const std::function<bool()>& body, Stats& out) {
  std::vector<double> ms;
  for (int k = 0; k < repeats; ++k) {
    const auto t0 = Clock::now();
    if (!body()) return false;
    ms.push_back(ms_since(t0));
  }
  std::sort(ms.begin(), ms.end());
  const std::size_t n = ms.size();
  out.median = n % 2 ? ms[n / 2] : (ms[n / 2 - 1] + ms[n / 2]) / 2;
  out.min = ms.front();
  return true;
}

void line(const std::string& what, const std::string& value, const std::string& target = "", bool pass = true) {
  if (target.empty()) {
    std::printf("%-52s %s\n", what.c_str(), value.c_str());
  } else {
    std::printf("%-52s %-34s target %-10s %s\n", what.c_str(), value.c_str(), target.c_str(), pass ? "PASS" : "MISS");
  }
}

int report_failure(const std::string& where, const met::Error& e) {
  std::fprintf(stderr, "error: %s: %s\n", where.c_str(), e.message.c_str());
  return 1;
}

}  // namespace

int main() {
  const std::string root = std::string(MET_SOURCE_DIR) + "/kernels";
  std::printf("met_plan_bench: kernel tree %s\n", root.c_str());

  auto t0 = Clock::now();
  const met::DiskTree disk(root, "kernels/");
  const met::MemTree tree = met::snapshot(disk);
  const double snapshot_ms = ms_since(t0);

  t0 = Clock::now();
  auto lib = met::planner::load_library(tree);
  const double load_ms = ms_since(t0);
  if (!lib) return report_failure("load_library", lib.error());

  line("tree snapshot from disk", fmt::format("{:.2f} ms ({} files)", snapshot_ms, tree.files().size()));
  line("library load", fmt::format("{:.2f} ms", load_ms));

  const auto* inst = lib->instance(kModel);
  if (!inst) {
    std::fprintf(stderr, "error: no instance '%s' in the kernel tree\n", kModel);
    return 1;
  }
  // The analysis points into the model graph (and device); both outlive it, as in the CLI.
  std::optional<met::planner::Target> target;
  std::optional<met::model::ModelGraph> graph;
  met::estimate::Analysis an;
  met::Error err;
  Stats plan;
  const bool plan_ok = time_repeated(kPlanRepeats, [&] {
    auto t = met::planner::resolve_target(*lib, kDevice);
    if (!t) {
      err = t.error();
      return false;
    }
    target = std::move(*t);
    auto g = met::model::instantiate_instance(*lib->tree, lib->circuits, *inst, /*declared=*/false);
    if (!g) {
      err = g.error();
      return false;
    }
    graph = std::move(*g);
    auto a = met::estimate::analyze(*lib, *target, *graph, met::estimate::Options{});
    if (!a) {
      err = a.error();
      return false;
    }
    an = std::move(*a);
    return true;
  }, plan);
  if (!plan_ok) return report_failure(fmt::format("plan {} on {}", kModel, kDevice), err);
  line(fmt::format("plan+analysis {} / {} (x{})", kModel, kDevice, kPlanRepeats),
       fmt::format("median {:.2f} ms, min {:.2f} ms", plan.median, plan.min), fmt::format("< {:g} ms", kPlanTargetMs),
       plan.median < kPlanTargetMs);

  const met::report::Provenance prov{"met_plan_bench"};
  Stats render;
  std::size_t bytes = 0;
  time_repeated(kPlanRepeats, [&] {
    bytes = met::report::render_markdown(an, prov).size() + met::report::render_json(an, prov).size();
    return true;
  }, render);
  line("render markdown + json", fmt::format("median {:.2f} ms ({} bytes)", render.median, bytes));

  const auto spec = met::report::default_matrix(*lib);
  std::size_t cells = 0, files = 0;
  Stats matrix;
  const bool matrix_ok = time_repeated(kMatrixRepeats, [&] {
    auto out = met::report::build_matrix(*lib, spec);
    if (!out) {
      err = out.error();
      return false;
    }
    files = out->size();
    return true;
  }, matrix);
  if (!matrix_ok) return report_failure("build_matrix", err);
  cells = spec.devices.size() * spec.instances.size();
  line(fmt::format("golden matrix (x{})", kMatrixRepeats),
       fmt::format("median {:.0f} ms, {} cells", matrix.median, cells), fmt::format("< {:g} ms", kMatrixTargetMs),
       matrix.median < kMatrixTargetMs);
  line("", fmt::format("{} devices x {} instances, {} files", spec.devices.size(), spec.instances.size(), files));
  return 0;
}
