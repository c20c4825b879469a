// Greedy fusion: rules in priority order (ties by id) take the leftmost non-overlapping windows
// their pattern matches, when the mode, row count, format pair and every kernel allow; nodes no
// rule takes become one-node gap groups carrying each candidate that matched and why it failed.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>

#include "planner/plan.hpp"
#include "planner/matrix_ops.hpp"

namespace met::planner {
namespace {

bool window_matches(const Rule& r, const std::vector<model::Node>& nodes, std::size_t pos) {
  if (pos + r.pattern.size() > nodes.size()) return false;
  for (std::size_t k = 0; k < r.pattern.size(); ++k) {
    if (!r.pattern[k].matches(nodes[pos + k].op, nodes[pos + k].role)) return false;
  }
  return true;
}

// The rule's format entry for a window, or an explanation of the pair it lacks.
struct FormatMatch {
  const FormatEntry* entry = nullptr;
  std::string missing;  // "fp8-e4m3 x bf16"
};

// Whether an entry runs a matrix node reading activations `act`. The path must compute in the
// activation format the checkpoint fixes for the node (W4A4 stays W4A4, never weight-only); a node
// with no such format may take a path that quantises its activations on the fly, which its exec
// then says.
bool entry_serves(const FormatEntry& e, const model::Node& n, Format act) {
  if (!e.weight || *e.weight != *n.weight_format || e.act != act) return false;
  return n.act_format ? e.act_math() == *n.act_format : true;
}

std::string entry_pair(const FormatEntry& e) {
  std::string s = fmt::format("{} x {}", e.weight ? format_name(*e.weight) : "-", format_name(e.act));
  if (e.quantize_act) s += fmt::format(" (quantised to {})", format_name(*e.quantize_act));
  return s;
}

FormatMatch match_format(const Rule& r, const std::vector<model::Node>& nodes, std::size_t pos, Format act) {
  FormatMatch out;
  const FormatEntry* chosen = nullptr;
  bool any_matrix = false;
  for (std::size_t k = 0; k < r.pattern.size(); ++k) {
    const model::Node& n = nodes[pos + k];
    if (!is_matrix_op(n.op) || !n.weight_format) continue;
    any_matrix = true;
    const FormatEntry* found = nullptr;
    for (const auto& e : r.formats) {
      if (entry_serves(e, n, act)) {
        found = &e;
        break;
      }
    }
    if (!found) {
      out.missing = fmt::format("{} x {}", format_name(*n.weight_format), format_name(n.act_format.value_or(act)));
      return out;
    }
    // A group runs at its slowest path: emulation over native.
    if (!chosen || (found->exec == "emulate" && chosen->exec == "native")) chosen = found;
  }
  if (!any_matrix) {
    for (const auto& e : r.formats) {
      if (e.act == act) {
        chosen = &e;
        break;
      }
    }
    if (!chosen) out.missing = fmt::format("activation {}", format_name(act));
  }
  out.entry = chosen;
  return out;
}

// The first requirement of the rule the window's nodes fail, with the values it read ("" when all
// hold). `rows`: the case's row count (decode sequences, prefill tokens), beside the nodes' params.
std::string failed_requirement(const Rule& r, const std::vector<model::Node>& nodes, std::size_t pos, std::int64_t rows) {
  if (r.requirements.empty()) return {};
  model::Env env;
  env.emplace("rows", model::Value::num(static_cast<double>(rows)));
  for (std::size_t k = 0; k < r.pattern.size(); ++k)
    for (const auto& [name, v] : nodes[pos + k].params) env.emplace(name, model::Value::num(v));
  for (const auto& e : r.requirements) {
    auto v = e.number(env);
    if (v && *v != 0) continue;
    std::vector<std::string> read;
    for (const auto& name : e.names()) {
      auto it = env.find(name);
      read.push_back(it == env.end() ? fmt::format("{} absent", name) : fmt::format("{} = {}", name, it->second.number));
    }
    return v ? fmt::format("rule '{}' requires {} ({})", r.id, e.text(), fmt::join(read, ", ")) : v.error().message;
  }
  return {};
}

}  // namespace

std::string path_name(Format weight, Format act_math) {
  return fmt::format("W{}A{}", format_bits(weight), format_bits(act_math));
}

std::vector<Group> fuse(const std::vector<model::Node>& nodes, const RuleSet& rules, const avail::Availability& availability,
                        Mode mode, std::int64_t rows, Format activation, const std::string& kv_refusal) {
  const std::size_t n = nodes.size();
  std::vector<int> owner(n, -1);
  std::vector<Group> taken;
  std::vector<std::vector<Blocked>> blocked(n);

  for (const Rule& r : rules.rules) {
    if (!r.takes(mode, rows)) continue;
    // Why this rule cannot run at all here (kernels), computed once per rule.
    std::vector<std::string> missing_kernels;
    std::string why;
    std::vector<std::string> needs;
    for (const auto& k : r.kernels) {
      const auto st = availability.status(k);
      if (!st.available) {
        missing_kernels.push_back(k);
        if (why.empty()) why = fmt::format("{}: {}", k, st.why);
        for (const auto& need : st.needs) {
          if (std::find(needs.begin(), needs.end(), need) == needs.end()) needs.push_back(need);
        }
      }
    }
    for (std::size_t pos = 0; pos < n; ++pos) {
      if (!window_matches(r, nodes, pos)) continue;
      const std::size_t len = r.pattern.size();
      const FormatMatch fm = match_format(r, nodes, pos, activation);
      const bool free = std::all_of(owner.begin() + static_cast<long>(pos), owner.begin() + static_cast<long>(pos + len),
                                    [](int o) { return o < 0; });
      if (!kv_refusal.empty() && std::any_of(nodes.begin() + static_cast<long>(pos), nodes.begin() + static_cast<long>(pos + len),
                                             [](const model::Node& node) { return node.op == "kv_append" || node.op == "attention"; })) {
        Blocked b;
        b.rule = r.id;
        b.kernels = r.kernels;
        b.why = kv_refusal;
        b.format = true;
        b.pair = "KV cache";
        for (std::size_t k = pos; k < pos + len; ++k) blocked[k].push_back(b);
        continue;
      }
      const std::string unmet = fm.entry && missing_kernels.empty() ? failed_requirement(r, nodes, pos, rows) : std::string();
      if (!unmet.empty()) {
        // The kernels exist but their bodies do not handle this shape: a port-list entry like a
        // missing kernel, with the shape as the reason.
        Blocked b;
        b.rule = r.id;
        b.kernels = r.kernels;
        b.why = unmet;
        for (std::size_t k = pos; k < pos + len; ++k) blocked[k].push_back(b);
        continue;
      }
      if (!fm.entry || !missing_kernels.empty()) {
        Blocked b;
        b.rule = r.id;
        // A rule that cannot read the format would not run here even with its kernels: the
        // format is the reason to report, so a port list never asks for a kernel that would not help.
        if (fm.entry) {
          b.kernels = missing_kernels;
          b.why = why;
          b.needs = needs;
        } else {
          b.kernels = r.kernels;
          b.why = fmt::format("no path for {} (rule '{}' lists {})", fm.missing, r.id, [&] {
            std::vector<std::string> pairs;
            for (const auto& e : r.formats) pairs.push_back(entry_pair(e));
            return fmt::format("{}", fmt::join(pairs, ", "));
          }());
          b.format = true;
          b.pair = fm.missing;
        }
        for (std::size_t k = pos; k < pos + len; ++k) blocked[k].push_back(b);
        continue;
      }
      if (!free) continue;
      Group g;
      g.rule = r.id;
      g.kernels = r.kernels;
      g.family = r.family;
      auto fam = rules.families.find(r.family);
      g.unit = fam != rules.families.end() ? fam->second.unit : "cuda_core";
      for (std::size_t k = pos; k < pos + len; ++k) {
        g.nodes.push_back(static_cast<int>(k));
        owner[k] = static_cast<int>(taken.size());
      }
      for (std::size_t k = pos; k < pos + len; ++k) {
        const auto& node = nodes[k];
        if (is_matrix_op(node.op) && node.weight_format) {
          const Format act_math = fm.entry->act_math();
          g.exec = Exec{std::string(format_name(*node.weight_format)),
                        std::string(format_name(activation)),
                        std::string(format_name(act_math)),
                        path_name(*node.weight_format, act_math),
                        fm.entry->exec,
                        fm.entry->math};
          break;
        }
      }
      taken.push_back(std::move(g));
      pos += len - 1;
    }
  }

  std::vector<Group> out;
  for (std::size_t k = 0; k < n; ++k) {
    if (owner[k] >= 0) {
      const Group& g = taken[static_cast<std::size_t>(owner[k])];
      if (g.nodes.front() == static_cast<int>(k)) out.push_back(g);
      continue;
    }
    Group gap;
    gap.gap = true;
    gap.unit = "cuda_core";
    gap.nodes = {static_cast<int>(k)};
    // One entry per candidate rule, in rule order.
    for (const auto& b : blocked[k]) {
      bool seen = false;
      for (const auto& have : gap.blocked) seen = seen || have.rule == b.rule;
      if (!seen) gap.blocked.push_back(b);
    }
    const auto& node = nodes[k];
    if (is_matrix_op(node.op) && node.weight_format) {
      const bool format_only = !gap.blocked.empty() && std::all_of(gap.blocked.begin(), gap.blocked.end(),
                                                                   [](const Blocked& b) { return b.format; });
      // "no path": no rule lists the node's format pair; "no kernel": a rule does (or none covers
      // the op at all), but no kernel of the class runs it here.
      const Format act_math = node.act_format.value_or(activation);
      gap.exec = Exec{std::string(format_name(*node.weight_format)),
                      std::string(format_name(activation)),
                      std::string(format_name(act_math)),
                      path_name(*node.weight_format, act_math),
                      format_only ? "no path" : "no kernel",
                      ""};
    }
    out.push_back(std::move(gap));
  }
  return out;
}

}  // namespace met::planner
