// `met circuit calibrate PERF_DIR...`: reads the campaign records of a device and the config.json
// of each model they measured, and writes the class's evidence file (estimate/calibrate: the fit),
// or with --held-out prints the check of that fit on each model left out of it.
#include <fmt/format.h>

#include <cstdio>
#include <memory>
#include <set>

#include "cli/campaigns.hpp"
#include "cli/commands.hpp"
#include "cli/files.hpp"
#include "core/numfmt.hpp"
#include "core/strings.hpp"
#include "estimate/calibrate.hpp"
#include "model/checkpoint.hpp"
#include "model/instantiate.hpp"
#include "tree/disk_tree.hpp"

namespace met::cli {
namespace {

struct CalibrateArgs {
  std::vector<std::string> paths;
  std::string hardware, configs, out, write_doc;
  bool update = false, held_out = false;
};

// The line that regenerates the evidence file (paths as given, so the file names the same bytes
// wherever the repository is checked out).
std::string command_of(const CalibrateArgs& a, const std::string& hardware) {
  return fmt::format("met circuit calibrate {} --configs {} --hardware {} --update", join(a.paths, " "), a.configs, hardware);
}

// The markers around the held-out table in a Markdown file (--write-doc), each on a line of its own.
constexpr const char* kDocBegin = "<!-- held-out table: met circuit calibrate --held-out --write-doc -->";
constexpr const char* kDocEnd = "<!-- end of the held-out table -->";

// The Markdown file with the lines between its markers replaced by `table`, each line indented like
// the opening marker (a table inside a list item), or an error naming the file and what is missing.
Expected<std::string> with_table(const std::string& path, const std::string& doc, const std::string& table) {
  const auto begin = doc.find(kDocBegin), end = doc.find(kDocEnd);
  if (begin == std::string::npos || end == std::string::npos || end < begin)
    return fail(fmt::format("--write-doc {}: the file needs the lines '{}' and, after it, '{}' around the table", path, kDocBegin, kDocEnd));
  const auto newline = doc.rfind('\n', begin);
  const std::size_t line_start = newline == std::string::npos ? 0 : newline + 1;
  const std::string indent = doc.substr(line_start, begin - line_start);
  if (indent.find_first_not_of(' ') != std::string::npos)
    return fail(fmt::format("--write-doc {}: the opening marker must start its line (after spaces)", path));
  const auto after_begin = doc.find('\n', begin);
  const auto end_line = doc.rfind('\n', end);
  std::string body = "\n";
  for (std::size_t at = 0; at < table.size();) {
    const auto nl = table.find('\n', at);
    body += indent + table.substr(at, nl - at) + "\n";
    at = nl == std::string::npos ? table.size() : nl + 1;
  }
  body += "\n";
  return doc.substr(0, after_begin + 1) + body + doc.substr(end_line + 1);
}

// The held-out table: per model and case, measured, predicted and the error.
std::string held_out_table(const std::vector<estimate::HeldOutRow>& rows) {
  std::string s = "| model (held out) | case | measured ms | predicted ms | error |\n|---|---|---:|---:|---:|\n";
  for (const auto& r : rows) {
    const double err = r.predicted_ms / r.measured_ms - 1;
    s += fmt::format("| {} | {} | {} | {} | {}{}% |\n", r.model, r.name, fmt_fixed(r.measured_ms, 3), fmt_fixed(r.predicted_ms, 3),
                     err >= 0 ? "+" : "", fmt_fixed(100 * err, 1));
  }
  return s;
}

int run_calibrate(const LibraryFn& library, const std::string& kernels, const CalibrateArgs& a) {
  if (a.update && !a.out.empty()) return error("--update writes the class's EVIDENCE.toml; --out FILE writes elsewhere: give one of them");
  if (a.held_out && (a.update || !a.out.empty())) return error("--held-out prints the held-out table; it writes no evidence file");
  if (!a.write_doc.empty() && !a.held_out) return error("--write-doc FILE puts the held-out table into FILE: give it with --held-out");
  const planner::Library* lib = library();
  if (!lib) return 1;
  auto records = read_campaigns(a.paths, "calibrate");
  if (!records) return error(records.error().message);
  std::vector<estimate::CampaignCase> cases;
  std::set<std::string> devices;
  for (const auto& rec : *records) {
    auto got = campaign_cases(rec.first, rec.second);
    if (!got) return error(got.error().message);
    for (auto& c : *got) {
      devices.insert(c.hardware);
      cases.push_back(std::move(c));
    }
  }
  if (cases.empty()) return error(fmt::format("no campaign record under {}", join(a.paths, ", ")));
  std::string hardware = a.hardware;
  if (hardware.empty()) {
    if (devices.size() != 1)
      return error(fmt::format("the campaigns ran on {} devices ({}): name one with --hardware", devices.size(), join(std::vector<std::string>(devices.begin(), devices.end()), ", ")));
    hardware = *devices.begin();
  }
  auto target = planner::resolve_target(*lib, hardware);
  if (!target) return error(target.error().message);
  hardware = target->device->id;
  // Each model the device's campaigns measured, from its config.json under --configs.
  std::map<std::string, model::ModelGraph> models;
  for (const auto& c : cases) {
    if (c.hardware != hardware || models.count(c.model)) continue;
    if (c.model.empty()) return error(fmt::format("{}: the record names no model (its \"model\" key), so no config can plan it", c.source));
    const std::string path = a.configs + "/" + c.model + ".json";
    auto text = read_file(path);
    if (!text) return error(fmt::format("{}: model '{}' needs its config.json at {} (--configs)", c.source, c.model, path));
    model::MemCheckpoint source(c.model, {{"config.json", *text}}, a.configs + "/");
    auto graph = model::instantiate_checkpoint(*lib->tree, lib->circuits, source);
    if (!graph) return error(graph.error().message);
    models.emplace(c.model, std::move(*graph));
  }
  std::size_t set_aside = 0;
  auto samples = estimate::sample_campaigns(*lib, *target, models, cases, &set_aside);
  if (!samples) return error(samples.error().message);
  std::fprintf(stderr, "%zu cases of %zu models measured today's plan; %zu campaign cases of older plans set aside\n", samples->size(),
               models.size(), set_aside);
  if (a.held_out) {
    auto rows = estimate::held_out(*lib, hardware, models, *samples);
    if (!rows) return error(rows.error().message);
    const std::string table = held_out_table(*rows);
    std::fwrite(table.data(), 1, table.size(), stdout);
    if (a.write_doc.empty()) return 0;
    auto doc = read_file(a.write_doc);
    if (!doc) return error(fmt::format("--write-doc {}: cannot read it", a.write_doc));
    auto next = with_table(a.write_doc, *doc, table);
    if (!next) return error(next.error().message);
    auto written = write_atomic(a.write_doc, *next);
    if (!written) return error(written.error().message);
    return 0;
  }
  const std::string klass = target->chain.leaf().id;
  auto cal = estimate::fit(klass, hardware, *samples);
  if (!cal) return error(cal.error().message);
  const std::string text = estimate::render_evidence(*cal, command_of(a, hardware));
  std::string out = a.out;
  if (a.update) {
    const std::string root = kernels.empty() ? "kernels" : kernels;
    if (!read_file(root + "/" + klass + "/HARDWARE.toml"))
      return error(fmt::format("--update: {}/{}/HARDWARE.toml not found: run from the repository root or name the tree with --kernels", root, klass));
    out = root + "/" + klass + "/EVIDENCE.toml";
  }
  if (out.empty()) {
    std::fwrite(text.data(), 1, text.size(), stdout);
    return 0;
  }
  auto written = write_atomic(out, text);
  if (!written) return error(written.error().message);
  return 0;
}

}  // namespace

void add_calibrate_command(CLI::App& circuit, const LibraryFn& library, const std::string* kernels, std::vector<Command>& out) {
  auto a = std::make_shared<CalibrateArgs>();
  auto* cmd = circuit.add_subcommand(
      "calibrate", "fit a class's measured figures (EVIDENCE.toml) from the campaigns of a device that measured today's plans");
  cmd->add_option("paths", a->paths, "campaign records, or directories searched for them (e.g. perf-data/h200-sxm)")->required();
  cmd->add_option("--configs", a->configs, "directory of MODEL.json: the config.json of each model the campaigns name")->required();
  cmd->add_option("--hardware", a->hardware, "the device whose campaigns count (default: the one device they all ran on)");
  cmd->add_option("--out", a->out, "write the evidence file to FILE (atomically) instead of stdout");
  cmd->add_flag("--update", a->update, "write it to the tree's <class>/EVIDENCE.toml (./kernels, or --kernels DIR)");
  cmd->add_flag("--held-out", a->held_out, "print, for each model, its cases predicted by a fit on the other models");
  cmd->add_option("--write-doc", a->write_doc,
                  "with --held-out: also replace the table between FILE's held-out markers (docs/arch/planner.md)");
  cmd->fallthrough();
  out.push_back({cmd, [library, kernels, a] { return run_calibrate(library, *kernels, *a); }});
}

}  // namespace met::cli
