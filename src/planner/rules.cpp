#include "planner/rules.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <set>

#include "core/strings.hpp"
#include "model/ops.hpp"
#include "tree/toml.hpp"

namespace met::planner {
namespace {

const std::set<std::string> kExec = {"native", "emulate"};
const std::set<std::string> kUnits = {"tensor_core", "cuda_core", "memory"};

Expected<PatternElem> parse_elem(const std::string& text, Fields& f) {
  PatternElem e;
  const auto colon = text.find(':');
  e.op = text.substr(0, colon);
  if (colon != std::string::npos) e.role = text.substr(colon + 1);
  if (!model::find_op(e.op)) {
    return f.error_at("pattern", fmt::format("unknown op '{}' (known: {})", e.op, join(model::op_names(), ", ")));
  }
  return e;
}

Expected<FormatEntry> parse_format_entry(const std::string& file, const toml::node& node, const std::string& what) {
  if (!node.is_table()) return fail(fmt::format("{}: {}: formats: expected tables", where(file, node), what));
  Fields f(file, *node.as_table(), what + " format");
  FormatEntry e;
  MET_TRY(auto weight, f.opt_str("weight"));
  if (weight) {
    auto w = parse_format(*weight);
    if (!w) return f.error_at("weight", fmt::format("unknown format '{}' (known: {})", *weight, fmt::join(format_names(), ", ")));
    e.weight = *w;
  }
  MET_TRY(auto act, f.str("act"));
  auto a = parse_format(act);
  if (!a) return f.error_at("act", fmt::format("unknown format '{}'", act));
  e.act = *a;
  MET_TRY(auto quantize, f.opt_str("quantize_act"));
  if (quantize) {
    auto q = parse_format(*quantize);
    if (!q)
      return f.error_at("quantize_act",
                        fmt::format("unknown format '{}' (known: {})", *quantize, fmt::join(format_names(), ", ")));
    if (*q == e.act) return f.error_at("quantize_act", fmt::format("'{}' is the activation format itself", *quantize));
    e.quantize_act = *q;
  }
  MET_TRY(e.exec, f.str("exec"));
  if (!kExec.count(e.exec)) return f.error_at("exec", fmt::format("unknown exec '{}' (known: emulate, native)", e.exec));
  MET_TRY(e.math, f.str("math"));
  // The math consumes activations in its own format: an entry whose math is narrower than the
  // activations it reads must say that it quantises them, so no report shows such a path as if the
  // activations kept their precision.
  if (e.math != math_key(e.act_math())) {
    return f.error_at(
        "math", fmt::format("math '{}' on {} activations: the math reads activations as {} ({}); an entry that "
                            "quantises them on the fly says so with quantize_act",
                            e.math, format_name(e.act), math_key(e.act_math()),
                            e.quantize_act ? "quantize_act " + std::string(format_name(*e.quantize_act)) : "no quantize_act"));
  }
  MET_CHECK(f.done());
  return e;
}

Expected<Rule> parse_rule(const std::string& file, const toml::table& t, const std::string& klass) {
  Rule r;
  r.klass = klass;
  r.location = where(file, t);
  Fields f(file, t, fmt::format("rule '{}'", t["id"].value_or(std::string("?"))));
  MET_TRY(r.id, f.str("id"));
  MET_TRY(auto pattern, f.str_list("pattern"));
  if (pattern.empty()) return f.error("empty pattern");
  for (const auto& p : pattern) {
    MET_TRY(auto e, parse_elem(p, f));
    r.pattern.push_back(std::move(e));
  }
  MET_TRY(r.kernels, f.str_or_list("kernel"));
  if (r.kernels.empty()) return f.error("missing key 'kernel'");
  MET_TRY(r.family, f.str("family"));
  MET_TRY(auto modes, f.str_list("modes"));
  if (modes.empty()) return f.error("missing key 'modes'");
  for (const auto& m : modes) {
    auto mode = parse_mode(m);
    if (!mode || *mode == Mode::verify)
      return f.error_at("modes", fmt::format("unknown mode '{}' (known: batch, decode, prefill)", m));
    r.modes.insert(*mode);
  }
  MET_TRY(auto rows, f.int_list("rows"));
  if (rows.size() != 2 || rows[0] < 1 || rows[1] < rows[0]) return f.error_at("rows", "expected [min, max] with 1 <= min <= max");
  r.rows = {rows[0], rows[1]};
  if (f.has("prefill_rows")) {
    if (!r.modes.count(Mode::prefill)) return f.error_at("prefill_rows", "the rule's modes do not include prefill");
    MET_TRY(auto pre, f.int_list("prefill_rows"));
    if (pre.size() != 2 || pre[0] < 1 || pre[1] < pre[0])
      return f.error_at("prefill_rows", "expected [min, max] with 1 <= min <= max");
    r.prefill_rows = Rule::RowRange{pre[0], pre[1]};
  }
  MET_TRY(auto priority, f.integer("priority"));
  r.priority = static_cast<int>(priority);
  MET_TRY(auto formats, f.array("formats"));
  if (!formats || formats->empty()) return f.error("missing key 'formats'");
  for (const auto& node : *formats) {
    MET_TRY(auto e, parse_format_entry(file, node, fmt::format("rule '{}'", r.id)));
    r.formats.push_back(e);
  }
  MET_TRY(auto reqs, f.str_list("requires"));
  std::set<std::string> known{"rows"};  // the case's row count, and the params of the pattern's ops
  for (const auto& e : r.pattern) {
    if (const auto* op = model::find_op(e.op)) {
      known.insert(op->required.begin(), op->required.end());
      for (const auto& o : op->optional) known.insert(o.name);
    }
  }
  for (const auto& text : reqs) {
    MET_TRY(auto e, model::parse_expr(text, fmt::format("{}: rule '{}' requires", r.location, r.id)));
    for (const auto& name : e.names()) {
      if (!known.count(name)) {
        return f.error_at("requires", fmt::format("'{}' reads '{}', which no op of the pattern has (known: {})", text, name,
                                                  fmt::join(known, ", ")));
      }
    }
    r.requirements.push_back(std::move(e));
  }
  MET_CHECK(f.done());
  return r;
}

Expected<void> parse_measured(const std::string& file, Fields& f, Family& fam);

Expected<Family> parse_family(const std::string& file, const toml::table& t, const std::string& klass) {
  Family fam;
  fam.klass = klass;
  fam.location = where(file, t);
  Fields f(file, t, fmt::format("family '{}'", t["id"].value_or(std::string("?"))));
  MET_TRY(fam.id, f.str("id"));
  MET_TRY(fam.unit, f.str("unit"));
  if (!kUnits.count(fam.unit)) return f.error_at("unit", fmt::format("unknown unit '{}' (known: cuda_core, memory, tensor_core)", fam.unit));
  MET_TRY(auto rpl, f.integer("rows_per_launch"));
  if (rpl < 1) return f.error_at("rows_per_launch", "must be >= 1");
  fam.rows_per_launch = static_cast<int>(rpl);
  MET_TRY(fam.kernels, f.str_list("kernels"));
  MET_CHECK(parse_measured(file, f, fam));
  MET_CHECK(f.done());
  return fam;
}

// The measured figures of a family (KERNEL_FAMILIES.toml, or the class's generated EVIDENCE.toml):
// `evidence`, and with it an efficiency, points by rows, fixed times per instruction.
Expected<void> parse_measured(const std::string& file, Fields& f, Family& fam) {
  MET_TRY(fam.efficiency, f.opt_number("efficiency"));
  MET_TRY(fam.evidence, f.str("evidence"));
  if (fam.efficiency && (*fam.efficiency <= 0.0 || *fam.efficiency > 1.0)) {
    return f.error_at("efficiency", "must be in (0, 1]");
  }
  // A `{ decode = [[rows, value], ...], prefill = ... }` table of points ascending in rows, each
  // value checked by `ok` (`what` names the range in the error).
  auto by_rows = [&](const char* key, std::vector<std::pair<double, double>>& decode, std::vector<std::pair<double, double>>& prefill,
                     auto ok, const char* what) -> Expected<bool> {
    MET_TRY(const toml::table* table, f.table(key));
    if (!table) return false;
    Fields b(file, *table, fmt::format("family '{}' {}", fam.id, key));
    for (const auto& [mode, points] : {std::pair{"decode", &decode}, std::pair{"prefill", &prefill}}) {
      MET_TRY(const toml::array* list, b.array(mode));
      if (!list) continue;
      for (const auto& item : *list) {
        const auto* pair = item.as_array();
        const auto rows = pair && pair->size() == 2 ? (*pair)[0].value<double>() : std::nullopt;
        const auto value = pair && pair->size() == 2 ? (*pair)[1].value<double>() : std::nullopt;
        if (!rows || !value || *rows < 1 || !ok(*value)) return b.error_at(mode, fmt::format("each point is [rows >= 1, {}]", what));
        if (!points->empty() && *rows <= points->back().first) return b.error_at(mode, "rows must ascend");
        points->emplace_back(*rows, *value);
      }
    }
    MET_CHECK(b.done());
    return true;
  };
  MET_CHECK(by_rows("efficiency_by_rows", fam.efficiency_decode, fam.efficiency_prefill,
                    [](double v) { return v > 0.0 && v <= 1.0; }, "efficiency in (0, 1]"));
  MET_TRY(auto has_fixed, by_rows("fixed_us_by_rows", fam.fixed_us_decode, fam.fixed_us_prefill,
                                  [](double v) { return v >= 0.0; }, "microseconds >= 0"));
  MET_TRY(auto fixed_evidence, f.opt_str("fixed_evidence"));
  fam.fixed_evidence = fixed_evidence.value_or("");
  if (has_fixed != !fam.fixed_evidence.empty())
    return f.error_at(has_fixed ? "fixed_us_by_rows" : "fixed_evidence", "fixed_us_by_rows and fixed_evidence come together");
  const bool measured = fam.efficiency || !fam.efficiency_decode.empty() || !fam.efficiency_prefill.empty();
  if (measured && fam.evidence == "unmeasured") return f.error_at("evidence", "an efficiency needs the evidence it came from");
  if (has_fixed && !measured) return f.error_at("fixed_us_by_rows", "a fixed time is fitted with an efficiency");
  return {};
}

double interpolate_log_rows(const std::vector<std::pair<double, double>>& points, double rows) {
  if (rows <= points.front().first) return points.front().second;
  if (rows >= points.back().first) return points.back().second;
  std::size_t k = 1;
  while (points[k].first < rows) ++k;
  const auto& [r0, e0] = points[k - 1];
  const auto& [r1, e1] = points[k];
  const double t = (std::log(rows) - std::log(r0)) / (std::log(r1) - std::log(r0));
  return e0 + t * (e1 - e0);
}

bool rule_order(const Rule& a, const Rule& b) {
  if (a.priority != b.priority) return a.priority > b.priority;
  return a.id < b.id;
}

// <class>/EVIDENCE.toml, written by `met circuit calibrate` from the campaigns of a device: the
// measured figures of families the chain already defines (each unmeasured until here), and the
// class's packet overhead, which only the leaf class's file gives (children do not inherit it).
Expected<void> load_evidence(const KernelTree& tree, const avail::ClassInfo& cls, bool leaf, RuleSet& set) {
  const std::string path = cls.id + "/EVIDENCE.toml";
  if (!tree.exists(path)) return {};
  MET_TRY(auto doc, parse_toml(tree, path));
  Fields f(doc.file, doc.root, "");
  MET_TRY(auto klass, f.str("class"));
  if (klass != cls.id) return f.error_at("class", fmt::format("'{}' is not the class of this directory ('{}')", klass, cls.id));
  MET_TRY(auto hardware, f.str("hardware"));
  (void)hardware;  // the device the campaigns ran on: provenance only
  MET_TRY(auto overhead, f.opt_number("packet_overhead_us"));
  MET_TRY(auto overhead_evidence, f.opt_str("packet_overhead_evidence"));
  if (overhead.has_value() != overhead_evidence.has_value() || (overhead && *overhead <= 0))
    return f.error_at("packet_overhead_us", "must be positive and come with packet_overhead_evidence (the campaigns it was fitted from)");
  if (overhead && cls.packet_overhead_us)
    return f.error_at("packet_overhead_us", fmt::format("{}/HARDWARE.toml carries packet_overhead_us already: the figure has one home", cls.id));
  if (overhead && leaf) {
    set.packet_overhead_us = *overhead;
    set.packet_overhead_evidence = *overhead_evidence;
  }
  MET_TRY(auto list, f.array("family"));
  if (list) {
    std::set<std::string> here;
    for (const auto& node : *list) {
      if (!node.is_table()) return f.error_at("family", "expected [[family]] tables");
      Fields ff(doc.file, *node.as_table(), fmt::format("family '{}'", (*node.as_table())["id"].value_or(std::string("?"))));
      MET_TRY(auto id, ff.str("id"));
      auto it = set.families.find(id);
      if (it == set.families.end()) return ff.error_at("id", fmt::format("no family '{}' in the class chain", id));
      if (!here.insert(id).second) return ff.error_at("id", fmt::format("family '{}' twice", id));
      Family& fam = it->second;
      const bool measured = fam.efficiency || !fam.efficiency_decode.empty() || !fam.efficiency_prefill.empty();
      if (measured || fam.evidence != "unmeasured")
        return ff.error_at("id", fmt::format("family '{}' is measured in {} already: the figures have one home", id, fam.location));
      MET_CHECK(parse_measured(doc.file, ff, fam));
      if (fam.evidence == "unmeasured") return ff.error_at("evidence", "an evidence file names the campaigns of its figures");
      MET_CHECK(ff.done());
    }
  }
  MET_CHECK(f.done());
  return {};
}

}  // namespace

std::string pattern_text(const std::vector<PatternElem>& pattern) {
  std::vector<std::string> parts;
  for (const auto& e : pattern) parts.push_back(e.role.empty() ? e.op : e.op + ":" + e.role);
  return join(parts, " ");
}

Expected<RuleSet> load_rules(const KernelTree& tree, const avail::ClassChain& chain) {
  std::map<std::string, Rule> rules;
  RuleSet set;
  for (const avail::ClassInfo* cls : chain.chain) {
    const std::string fusions = cls->id + "/FUSIONS.toml";
    if (tree.exists(fusions)) {
      MET_TRY(auto doc, parse_toml(tree, fusions));
      Fields f(doc.file, doc.root, "");
      MET_TRY(auto removed, f.str_list("remove"));
      for (const auto& id : removed) {
        if (!rules.erase(id)) return f.error_at("remove", fmt::format("no inherited rule '{}' to remove", id));
      }
      MET_TRY(auto list, f.array("rule"));
      if (list) {
        std::set<std::string> here;
        for (const auto& node : *list) {
          if (!node.is_table()) return f.error_at("rule", "expected [[rule]] tables");
          MET_TRY(auto r, parse_rule(doc.file, *node.as_table(), cls->id));
          if (!here.insert(r.id).second) return fail(fmt::format("{}: duplicate rule id '{}'", r.location, r.id));
          rules[r.id] = std::move(r);  // same id as an inherited rule: an override
        }
      }
      MET_CHECK(f.done());
    }
    const std::string families = cls->id + "/KERNEL_FAMILIES.toml";
    if (tree.exists(families)) {
      MET_TRY(auto doc, parse_toml(tree, families));
      Fields f(doc.file, doc.root, "");
      MET_TRY(auto list, f.array("family"));
      if (list) {
        for (const auto& node : *list) {
          if (!node.is_table()) return f.error_at("family", "expected [[family]] tables");
          MET_TRY(auto fam, parse_family(doc.file, *node.as_table(), cls->id));
          auto it = set.families.find(fam.id);
          if (it != set.families.end() && it->second.klass == cls->id) {
            return fail(fmt::format("{}: duplicate family id '{}'", fam.location, fam.id));
          }
          if (it != set.families.end()) {
            // A child family of the same id adds kernels and may restate unit and evidence.
            for (const auto& k : it->second.kernels) {
              if (std::find(fam.kernels.begin(), fam.kernels.end(), k) == fam.kernels.end()) fam.kernels.push_back(k);
            }
          }
          set.families[fam.id] = std::move(fam);
        }
      }
      MET_CHECK(f.done());
    }
    MET_CHECK(load_evidence(tree, *cls, cls == chain.chain.back(), set));
  }
  for (const auto& [id, fam] : set.families) {
    for (const auto& k : fam.kernels) {
      auto [it, fresh] = set.family_of_kernel.emplace(k, id);
      if (!fresh && it->second != id) {
        return fail(fmt::format("{}: kernel '{}' is in families '{}' and '{}'", fam.location, k, it->second, id));
      }
    }
  }
  for (auto& [id, r] : rules) {
    auto fam = set.families.find(r.family);
    if (fam == set.families.end()) return fail(fmt::format("{}: rule '{}': unknown family '{}'", r.location, id, r.family));
    for (const auto& k : r.kernels) {
      auto kf = set.family_of_kernel.find(k);
      if (kf == set.family_of_kernel.end() || kf->second != r.family) {
        return fail(fmt::format("{}: rule '{}': kernel '{}' is not listed in family '{}'", r.location, id, k, r.family));
      }
    }
    set.rules.push_back(std::move(r));
  }
  std::stable_sort(set.rules.begin(), set.rules.end(), rule_order);
  return set;
}

std::optional<double> Family::efficiency_at(bool prefill, std::int64_t rows) const {
  const auto& points = prefill ? efficiency_prefill : efficiency_decode;
  if (points.empty()) return efficiency;
  return interpolate_log_rows(points, static_cast<double>(std::max<std::int64_t>(1, rows)));
}

double Family::fixed_seconds_at(bool prefill, std::int64_t rows) const {
  const auto& points = prefill ? fixed_us_prefill : fixed_us_decode;
  if (points.empty()) return 0.0;
  return interpolate_log_rows(points, static_cast<double>(std::max<std::int64_t>(1, rows))) * 1e-6;
}

}  // namespace met::planner
