// Loader of kernels/circuits/<id>.toml. Strict: unknown keys, unknown ops, missing or unknown op
// params, unknown names in expressions, parameter cycles and kinds the schedule names but the file
// does not define are all located errors here, at load time.
#include "model/circuit.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <functional>
#include <set>

#include "core/strings.hpp"
#include "model/ops.hpp"
#include "tree/toml.hpp"

namespace met::model {
namespace {

constexpr const char* kInstancesFile = "INSTANCES.toml";

Expected<Expr> expr_of(const toml::node& n, const std::string& where_text) {
  if (n.is_string()) return parse_expr(n.as_string()->get(), where_text);
  if (n.is_integer()) return constant_expr(static_cast<double>(n.as_integer()->get()), where_text);
  if (n.is_floating_point()) return constant_expr(n.as_floating_point()->get(), where_text);
  if (n.is_boolean()) return constant_expr(n.as_boolean()->get() ? 1 : 0, where_text);
  return fail(fmt::format("{}: expected an expression (a string or a number)", where_text));
}

// Reads an optional expression key of a table.
Expected<Expr> opt_expr(Fields& f, const std::string& key, const std::string& what) {
  const toml::node* n = f.raw(key);
  if (!n) return Expr{};
  const std::string w = where(f.file(), *n) + ": " + (what.empty() ? "" : what + " ") + "'" + key + "'";
  return expr_of(*n, w);
}

Expected<void> check_names(const Expr& e, const std::set<std::string>& allowed) {
  for (const auto& name : e.names()) {
    if (!allowed.count(name)) {
      std::vector<std::string> known(allowed.begin(), allowed.end());
      return fail(fmt::format("{}: '{}': unknown name '{}' (known: {})", e.where(), e.text(), name, join(known, ", ")));
    }
  }
  return {};
}

Expected<NodeTemplate> load_node(const std::string& file, const toml::node& raw, const std::string& what,
                                 const std::set<std::string>& names) {
  if (!raw.is_table()) return fail(fmt::format("{}: {}: expected a table", where(file, raw), what));
  const toml::table& t = *raw.as_table();
  NodeTemplate n;
  n.where = where(file, t);
  n.what = what;
  Fields f(file, t, what);
  MET_TRY(n.op, f.str("op"));
  const OpInfo* op = find_op(n.op);
  if (!op) return f.error_at("op", fmt::format("unknown op '{}' (known: {})", n.op, join(op_names(), ", ")));
  const std::string label = fmt::format("{} ('{}')", what, n.op);
  MET_TRY(auto role, f.opt_str("role"));
  n.role = role.value_or("");
  if (!op->roles.empty() && !n.role.empty()) {
    bool ok = false;
    for (const auto& r : op->roles) ok = ok || r == n.role;
    if (!ok) return f.error_at("role", fmt::format("unknown role '{}' of op '{}' (known: {})", n.role, n.op, join(op->roles, ", ")));
  }
  if (!op->roles.empty() && n.role.empty()) {
    return f.error(fmt::format("op '{}' needs a role (known: {})", n.op, join(op->roles, ", ")));
  }
  MET_TRY(n.weight, f.str_or_list("weight"));
  MET_TRY(auto tied, f.opt_str("tied"));
  n.tied = tied.value_or("");
  if (!n.weight.empty() && !op->may_have_weight) return f.error_at("weight", fmt::format("op '{}' has no weight", n.op));
  if (op->may_have_weight && op->weight_required && n.weight.empty()) {
    return f.error(fmt::format("op '{}' has a weight: name its tensor with 'weight'", n.op));
  }
  if (!n.tied.empty() && n.weight.empty()) return f.error_at("tied", "a tied tensor needs a 'weight' too");
  if (!n.tied.empty() && !names.count(kTieParam)) {
    return f.error_at("tied", fmt::format("'tied' needs a circuit parameter '{}'", kTieParam));
  }
  MET_TRY(n.when, opt_expr(f, "when", label));
  if (!n.when.empty()) MET_CHECK(check_names(n.when, names));
  const auto accepted = op_param_names(*op);
  for (const auto& name : accepted) {
    MET_TRY(Expr e, opt_expr(f, name, label + " param"));
    if (e.empty()) continue;
    MET_CHECK(check_names(e, names));
    n.params.emplace(name, std::move(e));
  }
  if (op->may_have_weight && !op->weight_switch.empty() && n.weight.empty() && !n.params.count(op->weight_switch)) {
    return f.error(fmt::format("op '{}' has a weight: name its tensor with 'weight' (or set '{}')", n.op, op->weight_switch));
  }
  for (const auto& req : op->required) {
    if (!n.params.count(req)) {
      return f.error(fmt::format("op '{}' needs param '{}' (params: {})", n.op, req, join(accepted, ", ")));
    }
  }
  for (const auto& [key, node] : t) {
    const std::string k(key.str());
    static const std::set<std::string> kFixed{"op", "role", "weight", "tied", "when"};
    if (kFixed.count(k)) continue;
    bool known = false;
    for (const auto& a : accepted) known = known || a == k;
    if (!known) {
      return f.error_at(k, fmt::format("unknown param of op '{}' (params: {})", n.op, join(accepted, ", ")));
    }
  }
  MET_CHECK(f.done());
  return n;
}

Expected<std::vector<NodeTemplate>> load_nodes(const std::string& file, const toml::array* arr,
                                               const std::string& section, const std::set<std::string>& names) {
  std::vector<NodeTemplate> out;
  if (!arr) return out;
  int index = 0;
  for (const auto& raw : *arr) {
    ++index;
    MET_TRY(NodeTemplate n, load_node(file, raw, fmt::format("node {} of {}", index, section), names));
    out.push_back(std::move(n));
  }
  return out;
}

Expected<std::map<std::string, std::string>> string_map(const std::string& file, const toml::table* t,
                                                        const std::string& what) {
  std::map<std::string, std::string> out;
  if (!t) return out;
  Fields f(file, *t, what);
  for (const auto& [key, node] : *t) {
    const std::string k(key.str());
    MET_TRY(std::string v, f.str(k));
    out.emplace(k, v);
  }
  MET_CHECK(f.done());
  return out;
}

// Orders parameters so every one comes after those its expressions read; a cycle is an error.
Expected<void> order_params(Circuit& c) {
  std::map<std::string, int> state;  // 1 visiting, 2 done
  std::vector<std::string> stack;
  std::function<Expected<void>(const std::string&)> visit = [&](const std::string& name) -> Expected<void> {
    auto it = c.params.find(name);
    if (it == c.params.end()) return {};
    if (state[name] == 2) return {};
    if (state[name] == 1) {
      stack.push_back(name);
      return fail(fmt::format("{}: parameter cycle: {}", it->second.where, join(stack, " -> ")));
    }
    state[name] = 1;
    stack.push_back(name);
    for (const Expr* e : {&it->second.value, &it->second.default_value}) {
      for (const auto& dep : e->names()) MET_CHECK(visit(dep));
    }
    stack.pop_back();
    state[name] = 2;
    c.param_order.push_back(name);
    return {};
  };
  for (const auto& [name, def] : c.params) MET_CHECK(visit(name));
  return {};
}

}  // namespace

Expected<Circuit> load_circuit(const KernelTree& tree, const std::string& path) {
  MET_TRY(TomlDoc doc, parse_toml(tree, path));
  const std::string& file = doc.file;
  Circuit c;
  c.file = file;
  Fields top(file, doc.root, "");
  MET_TRY(const toml::table* head, top.table("circuit"));
  if (!head) return top.error("missing table [circuit]");
  {
    Fields f(file, *head, "[circuit]");
    MET_TRY(c.id, f.str("id"));
    MET_TRY(c.architectures, f.str_list("architectures"));
    MET_TRY(const toml::table* strip, f.table("strip_prefix"));
    MET_CHECK(f.done());
    if (c.architectures.empty()) return f.error("'architectures' is empty");
    if (strip) {
      Fields sf(file, *strip, "[circuit] strip_prefix");
      for (const auto& [key, node] : *strip) {
        const std::string arch(key.str());
        if (std::find(c.architectures.begin(), c.architectures.end(), arch) == c.architectures.end())
          return sf.error_at(arch, "'" + arch + "' is not one of the circuit's architectures");
        MET_TRY(c.strip_prefix[arch], sf.str(arch));
        if (c.strip_prefix[arch].empty()) return sf.error_at(arch, "an empty prefix strips nothing");
      }
      MET_CHECK(sf.done());
    }
  }
  const std::string stem = path.substr(path.rfind('/') + 1);
  if (stem != c.id + ".toml") return fail(fmt::format("{}: circuit id '{}' differs from the file name", file, c.id));

  MET_TRY(const toml::table* params, top.table("params"));
  std::set<std::string> names{"arch"};
  if (params) {
    for (const auto& [key, node] : *params) names.insert(std::string(key.str()));
  }
  if (params) {
    Fields pf(file, *params, "[params]");
    for (const auto& [key, node] : *params) {
      const std::string name(key.str());
      MET_TRY(const toml::table* t, pf.table(name));
      ParamDef d;
      d.name = name;
      d.where = where(file, *t);
      const std::string what = fmt::format("parameter '{}'", name);
      Fields f(file, *t, what);
      MET_TRY(d.keys, f.str_or_list("key"));
      MET_TRY(d.default_value, opt_expr(f, "default", what));
      MET_TRY(d.value, opt_expr(f, "value", what));
      MET_CHECK(f.done());
      if (d.keys.empty() == d.value.empty()) return f.error("give exactly one of 'key' and 'value'");
      if (!d.default_value.empty() && d.keys.empty()) return f.error("'default' needs 'key'");
      for (const Expr* e : {&d.value, &d.default_value}) {
        if (!e->empty()) MET_CHECK(check_names(*e, names));
      }
      c.params.emplace(name, std::move(d));
    }
    MET_CHECK(pf.done());
  }
  MET_CHECK(order_params(c));
  std::set<std::string> layer_names = names;
  layer_names.insert("i");

  MET_TRY(const toml::table* kinds, top.table("kind"));
  if (kinds) {
    Fields kf(file, *kinds, "[kind]");
    for (const auto& [key, node] : *kinds) {
      const std::string kind(key.str());
      MET_TRY(const toml::array* arr, kf.array(kind));
      MET_TRY(auto nodes, load_nodes(file, arr, fmt::format("kind '{}'", kind), layer_names));
      c.kinds.emplace(kind, std::move(nodes));
    }
    MET_CHECK(kf.done());
  }
  MET_TRY(const toml::array* pre, top.array("pre"));
  MET_TRY(c.pre, load_nodes(file, pre, "[[pre]]", names));
  MET_TRY(const toml::array* post, top.array("post"));
  MET_TRY(c.post, load_nodes(file, post, "[[post]]", names));

  MET_TRY(const toml::table* layers, top.table("layers"));
  if (!layers) return top.error("missing table [layers]");
  {
    LayerSchedule& s = c.layers;
    s.where = where(file, *layers);
    Fields f(file, *layers, "[layers]");
    const toml::node* count = f.raw("count");
    if (!count) return f.error("missing key 'count'");
    MET_TRY(s.count, expr_of(*count, where(file, *count) + ": [layers] 'count'"));
    MET_CHECK(check_names(s.count, names));
    MET_TRY(auto def, f.opt_str("default"));
    s.default_kind = def.value_or("");
    MET_TRY(s.kinds_key, f.str_or_list("kinds_key"));
    MET_TRY(const toml::table* km, f.table("kinds_map"));
    MET_TRY(s.kinds_map, string_map(file, km, "[layers] kinds_map"));
    MET_TRY(s.pattern_key, f.str_or_list("pattern_key"));
    MET_TRY(const toml::table* pm, f.table("pattern_map"));
    MET_TRY(s.pattern_map, string_map(file, pm, "[layers] pattern_map"));
    if (const toml::node* sc = f.raw("shared_count")) {
      MET_TRY(s.shared_count, expr_of(*sc, where(file, *sc) + ": [layers] 'shared_count'"));
      MET_CHECK(check_names(s.shared_count, names));
    }
    MET_TRY(const toml::table* sm, f.table("shared_map"));
    MET_TRY(s.shared_map, string_map(file, sm, "[layers] shared_map"));
    MET_TRY(const toml::array* sel, f.array("select"));
    if (sel) {
      int index = 0;
      for (const auto& raw : *sel) {
        ++index;
        const std::string what = fmt::format("[[layers.select]] {}", index);
        if (!raw.is_table()) return fail(fmt::format("{}: {}: expected a table", where(file, raw), what));
        Fields sf(file, *raw.as_table(), what);
        Selector one;
        MET_TRY(one.kind, sf.str("kind"));
        MET_TRY(one.when, opt_expr(sf, "when", what));
        MET_TRY(one.index_key, sf.str_or_list("index_key"));
        if (one.when.empty() == one.index_key.empty()) return sf.error("give one of 'when' and 'index_key'");
        if (!one.when.empty()) MET_CHECK(check_names(one.when, layer_names));
        MET_CHECK(sf.done());
        s.select.push_back(std::move(one));
      }
    }
    MET_CHECK(f.done());
    if (s.kinds_key.empty() != s.kinds_map.empty()) return f.error("'kinds_key' and 'kinds_map' come together");
    if (s.pattern_key.empty() != s.pattern_map.empty()) return f.error("'pattern_key' and 'pattern_map' come together");
    if (s.shared_count.empty() != s.shared_map.empty()) return f.error("'shared_count' and 'shared_map' come together");
    for (const auto& [ch, kind] : s.pattern_map) {
      if (ch.size() != 1) return f.error_at("pattern_map", fmt::format("key '{}' is not one character", ch));
    }
    if (s.default_kind.empty() && s.select.empty() && s.kinds_key.empty() && s.pattern_key.empty()) {
      return f.error("no way to pick a layer's kind: give 'default', 'select', 'kinds_key' or 'pattern_key'");
    }
    std::vector<std::pair<std::string, std::string>> named;  // (kind, who names it)
    if (!s.default_kind.empty()) named.emplace_back(s.default_kind, "'default'");
    for (const auto& [k, v] : s.kinds_map) named.emplace_back(v, fmt::format("kinds_map '{}'", k));
    for (const auto& [k, v] : s.pattern_map) named.emplace_back(v, fmt::format("pattern_map '{}'", k));
    for (const auto& one : s.select) named.emplace_back(one.kind, "a select");
    for (const auto& [k, v] : s.shared_map) named.emplace_back(v, fmt::format("shared_map '{}'", k));
    std::vector<std::string> known;
    for (const auto& [k, v] : c.kinds) known.push_back(k);
    for (const auto& [kind, who] : named) {
      if (!c.kinds.count(kind)) {
        return f.error(fmt::format("{} names kind '{}', which has no [[kind.{}]] nodes (known: {})", who, kind, kind,
                                   join(known, ", ")));
      }
    }
  }
  MET_CHECK(top.done());
  return c;
}

std::string tensor_name(const Circuit& circuit, const std::string& arch, const std::string& name, int layer) {
  std::string out = name;
  const std::string mark = "{i}";
  const std::string idx = std::to_string(std::max(layer, 0));
  for (std::size_t at = out.find(mark); at != std::string::npos; at = out.find(mark, at)) {
    out.replace(at, mark.size(), idx);
    at += idx.size();
  }
  // The prefix is dropped where it starts a dotted component: at the front (Gemma-3's
  // "language_model.model.") or after one ("model.language_model." of Gemma-4).
  if (auto it = circuit.strip_prefix.find(arch); it != circuit.strip_prefix.end()) {
    const std::string& pre = it->second;
    for (std::size_t at = out.find(pre); at != std::string::npos; at = out.find(pre, at + 1)) {
      if (at == 0 || out[at - 1] == '.') {
        out.erase(at, pre.size());
        break;
      }
    }
  }
  return out;
}

Expected<std::map<std::string, Circuit>> load_circuits(const KernelTree& tree) {
  std::map<std::string, Circuit> out;
  std::map<std::string, std::string> owner;  // architecture -> circuit id
  for (const auto& path : tree.list("circuits")) {
    const std::string rest = path.substr(std::string("circuits/").size());
    if (rest.find('/') != std::string::npos) continue;  // circuits/configs/...
    if (rest == kInstancesFile) continue;
    if (rest.size() < 5 || rest.compare(rest.size() - 5, 5, ".toml") != 0) continue;
    MET_TRY(Circuit c, load_circuit(tree, path));
    for (const auto& arch : c.architectures) {
      auto [it, fresh] = owner.emplace(arch, c.id);
      if (!fresh) {
        return fail(fmt::format("{}: architecture '{}' is claimed by circuit '{}' too", c.file, arch, it->second));
      }
    }
    const std::string id = c.id;
    out.emplace(id, std::move(c));
  }
  return out;
}

}  // namespace met::model
