#include "cli/circuit.hpp"

#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <iostream>

#include "cli/campaigns.hpp"
#include "cli/commands.hpp"
#include "cli/files.hpp"
#include "cli/model_ref.hpp"
#include "core/numfmt.hpp"
#include "core/strings.hpp"
#include "core/suggest.hpp"
#include "estimate/analysis.hpp"
#include "estimate/measured.hpp"
#include "model/instantiate.hpp"
#include "planner/model_toml.hpp"
#include "report/matrix.hpp"
#include "report/render.hpp"
#include "tree/checkpoint_dir.hpp"
#include "tree/disk_tree.hpp"

namespace met::cli {

int error(const std::string& message) {
  std::fprintf(stderr, "error: %s\n", message.c_str());
  return 1;
}

namespace {

int report_error(const Error& e) { return error(e.message); }

Expected<estimate::BasisChoice> parse_basis(const std::string& b) {
  if (b == "measured") return estimate::BasisChoice::measured;
  if (b == "datasheet") return estimate::BasisChoice::datasheet;
  return fail(fmt::format("--basis: unknown basis '{}': {}", b, suggest(b, {"datasheet", "measured"})));
}

// Every campaign case under the --measured paths that carries a plan digest (cli/campaigns.hpp).
Expected<std::vector<estimate::MeasuredCase>> load_measured(const std::vector<std::string>& paths) {
  std::vector<estimate::MeasuredCase> out;
  MET_TRY(auto records, read_campaigns(paths, "--measured"));
  for (const auto& rec : records) {
    auto cases = campaign_cases(rec.first, rec.second);
    if (!cases) return fail("--measured " + cases.error().message);
    for (const auto& c : *cases) {
      if (c.plan_digest.empty()) continue;  // campaigns before the digest was recorded
      estimate::MeasuredCase m;
      m.hardware = c.hardware;
      m.plan_digest = c.plan_digest;
      m.kind = c.kind;
      m.rows = c.rows;
      m.context = c.context;
      m.median_s = c.median_ms / 1e3;
      m.stamp = c.stamp;
      m.source = c.source;
      out.push_back(std::move(m));
    }
  }
  return out;
}

}  // namespace

Expected<Format> kv_dtype_format(const std::string& name) {
  if (name == "bf16") return Format::bf16;
  if (name == "fp8") return Format::fp8_e4m3;
  return fail(fmt::format("--kv-dtype: unknown KV cache format '{}': {}", name, suggest(name, {"bf16", "fp8"})));
}

namespace {

// The command that regenerates an output: every choice that differs from the defaults.
std::string command_line(const PlanArgs& a, std::int64_t rows) {
  std::string s = fmt::format("met circuit plan --hardware {}", a.hardware);
  if (!a.checkpoint.empty()) s += fmt::format(" --checkpoint {}", a.checkpoint);
  else s += fmt::format(" --model {}", a.model);
  if (!a.revision.empty()) s += fmt::format(" --revision {}", a.revision);
  if (!a.precision.empty()) s += fmt::format(" --precision {}", a.precision);
  if (!a.kv_dtype.empty()) s += fmt::format(" --kv-dtype {}", a.kv_dtype);
  if (a.mode != "decode") s += fmt::format(" --mode {} --rows {}", a.mode, rows);
  if (a.context) s += fmt::format(" --context {}", *a.context);
  if (a.tp != 1) s += fmt::format(" --tp {}", a.tp);
  if (a.basis != "datasheet") s += fmt::format(" --basis {}", a.basis);
  if (a.format != "report") s += fmt::format(" --format {}", a.format);
  for (const auto& m : a.measured) s += fmt::format(" --measured {}", m);
  return s;
}

Expected<std::string> plan_output(const planner::Library& lib, const PlanArgs& a) {
  MET_TRY(auto basis, parse_basis(a.basis));
  auto mode = planner::parse_mode(a.mode);
  if (!mode)
    return fail(fmt::format("--mode: unknown mode '{}': {}", a.mode, suggest(a.mode, {"batch", "decode", "prefill", "verify"})));
  std::int64_t rows = 1;
  if (*mode == planner::Mode::decode) {
    if (a.rows && *a.rows != 1) return fail("--rows: decode is one row per sequence; use --mode batch --rows N for N sequences");
  } else if (!a.rows) {
    return fail(fmt::format(
        "--rows: mode {} needs --rows (sequences for batch, prompt tokens for prefill, draft tokens for verify)", a.mode));
  } else {
    rows = *a.rows;
  }
  if (rows < 1 || rows > (1 << 24)) return fail(fmt::format("--rows: {} is out of range (1 .. 16777216)", rows));
  if (a.context && (*a.context < 1 || *a.context > (1 << 24))) return fail(fmt::format("--context: {} is out of range", *a.context));
  if (a.tp != 1 && a.tp != 2 && a.tp != 4 && a.tp != 8) return fail(fmt::format("--tp: {} is not one of 1, 2, 4, 8", a.tp));
  if (a.format != "report" && a.format != "plan" && a.format != "json" && a.format != "html") {
    return fail(fmt::format("--format: unknown format '{}': {}", a.format, suggest(a.format, {"html", "json", "plan", "report"})));
  }
  if (!a.precision.empty() && a.precision != "recipe" && a.precision != "declared") {
    return fail(fmt::format("--precision: unknown precision '{}': {}", a.precision, suggest(a.precision, {"declared", "recipe"})));
  }

  MET_TRY(auto target, planner::resolve_target(lib, a.hardware));
  // The provenance line names what was resolved (the device id, the instance id), so an alias or
  // a Hugging Face id of a golden instance gives the report the canonical names give, byte for byte.
  PlanArgs canonical = a;
  canonical.hardware = target.device->id;
  model::ModelGraph graph;
  if (!a.checkpoint.empty()) {
    if (a.precision == "recipe") return fail("--precision recipe: a checkpoint directory has declared formats only");
    if (!a.hub.empty() || !a.revision.empty()) return fail("--hub and --revision go with --model ORG/NAME, not --checkpoint");
    DiskCheckpoint source(a.checkpoint);
    MET_TRY(graph, model::instantiate_checkpoint(*lib.tree, lib.circuits, source));
  } else {
    MET_TRY(auto ref, resolve_model(lib, a.model, HubFlags{a.hub, a.revision}));
    if (ref.kind != ModelRef::Kind::instance && a.precision == "recipe") {
      return fail(fmt::format("--precision recipe: '{}' is no golden instance, so it has declared formats only", a.model));
    }
    MET_TRY(graph, instantiate_model(lib, ref, ref.canonical, a.precision == "declared"));
    if (ref.kind != ModelRef::Kind::hub && !a.revision.empty()) {
      return fail(fmt::format("--revision: '{}' resolves to the {} '{}' in the kernel tree, which has no revisions", a.model,
                              ref.kind == ModelRef::Kind::instance ? "golden instance" : "stored config", ref.canonical));
    }
    canonical.model = ref.canonical;
  }
  if (!a.kv_dtype.empty()) {
    MET_TRY(graph.kv, kv_dtype_format(a.kv_dtype));
  }
  estimate::Options opt;
  opt.basis = basis;
  opt.mode = *mode;
  opt.rows = rows;
  opt.context = a.context.value_or(0);
  opt.tp = a.tp;
  MET_TRY(auto model_target, planner::target_for_model(lib, target, graph));
  MET_TRY(auto an, estimate::analyze(lib, model_target, graph, opt));
  if (!a.measured.empty()) {
    MET_TRY(auto measured, load_measured(a.measured));
    estimate::attach_measured(an, measured);
  }
  const report::Provenance prov{command_line(canonical, rows)};
  if (a.format == "json") return report::render_json(an, prov);
  if (a.format == "html") return report::render_html(an, prov);
  if (a.format == "plan") return report::render_plan(an, prov);
  return report::render_markdown(an, prov);
}

}  // namespace

int run_devices(const planner::Library& lib) {
  std::string s = fmt::format("{:<14} {:<8} {:<14} {:>6} {:>9} {:>10} {:>11} {:>10}  {:<40}  {}\n", "device", "vendor", "class", "units",
                              "memory", "bandwidth", "bf16 TFLOP", "fp8 TFLOP", "aliases", "name");
  for (const auto& d : lib.registry.devices) {
    auto peak = [&](const char* k) { return d.peaks.count(k) ? fmt_sig(d.peaks.at(k), 4) : std::string("-"); };
    s += fmt::format("{:<14} {:<8} {:<14} {:>6} {:>9} {:>10} {:>11} {:>10}  {:<40}  {}\n", d.id, d.vendor, d.klass, d.units,
                     fmt_sig(d.memory_gb, 4) + " GB", fmt_sig(d.bandwidth_gbs, 4) + " GB/s", peak("bf16"), peak("fp8"),
                     d.aliases.empty() ? "-" : join(d.aliases, ", "), d.name);
  }
  std::fputs(s.c_str(), stdout);
  return 0;
}

int run_kernels(const planner::Library& lib, const std::string& hardware) {
  auto target = planner::resolve_target(lib, hardware);
  if (!target) return report_error(target.error());
  for (const auto& [name, st] : target->availability.kernels) {
    std::printf("%s\t%s\t%s:%d\t%s\n", name.c_str(), st.available ? "available" : "unavailable", st.file.c_str(), st.line,
                st.why.c_str());
  }
  return 0;
}

int run_class_build(const planner::Library& lib, const std::string& hardware) {
  auto target = planner::resolve_target(lib, hardware);
  if (!target) return report_error(target.error());
  std::string s = fmt::format("arch {}\n", target->chain.leaf().arch);
  for (const auto& [name, value] : target->chain.defines) s += fmt::format("define {}={}\n", name, value);
  for (const auto& src : target->chain.sources) s += fmt::format("source {}\n", src);
  std::fputs(s.c_str(), stdout);
  return 0;
}

int run_plan(const planner::Library& lib, const PlanArgs& args) {
  auto out = plan_output(lib, args);
  if (!out) return report_error(out.error());
  if (args.out.empty()) {
    if (args.check) return report_error(fail("--check needs --out FILE to compare with"));
    std::fwrite(out->data(), 1, out->size(), stdout);
    return 0;
  }
  if (args.check) {
    auto expected = read_file(args.out);
    if (!expected) return report_error(expected.error());
    const auto diffs = report::diff_file(args.out, *expected, *out);
    for (const auto& d : diffs) std::fprintf(stderr, "%s\n", d.c_str());
    if (!diffs.empty()) return report_error(fail(fmt::format("{} differs from what the planner produces now", args.out)));
    return 0;
  }
  auto written = write_atomic(args.out, *out);
  if (!written) return report_error(written.error());
  return 0;
}

int run_matrix(const planner::Library& lib, const std::string& dir, bool check, const std::string& basis_text) {
  auto basis = parse_basis(basis_text);
  if (!basis) return report_error(basis.error());
  auto spec = report::default_matrix(lib);
  spec.basis = *basis;
  auto files = report::build_matrix(lib, spec);
  if (!files) return report_error(files.error());
  if (check) {
    auto expected = read_dir(dir);
    if (!expected) return report_error(expected.error());
    const auto diffs = report::compare_outputs(*expected, *files);
    for (const auto& d : diffs) std::fprintf(stderr, "%s\n", d.c_str());
    if (!diffs.empty()) {
      return report_error(fail(fmt::format("{} golden difference(s) in {}; regenerate with `met circuit plan --matrix {}` and review the diff",
                                           diffs.size(), dir, dir)));
    }
    std::printf("%zu golden files match\n", files->size());
    return 0;
  }
  auto written = write_dir(dir, *files);
  if (!written) return report_error(written.error());
  std::printf("wrote %zu files to %s\n", files->size(), dir.c_str());
  return 0;
}

}  // namespace met::cli
