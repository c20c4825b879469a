// HARDWARE.toml loader and class-chain resolution. Everything is validated here so later layers can
// trust a ClassInfo: a class whose sources are missing, whose language is unknown, or whose
// inheritance loops never leaves this file.
#include "avail/classes.hpp"

#include <fmt/format.h>

#include <cctype>
#include <climits>
#include <set>

#include "core/format.hpp"
#include "core/strings.hpp"
#include "tree/toml.hpp"

namespace met::avail {

namespace {

const char* const kHardware = "HARDWARE.toml";

bool valid_macro_name(const std::string& s) {
  if (s.empty() || !(std::isalpha(static_cast<unsigned char>(s[0])) || s[0] == '_')) return false;
  for (char c : s) {
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_')) return false;
  }
  return true;
}

Expected<std::vector<int>> ladder(Fields& f, const std::string& key) {
  MET_TRY(auto raw, f.int_list(key));
  std::vector<int> out;
  for (std::int64_t v : raw) {
    if (v <= 0 || v > INT_MAX) return f.error_at(key, fmt::format("{} is not a positive integer", v));
    if (!out.empty() && v <= out.back()) return f.error_at(key, "values must be strictly ascending");
    out.push_back(static_cast<int>(v));
  }
  return out;
}

// A format name of the defaults table, or its located error naming the known ones.
Expected<void> known_format(Fields& f, const char* key, const std::string& v) {
  if (parse_format(v)) return {};
  std::vector<std::string> names;
  for (auto n : format_names()) names.emplace_back(n);
  return f.error_at(key, fmt::format("unknown format '{}' (known: {})", v, join(names, ", ")));
}

Expected<Defaults> load_defaults(const std::string& file, const toml::table& t, bool concrete) {
  Fields f(file, t, "defaults");
  Defaults d;
  for (const char* key : {"activation", "kv"}) {
    MET_TRY(auto v, f.opt_str(key));
    if (!v) continue;
    MET_CHECK(known_format(f, key, *v));
    (std::string(key) == "activation" ? d.activation : d.kv) = *v;
  }
  if (concrete) {
    for (const char* key : {"decode_rungs", "prefill_buckets", "runtime_reserve_gib", "workspace_mib"}) {
      if (!f.has(key)) return f.error(fmt::format("missing key '{}'", key));
    }
  }
  MET_TRY(d.decode_rungs, ladder(f, "decode_rungs"));
  MET_TRY(d.prefill_buckets, ladder(f, "prefill_buckets"));
  MET_TRY(auto reserve, f.opt_number("runtime_reserve_gib"));
  MET_TRY(auto workspace, f.opt_number("workspace_mib"));
  MET_TRY(auto ring, f.opt_boolean("kv_ring"));
  d.kv_ring = ring.value_or(false);
  if (f.has("kv_formats")) {
    MET_TRY(auto kv_formats, f.str_list("kv_formats"));
    if (kv_formats.empty()) return f.error_at("kv_formats", "must list at least one format");
    for (const auto& v : kv_formats) MET_CHECK(known_format(f, "kv_formats", v));
    d.kv_formats = kv_formats;
  }
  d.runtime_reserve_gib = reserve.value_or(0);
  d.workspace_mib = workspace.value_or(0);
  if (d.runtime_reserve_gib < 0) return f.error_at("runtime_reserve_gib", "must not be negative");
  if (d.workspace_mib < 0) return f.error_at("workspace_mib", "must not be negative");
  MET_CHECK(f.done());
  return d;
}

}  // namespace

Expected<ClassInfo> load_class(const KernelTree& tree, const std::string& path) {
  MET_TRY(TomlDoc doc, parse_toml(tree, path));
  Fields f(doc.file, doc.root, "");
  ClassInfo c;
  c.location = doc.file;
  MET_TRY(c.id, f.str("class"));
  const std::size_t slash = path.rfind('/');
  const std::string dir = slash == std::string::npos ? "" : path.substr(0, slash);
  if (c.id != dir) return f.error_at("class", fmt::format("class '{}' must equal its directory name '{}'", c.id, dir));
  MET_TRY(c.arch, f.str("arch"));
  const bool concrete = c.arch != "abstract";
  MET_TRY(auto vendor, f.opt_str("vendor"));
  if (!vendor && concrete) return f.error("missing key 'vendor'");
  c.vendor = vendor.value_or("");
  if (vendor && *vendor != "nvidia" && *vendor != "amd" && *vendor != "host") {
    return f.error_at("vendor", fmt::format("unknown vendor '{}' (known: nvidia, amd, host)", *vendor));
  }
  MET_TRY(c.language, f.str("language"));
  if (c.language != "cuda" && c.language != "hip" && c.language != "cpp") {
    return f.error_at("language", fmt::format("unknown language '{}' (known: cuda, hip, cpp)", c.language));
  }
  MET_TRY(c.inherits, f.opt_str("inherits"));
  if (c.inherits && *c.inherits == c.id) return f.error_at("inherits", fmt::format("class '{}' inherits itself", c.id));
  MET_TRY(c.packet_overhead_us, f.opt_number("packet_overhead_us"));
  MET_TRY(auto overhead_evidence, f.opt_str("packet_overhead_evidence"));
  if (c.packet_overhead_us && (*c.packet_overhead_us <= 0 || !overhead_evidence))
    return f.error_at("packet_overhead_us", "must be positive and come with packet_overhead_evidence (the campaign it was measured in)");
  if (overhead_evidence && !c.packet_overhead_us) return f.error_at("packet_overhead_evidence", "without packet_overhead_us");
  c.packet_overhead_evidence = overhead_evidence.value_or("");
  MET_TRY(auto tile, f.int_list("gemm_tile"));
  if (!tile.empty()) {
    if (tile.size() != 2 || tile[0] <= 0 || tile[1] <= 0)
      return f.error_at("gemm_tile", "must be [rows, columns], both positive (the interpreter GEMM body's output tile)");
    c.gemm_tile = std::make_pair(tile[0], tile[1]);
  }
  MET_TRY(auto split, f.int_list("gemm_k_split"));
  if (!split.empty()) {
    if (split.size() != 2 || split[0] < 2 || split[1] <= 0 || !c.gemm_tile)
      return f.error_at("gemm_k_split", "must be [most K parts, fewest K values per part], at least 2 parts and a positive "
                                        "length, beside gemm_tile (the interpreter GEMM body's split K)");
    c.gemm_k_split = std::make_pair(split[0], split[1]);
  }
  MET_TRY(auto moe_block, f.int_list("moe_gemm_block"));
  if (!moe_block.empty()) {
    if (moe_block.size() != 2 || moe_block[0] <= 0 || moe_block[1] <= 0)
      return f.error_at("moe_gemm_block", "must be [slots, weight rows], both positive (the grouped expert body's block)");
    c.moe_gemm_block = std::make_pair(moe_block[0], moe_block[1]);
  }
  MET_TRY(auto sorted, f.opt_boolean("moe_gemm_sorted"));
  if (sorted && !c.moe_gemm_block) return f.error_at("moe_gemm_sorted", "needs moe_gemm_block (the grouped expert body's block)");
  c.moe_gemm_sorted = sorted.value_or(false);
  MET_TRY(c.sources, f.str_list("sources"));
  std::set<std::string> seen;
  for (const auto& s : c.sources) {
    if (!seen.insert(s).second) return f.error_at("sources", fmt::format("source '{}' is listed twice", s));
    if (!tree.exists(s)) return f.error_at("sources", fmt::format("source '{}' does not exist", tree.display(s)));
  }

  MET_TRY(const toml::table* defines, f.table("defines"));
  if (defines) {
    Fields d(doc.file, *defines, "defines");
    for (const auto& [key, node] : *defines) {
      const std::string name(key.str());
      if (!valid_macro_name(name)) return d.error_at(name, "not a macro name");
      MET_TRY(std::int64_t v, d.integer(name));
      c.defines.emplace(name, static_cast<long long>(v));
    }
    MET_CHECK(d.done());
  }

  MET_TRY(const toml::table* tc, f.table("tensor_core"));
  if (!tc && concrete) return f.error("missing table [tensor_core]");
  if (tc) {
    Fields t(doc.file, *tc, "tensor_core");
    MET_TRY(c.tc_policy, t.str("policy"));
    if (c.tc_policy != "required" && c.tc_policy != "preferred" && c.tc_policy != "none") {
      return t.error_at("policy", fmt::format("unknown policy '{}' (known: required, preferred, none)", c.tc_policy));
    }
    MET_TRY(auto rows, t.opt_integer("min_rows"));
    if (!rows && c.tc_policy != "none") return t.error(fmt::format("missing key 'min_rows' (policy '{}')", c.tc_policy));
    if (rows && (*rows < 1 || *rows > INT_MAX)) return t.error_at("min_rows", fmt::format("{} is not a positive integer", *rows));
    c.tc_min_rows = rows ? static_cast<int>(*rows) : 0;
    MET_CHECK(t.done());
  }

  MET_TRY(const toml::table* defaults, f.table("defaults"));
  if (!defaults && concrete) return f.error("missing table [defaults]");
  if (defaults) {
    MET_TRY(c.defaults, load_defaults(doc.file, *defaults, concrete));
  }
  MET_CHECK(f.done());
  return c;
}

Expected<std::map<std::string, ClassInfo>> load_classes(const KernelTree& tree) {
  std::map<std::string, ClassInfo> classes;
  const std::string suffix = std::string("/") + kHardware;
  for (const auto& path : tree.list("")) {
    if (path.size() <= suffix.size() || path.compare(path.size() - suffix.size(), suffix.size(), suffix) != 0) continue;
    if (path.find('/') != path.size() - suffix.size()) continue;  // one level deep only
    MET_TRY(ClassInfo c, load_class(tree, path));
    classes.emplace(c.id, std::move(c));
  }
  for (const auto& [id, c] : classes) {
    MET_TRY(auto chain, resolve_chain(classes, id));
    (void)chain;
  }
  return classes;
}

std::vector<std::string> ClassChain::ids() const {
  std::vector<std::string> out;
  for (const ClassInfo* c : chain) out.push_back(c->id);
  return out;
}

Expected<ClassChain> resolve_chain(const std::map<std::string, ClassInfo>& classes, const std::string& id) {
  auto known = [&] {
    std::vector<std::string> ids;
    for (const auto& [k, v] : classes) ids.push_back(k);
    return join(ids, ", ");
  };
  auto it = classes.find(id);
  if (it == classes.end()) return fail(fmt::format("unknown class '{}' (known: {})", id, known()));
  std::vector<const ClassInfo*> leaf_first{&it->second};
  while (leaf_first.back()->inherits) {
    const ClassInfo& child = *leaf_first.back();
    const std::string& parent = *child.inherits;
    for (std::size_t k = 0; k < leaf_first.size(); ++k) {
      if (leaf_first[k]->id != parent) continue;
      std::vector<std::string> cycle;
      for (std::size_t j = k; j < leaf_first.size(); ++j) cycle.push_back(leaf_first[j]->id);
      cycle.push_back(parent);
      return fail(fmt::format("{}: class inheritance cycle: {}", leaf_first[k]->location, join(cycle, " -> ")));
    }
    auto p = classes.find(parent);
    if (p == classes.end()) {
      return fail(fmt::format("{}: class '{}' inherits '{}', which is not a class (known: {})", child.location, child.id, parent, known()));
    }
    leaf_first.push_back(&p->second);
  }
  ClassChain out;
  out.chain.assign(leaf_first.rbegin(), leaf_first.rend());
  std::set<std::string> seen;
  for (const ClassInfo* c : out.chain) {
    for (const auto& s : c->sources) {
      if (seen.insert(s).second) out.sources.push_back(s);
    }
    for (const auto& [k, v] : c->defines) out.defines.insert_or_assign(k, v);
  }
  return out;
}

}  // namespace met::avail
