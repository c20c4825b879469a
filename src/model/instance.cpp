// Loader of INSTANCES.toml: strict keys, known formats, unique ids, config directories that exist
// in the tree, a `default` weight format.
#include "model/instance.hpp"

#include <fmt/format.h>

#include "core/strings.hpp"
#include "tree/toml.hpp"

namespace met::model {
namespace {

std::string format_list() {
  std::vector<std::string> names;
  for (auto n : format_names()) names.emplace_back(n);
  return join(names, ", ");
}

Expected<Format> format_of(Fields& f, const std::string& key) {
  MET_TRY(std::string s, f.str(key));
  auto fmt_ = parse_format(s);
  if (!fmt_) return f.error_at(key, fmt::format("unknown format '{}' (known: {})", s, format_list()));
  return *fmt_;
}

}  // namespace

Expected<std::map<std::string, Instance>> load_instances(const KernelTree& tree) {
  MET_TRY(TomlDoc doc, parse_toml(tree, kInstancesPath));
  const std::string& file = doc.file;
  Fields top(file, doc.root, "");
  MET_TRY(const toml::array* arr, top.array("instance"));
  MET_CHECK(top.done());
  std::map<std::string, Instance> out;
  if (!arr) return out;
  int index = 0;
  for (const auto& raw : *arr) {
    ++index;
    if (!raw.is_table()) return fail(fmt::format("{}: instance {}: expected a table", where(file, raw), index));
    const toml::table& t = *raw.as_table();
    Instance in;
    in.location = where(file, t);
    Fields head(file, t, fmt::format("instance {}", index));
    MET_TRY(in.id, head.str("id"));
    Fields f(file, t, fmt::format("instance '{}'", in.id));
    MET_TRY(in.id, f.str("id"));
    MET_TRY(in.config_dir, f.str("config"));
    MET_TRY(in.circuit, f.opt_str("circuit"));
    MET_TRY(const toml::table* weights, f.table("weights"));
    if (!weights) return f.error("missing key 'weights'");
    Fields wf(file, *weights, fmt::format("instance '{}' weights", in.id));
    for (const auto& [key, node] : *weights) {
      const std::string k(key.str());
      MET_TRY(Format w, format_of(wf, k));
      in.weights.emplace(k, w);
    }
    MET_CHECK(wf.done());
    if (!in.weights.count("default")) return f.error_at("weights", "missing 'default'");
    MET_TRY(in.kv, format_of(f, "kv"));
    MET_TRY(auto context, f.opt_integer("context"));
    if (context) {
      if (*context < 1 || *context > (1 << 24)) return f.error_at("context", fmt::format("{} is out of range", *context));
      in.context = static_cast<int>(*context);
    }
    MET_CHECK(f.done());
    if (!tree.exists(in.config_dir + "/config.json")) {
      return f.error_at("config", fmt::format("no {}", tree.display(in.config_dir + "/config.json")));
    }
    auto [it, fresh] = out.emplace(in.id, in);
    if (!fresh) return f.error(fmt::format("duplicate instance id '{}' (first at {})", in.id, it->second.location));
  }
  return out;
}

}  // namespace met::model
