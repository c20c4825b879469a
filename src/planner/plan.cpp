// build_plan: fuse each scope of a model graph on one class, then derive the port list, the
// tensor-core audit and the canonical text whose SHA-256 is the plan digest.
#include "planner/plan.hpp"

#include <fmt/format.h>

#include <algorithm>

#include "core/digest.hpp"
#include "core/numfmt.hpp"
#include "core/strings.hpp"
#include "model/ops.hpp"
#include "planner/matrix_ops.hpp"
#include "planner/units.hpp"

namespace met::planner {
namespace {

std::string node_text(const model::Node& n) {
  std::string s = n.role.empty() ? n.op : n.op + ":" + n.role;
  std::vector<std::string> ps;
  const model::OpInfo* op = model::find_op(n.op);
  for (const auto& param : n.params) {
    const auto& k = param.first;
    const auto& v = param.second;  // named, not bound: clang before 16 cannot capture a structured binding
    const bool left_out = op && std::any_of(op->optional.begin(), op->optional.end(), [&](const model::OptionalParam& o) {
      return o.canonical_when_set && o.name == k && o.same_as.empty() && o.value == v;
    });
    if (!left_out) ps.push_back(k + "=" + fmt_exact(v));
  }
  s += " {" + join(ps, ",") + "}";
  if (n.weight_format) s += fmt::format(" w={}", format_name(*n.weight_format));
  if (n.act_format) s += fmt::format(" a={}", format_name(*n.act_format));
  return s;
}

std::string canonical_text(const Plan& p, const model::ModelGraph& m) {
  // What the program is, not what it was called: the model's id (which follows how it was named,
  // --model or --checkpoint) and how its formats were found (recipe, declared, config) stay out, so
  // one program has one digest; the formats themselves are in the nodes and the next lines.
  std::string out = "met-plan 2\n";
  out += fmt::format("circuit {} arch {}\n", m.circuit, m.architecture);
  out += fmt::format("class {} chain {}\n", p.klass, join(p.chain, ">"));
  out += fmt::format("mode {} rows {}\n", mode_name(p.mode), p.rows);
  out += fmt::format("activation {} kv {}\n", format_name(m.activation), format_name(m.kv));
  for (const auto& s : p.scopes) {
    out += fmt::format("scope {} count {} mode {} rows {}\n", s.name, s.count, mode_name(s.mode), s.rows);
    for (std::size_t i = 0; i < s.nodes.size(); ++i) out += fmt::format("  node {} {}\n", i, node_text(s.nodes[i]));
    for (const auto& g : s.groups) {
      std::vector<std::string> idx;
      for (int i : g.nodes) idx.push_back(std::to_string(i));
      out += fmt::format("  group [{}] {} {} unit {}", join(idx, ","), g.gap ? "gap" : "rule " + g.rule,
                         g.gap ? "" : "kernels " + join(g.kernels, ","), g.unit);
      if (g.exec) {
        out += fmt::format(" exec {}x{}:{}:{}", g.exec->weight, g.exec->act, g.exec->how, g.exec->math);
        if (g.exec->quantizes_act()) out += fmt::format(" act_math {}", g.exec->act_math);
      }
      out += "\n";
      // The why of a blocked candidate names the device ("... which mi300x lacks"); the digest
      // names only what the class decides, so devices of one class share it.
      for (const auto& b : g.blocked) {
        out += fmt::format("    blocked {} kernels {} needs {}{}\n", b.rule, join(b.kernels, ","), join(b.needs, ","), b.format ? " format" : "");
      }
    }
  }
  for (const auto& port : p.ports) {
    out += fmt::format("port {} rule {} op {} nodes {} needs {}\n", port.kernel, port.rule, port.op, port.nodes, join(port.needs, ","));
  }
  for (const auto& f : p.tc_audit) out += fmt::format("tc {} {} {} {}\n", f.scope, f.group, f.op, f.unit);
  return out;
}

void add_port(std::vector<PortItem>& ports, PortItem item) {
  for (auto& p : ports) {
    if (p.kernel == item.kernel && p.rule == item.rule && p.op == item.op) {
      p.nodes += item.nodes;
      return;
    }
  }
  ports.push_back(std::move(item));
}

}  // namespace

Plan build_plan(const PlanInput& in) {
  const model::ModelGraph& m = *in.model;
  Plan p;
  p.model = m.id;
  p.device = in.device->id;
  p.klass = in.chain->leaf().id;
  p.chain = in.chain->ids();
  p.mode = in.mode;
  p.rows = in.rows;

  // A KV cache format the class's bodies do not read: every rule over the cache is blocked.
  const auto& kv_formats = in.chain->leaf().defaults.kv_formats;
  const std::string kv_name(format_name(m.kv));
  const std::string kv_refusal =
      std::find(kv_formats.begin(), kv_formats.end(), kv_name) != kv_formats.end()
          ? std::string()
          : fmt::format("no path for the {} KV cache (class '{}' reads {} caches)", kv_name, p.klass, join(kv_formats, ", "));
  auto add_scope = [&](std::string name, std::string kind, int count, const std::vector<model::Node>& nodes, Mode mode,
                       std::int64_t rows) {
    Scope s;
    s.name = std::move(name);
    s.kind = std::move(kind);
    s.count = count;
    s.nodes = nodes;
    s.mode = mode;
    s.rows = rows;
    s.groups = fuse(nodes, *in.rules, *in.availability, mode, rows, m.activation, kv_refusal);
    p.scopes.push_back(std::move(s));
  };
  // Verify runs its K rows through the layers as a prefill chunk (after the cache) and needs the
  // head's logits on every row: a batch of K rows there, one decode row when K is 1.
  const bool verify = in.mode == Mode::verify;
  const Mode body_mode = verify ? Mode::prefill : in.mode;
  if (!m.pre.empty()) add_scope("pre", "", 1, m.pre, body_mode, in.rows);
  // Layers of one kind may form several groups (a quantization exclusion covering some of them):
  // each group is a scope of its own, named by its first layer when the kind repeats.
  std::map<std::string, int> seen_kinds;
  for (const auto& k : m.kinds) ++seen_kinds[k.kind];
  for (const auto& k : m.kinds) {
    std::string name = "layers:" + k.kind;
    if (seen_kinds[k.kind] > 1 && !k.layers.empty()) name += "@" + std::to_string(k.layers.front());
    add_scope(name, k.kind, static_cast<int>(k.layers.size()), k.nodes, body_mode, in.rows);
  }
  // Prefill runs the head on the last row of each prompt a packed launch finishes
  // (prefill_head_rows of them): the same program as the head of a decode step of that many rows.
  if (!m.post.empty()) {
    const bool prefill = in.mode == Mode::prefill;
    const std::int64_t head_rows = prefill ? prefill_head_rows(in.rows) : in.rows;
    const Mode head_mode = !prefill && !verify ? in.mode : head_rows == 1 ? Mode::decode : Mode::batch;
    add_scope("post", "", 1, m.post, head_mode, head_rows);
  }

  const auto& leaf = in.chain->leaf();
  for (const auto& s : p.scopes) {
    for (const auto& g : s.groups) {
      if (g.gap) ++p.gap_groups;
      const model::Node& first = s.nodes[static_cast<std::size_t>(g.nodes.front())];
      const std::string op_text = first.role.empty() ? first.op : first.op + ":" + first.role;
      if (g.gap) {
        PortItem item;
        item.nodes = s.count;
        item.op = op_text;
        const Blocked* best = nullptr;
        for (const auto& b : g.blocked) {
          if (!b.format) {
            best = &b;
            break;
          }
        }
        if (!best && !g.blocked.empty()) best = &g.blocked.front();
        if (best) {
          // A format port asks for a kernel that reads the pair, not for the rule's kernel.
          item.kernel = best->format ? fmt::format("(a {} kernel)", best->pair) : join(best->kernels, "+");
          item.rule = best->rule;
          item.why = best->why;
          item.needs = best->needs;
        } else {
          item.kernel = "(none)";
          item.why = fmt::format("no rule of class chain {} covers op '{}' in mode {} at {} rows", join(p.chain, ">"), op_text,
                                 mode_name(s.mode), s.rows);
        }
        add_port(p.ports, std::move(item));
      }
      // Tensor-core policy: matmul groups at or above the class's row threshold run on tensor cores.
      if (leaf.tc_policy != "none" && s.rows >= leaf.tc_min_rows && g.unit != "tensor_core") {
        for (int idx : g.nodes) {
          const auto& node = s.nodes[static_cast<std::size_t>(idx)];
          if (node.op != "linear" && node.op != "moe_gate_up" && node.op != "moe_down") continue;
          TcFinding f;
          f.scope = s.name;
          f.group = g.gap ? "gap" : g.rule;
          f.op = node.role.empty() ? node.op : node.op + ":" + node.role;
          f.unit = g.unit;
          f.rows = s.rows;
          const std::string& vendor = in.device->vendor;
          f.message = fmt::format("{} at {} rows runs on {}; class '{}' policy '{}' wants {} from {} rows", f.op, s.rows,
                                  g.gap ? "reference ops (gap)" : unit_name(g.unit, vendor, /*plural=*/true), leaf.id,
                                  leaf.tc_policy, unit_name("tensor_core", vendor, /*plural=*/true), leaf.tc_min_rows);
          p.tc_audit.push_back(std::move(f));
        }
      }
    }
  }
  std::stable_sort(p.ports.begin(), p.ports.end(), [](const PortItem& a, const PortItem& b) {
    if (a.nodes != b.nodes) return a.nodes > b.nodes;
    if (a.kernel != b.kernel) return a.kernel < b.kernel;
    return a.op < b.op;
  });
  p.canonical = canonical_text(p, m);
  p.digest = sha256_hex(p.canonical);
  return p;
}

}  // namespace met::planner
