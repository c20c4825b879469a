#include "planner/model_toml.hpp"

#include <fmt/format.h>

#include "planner/matrix_ops.hpp"
#include "tree/toml.hpp"

namespace met::planner {

std::string model_quant(const model::ModelGraph& m) {
  for (const auto& k : m.kinds) {
    for (const auto& n : k.nodes) {
      if (n.op != "embed" && is_matrix_op(n.op) && n.weight_format) return std::string(format_name(*n.weight_format));
    }
  }
  return std::string(format_name(m.activation));
}

Expected<std::set<std::string>> declared_absent(const KernelTree& tree, const avail::ClassChain& chain, const model::ModelGraph& m) {
  std::set<std::string> absent;
  const std::string quant = model_quant(m);
  for (const auto* cls : chain.chain) {
    const std::string path = fmt::format("{}/{}/{}/MODEL.toml", cls->id, m.id, quant);
    if (!tree.exists(path)) continue;
    MET_TRY(auto doc, parse_toml(tree, path));
    Fields f(doc.file, doc.root, "");
    MET_TRY(auto model_id, f.str("model"));
    if (model_id != m.id) return f.error_at("model", fmt::format("names '{}' but lives in the directory of '{}'", model_id, m.id));
    MET_TRY(auto q, f.str("quant"));
    if (q != quant) return f.error_at("quant", fmt::format("names '{}' but lives in the directory of '{}'", q, quant));
    MET_TRY(auto names, f.str_list("absent"));
    MET_TRY(auto reason, f.str("reason"));
    (void)reason;  // shown to people reading the file; the report says "declared absent by MODEL.toml"
    MET_CHECK(f.done());
    absent.insert(names.begin(), names.end());
  }
  return absent;
}

Expected<Target> target_for_model(const Library& lib, const Target& target, const model::ModelGraph& m) {
  MET_TRY(auto absent, declared_absent(*lib.tree, target.chain, m));
  Target t = target;
  if (absent.empty()) return t;
  MET_TRY(t.availability, avail::compute_availability(*lib.tree, t.chain, *t.device, lib.registry, absent));
  return t;
}

}  // namespace met::planner
