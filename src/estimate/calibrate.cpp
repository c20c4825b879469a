// The fit of a class's evidence from campaigns, its TOML, and the held-out check (calibrate.hpp).
#include "estimate/calibrate.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <set>
#include <tuple>

#include "core/numfmt.hpp"
#include "core/strings.hpp"
#include "estimate/analysis.hpp"
#include "tree/kernel_tree.hpp"

namespace met::estimate {
namespace {

// Figures carried in the evidence file: four significant digits, as the hand-fitted ones were.
constexpr int kDigits = 4;

planner::Mode mode_of(const CampaignCase& c) {
  if (c.kind == "prefill") return planner::Mode::prefill;
  return c.rows == 1 ? planner::Mode::decode : planner::Mode::batch;
}

// The context a case is planned at: decode's cache; prefill the model's serving default, as
// `met circuit plan --mode prefill` does (the prefill cost does not read it).
std::int64_t context_of(const CampaignCase& c, const model::ModelGraph& g) { return c.kind == "prefill" ? g.default_context : c.context; }

using CaseKey = std::tuple<std::string, bool, std::int64_t, std::int64_t>;  // model, prefill, rows, context

CaseKey key_of(const CampaignCase& c) { return {c.model, c.kind == "prefill", c.rows, c.kind == "prefill" ? 0 : c.context}; }

// A TOML float: the carried digits, always with a point or an exponent.
std::string toml_number(double v) {
  std::string s = fmt_sig(v, kDigits);
  if (s.find_first_of(".e") == std::string::npos) s += ".0";
  return s;
}

std::vector<std::string> sorted_unique(std::vector<std::string> v) {
  std::sort(v.begin(), v.end());
  v.erase(std::unique(v.begin(), v.end()), v.end());
  return v;
}

// measured = a x ceiling + b x instructions over the models of one point, minimising the squared
// relative error; a >= 1 (efficiency 1 / a <= 1), b >= 0. Returns {a, b}. `one_model`: the rows are
// one model's (its contexts), whose bytes and instructions move together, so they cannot tell the
// two terms apart: a = 1 and the fixed time alone (a bandwidth term fitted there, with no fixed
// time, carried one model's ratio of time to bytes to every other model; Gemma's decode
// elementwise ops, instructions of a few microseconds over a few kilobytes, put efficiency 0.0015
// on the elementwise family at C = 2..8 from Gemma-3 27B alone).
// a = 1 (the ceiling) and the rest of the measured time as fixed time per instruction, b >= 0.
std::pair<double, double> ceiling_and_fixed(const std::vector<std::tuple<double, double, double>>& rows) {
  double vv = 0, rest = 0;
  for (const auto& r : rows) {
    const double y = std::get<2>(r), v = std::get<1>(r) / y;
    vv += v * v;
    rest += v * (1 - std::get<0>(r) / y);
  }
  return {1.0, vv > 0 ? std::max(0.0, rest / vv) : 0};
}

std::pair<double, double> solve(const std::vector<std::tuple<double, double, double>>& rows, bool one_model) {
  if (one_model) return ceiling_and_fixed(rows);
  double uu = 0, uv = 0, vv = 0, u1 = 0, v1 = 0;
  for (const auto& r : rows) {
    const double y = std::get<2>(r);
    const double u = std::get<0>(r) / y, v = std::get<1>(r) / y;
    uu += u * u;
    uv += u * v;
    vv += v * v;
    u1 += u;
    v1 += v;
  }
  const double det = uu * vv - uv * uv;
  double a = 0, b = -1;
  if (rows.size() >= 2 && det > 1e-12 * uu * vv) {
    a = (u1 * vv - v1 * uv) / det;
    b = (uu * v1 - uv * u1) / det;
  }
  if (b < 0) {  // no fixed time the data supports: the efficiency alone
    b = 0;
    a = u1 / uu;
  }
  if (a < 1) return ceiling_and_fixed(rows);  // faster than the ceiling allows
  return {a, b};
}

}  // namespace

std::string case_name(const CampaignCase& c) {
  if (c.kind == "prefill") return fmt::format("prefill T={}", c.rows);
  return fmt::format("decode C={} ctx={}", c.rows, c.context);
}

Expected<std::vector<Sample>> sample_campaigns(const planner::Library& lib, const planner::Target& target,
                                               const std::map<std::string, model::ModelGraph>& models,
                                               const std::vector<CampaignCase>& campaigns, std::size_t* set_aside) {
  const Basis basis = make_basis(*target.device, BasisChoice::datasheet);
  std::map<CaseKey, std::pair<std::string, Sample>> planned;  // today's digest and terms per case
  std::map<CaseKey, Sample> best;
  std::size_t aside = 0;
  for (const auto& c : campaigns) {
    if (c.hardware != target.device->id) continue;
    if (c.kind != "decode" && c.kind != "prefill") return fail(fmt::format("{}: case kind '{}' is neither decode nor prefill", c.source, c.kind));
    if (c.rows < 1 || (c.kind == "decode" && c.context < 1) || c.median_ms <= 0)
      return fail(fmt::format("{}: {}: rows, context and the median must be positive", c.source, case_name(c)));
    auto m = models.find(c.model);
    if (m == models.end()) return fail(fmt::format("{}: no config for model '{}'", c.source, c.model));
    const CaseKey key = key_of(c);
    auto p = planned.find(key);
    if (p == planned.end()) {
      std::vector<GroupRow> groups;
      const CaseEstimate ce =
          estimate_case(lib, target, m->second, basis, mode_of(c), c.rows, context_of(c, m->second), 1, &groups);
      Sample s;
      s.prefill = c.kind == "prefill";
      for (const auto& g : groups) {
        if (g.family.empty()) continue;  // a gap: no family to fit
        FamilyTerms& t = s.families[g.family];
        t.ceiling_ms += g.fit_seconds * g.count * 1e3;
        t.instructions += g.count;
        s.groups += g.count;
      }
      p = planned.emplace(key, std::make_pair(ce.digest, std::move(s))).first;
    }
    if (c.plan_digest != p->second.first) {
      ++aside;
      continue;
    }
    auto b = best.find(key);
    if (b != best.end() && std::tie(b->second.measured.stamp, b->second.measured.source) >= std::tie(c.stamp, c.source)) continue;
    Sample s = p->second.second;
    s.measured = c;
    best[key] = std::move(s);
  }
  std::vector<Sample> out;
  for (auto& kv : best) out.push_back(std::move(kv.second));
  if (set_aside) *set_aside = aside;
  return out;
}

Expected<Calibration> fit(const std::string& klass, const std::string& hardware, const std::vector<Sample>& samples) {
  if (samples.empty()) return fail(fmt::format("no campaign of {} measured today's plan of any case: nothing to fit", hardware));
  Calibration cal;
  cal.klass = klass;
  cal.hardware = hardware;
  // (family, prefill, rows) -> (ceiling, instructions, measured) per model, and the files.
  std::map<std::tuple<std::string, bool, std::int64_t>, std::pair<std::vector<std::tuple<double, double, double>>, std::vector<std::string>>> data;
  std::map<std::tuple<std::string, bool, std::int64_t>, std::set<std::string>> models;  // of each point
  double og = 0, gg = 0;
  std::vector<std::string> all_sources;
  for (const auto& s : samples) {
    double in_families = 0;
    for (const auto& kv : s.measured.family_ms) {
      in_families += kv.second;
      auto t = s.families.find(kv.first);
      if (t == s.families.end() || t->second.ceiling_ms <= 0 || kv.second <= 0) continue;
      auto& d = data[{kv.first, s.prefill, s.measured.rows}];
      d.first.emplace_back(t->second.ceiling_ms, t->second.instructions, kv.second);
      d.second.push_back(s.measured.source);
      models[{kv.first, s.prefill, s.measured.rows}].insert(s.measured.model);
    }
    // The step's time outside every instruction, per group instance (relative least squares).
    const double y = s.measured.median_ms, x = y - in_families;
    og += s.groups * x / (y * y);
    gg += s.groups * s.groups / (y * y);
    all_sources.push_back(s.measured.source);
  }
  for (const auto& kv : data) {
    const auto& [family, prefill, rows] = kv.first;
    const auto ab = solve(kv.second.first, models[kv.first].size() < 2);
    if (cal.families.empty() || cal.families.back().id != family) cal.families.push_back(FamilyFit{family, {}});
    FittedPoint p;
    p.prefill = prefill;
    p.rows = rows;
    p.efficiency = 1 / ab.first;
    p.fixed_us = ab.second * 1e3;
    p.sources = sorted_unique(kv.second.second);
    cal.families.back().points.push_back(std::move(p));
  }
  if (gg <= 0 || og <= 0) return fail(fmt::format("the campaigns of {} leave no time outside their instructions to fit a packet overhead to", hardware));
  cal.packet_overhead_us = og / gg * 1e3;
  cal.overhead_sources = sorted_unique(all_sources);
  return cal;
}

std::string render_evidence(const Calibration& cal, const std::string& command) {
  std::string s = fmt::format(
      "# Generated by `{}`;\n# do not edit. The measured figures of class {}: per kernel family and step,\n"
      "# measured = ceiling / efficiency + instructions x fixed_us, fitted over the models whose campaigns\n"
      "# on {} measured today's plan of that step (docs/arch/planner.md, Estimates). A family's evidence\n"
      "# names the campaigns of its points; a point fitted from fewer is listed under it.\n"
      "class = \"{}\"\nhardware = \"{}\"\npacket_overhead_us = {}\npacket_overhead_evidence = \"{}\"\n",
      command, cal.klass, cal.hardware, cal.klass, cal.hardware, toml_number(cal.packet_overhead_us), join(cal.overhead_sources, ", "));
  for (const auto& f : cal.families) {
    auto table = [&](bool fixed) {
      std::vector<std::string> modes;
      for (bool prefill : {false, true}) {
        std::vector<std::string> pts;
        for (const auto& p : f.points) {
          if (p.prefill == prefill) pts.push_back(fmt::format("[{}, {}]", p.rows, toml_number(fixed ? p.fixed_us : p.efficiency)));
        }
        if (!pts.empty()) modes.push_back(fmt::format("{} = [{}]", prefill ? "prefill" : "decode", join(pts, ", ")));
      }
      return "{ " + join(modes, ", ") + " }";
    };
    std::vector<std::string> sources;
    bool any_fixed = false, decode = false;
    const FittedPoint* last_prefill = nullptr;
    for (const auto& p : f.points) {
      sources.insert(sources.end(), p.sources.begin(), p.sources.end());
      any_fixed = any_fixed || p.fixed_us > 0;
      decode = decode || !p.prefill;
      if (p.prefill) last_prefill = &p;
    }
    const std::string evidence = join(sorted_unique(sources), ", ");
    s += fmt::format("\n[[family]]\nid = \"{}\"\n", f.id);
    // A mode without points (decode's steps for a family measured only in prefill: batches over
    // the gemv rows, the embedding) takes the largest prefill step's efficiency.
    if (!decode && last_prefill) s += fmt::format("efficiency = {}\n", toml_number(last_prefill->efficiency));
    s += fmt::format("efficiency_by_rows = {}\nevidence = \"{}\"\n", table(false), evidence);
    if (any_fixed) s += fmt::format("fixed_us_by_rows = {}\nfixed_evidence = \"{}\"\n", table(true), evidence);
    for (const auto& p : f.points) {
      if (join(p.sources, ", ") != evidence) s += fmt::format("# {} {}: {}\n", p.prefill ? "prefill T =" : "decode C =", p.rows, join(p.sources, ", "));
    }
  }
  return s;
}

Expected<std::vector<HeldOutRow>> held_out(const planner::Library& lib, const std::string& hardware,
                                           const std::map<std::string, model::ModelGraph>& models, const std::vector<Sample>& samples) {
  MET_TRY(auto target, planner::resolve_target(lib, hardware));
  const std::string klass = target.chain.leaf().id;
  std::set<std::string> names;
  for (const auto& s : samples) names.insert(s.measured.model);
  if (names.size() < 2) return fail("a held-out check needs campaigns of at least two models");
  std::vector<HeldOutRow> out;
  for (const auto& name : names) {
    std::vector<Sample> others;
    for (const auto& s : samples) {
      if (s.measured.model != name) others.push_back(s);
    }
    MET_TRY(auto cal, fit(klass, target.device->id, others));
    MemTree tree = snapshot(*lib.tree);
    tree.files()[klass + "/EVIDENCE.toml"] = render_evidence(cal, "held-out fit without " + name);
    MET_TRY(auto fitted, planner::load_library(tree));
    MET_TRY(auto t, planner::resolve_target(fitted, hardware));
    const model::ModelGraph& graph = models.at(name);
    const Basis basis = make_basis(*t.device, BasisChoice::datasheet);
    for (const auto& s : samples) {
      if (s.measured.model != name) continue;
      const auto& c = s.measured;
      const CaseEstimate ce = estimate_case(fitted, t, graph, basis, mode_of(c), c.rows, context_of(c, graph), 1);
      if (ce.digest != c.plan_digest) return fail(fmt::format("{}: {}: the held-out plan has another digest", c.source, case_name(c)));
      out.push_back(HeldOutRow{name, case_name(c), c.median_ms, ce.prediction_s * 1e3, c.source});
    }
  }
  return out;
}

}  // namespace met::estimate
