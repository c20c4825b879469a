// One table from backend name to constructor; the name check and its message derive from it.
#include "interp/backend_factory.hpp"

#include "interp/cpu_backend.hpp"
#include "interp/cuda_backend.hpp"

namespace met::interp {
namespace {

using Make = Expected<std::unique_ptr<Backend>> (*)(const Assets&, const BackendOptions&);

Expected<std::unique_ptr<Backend>> make_cpu(const Assets& a, const BackendOptions& o, bool any_class) {
  MET_TRY(auto b, CpuBackend::create(a, o.threads, any_class));
  return std::unique_ptr<Backend>(std::move(b));
}

struct Entry {
  const char* name;
  Make make;
};
const Entry kBackends[] = {
    {"cpu", [](const Assets& a, const BackendOptions& o) { return make_cpu(a, o, /*any_class=*/false); }},
    {"cuda",
     [](const Assets& a, const BackendOptions& o) -> Expected<std::unique_ptr<Backend>> {
       MET_TRY(auto b, CudaBackend::create(a, o.first_rank_only));
       b->set_fetch_logits(o.fetch_logits);
       return std::unique_ptr<Backend>(std::move(b));
     }},
    {"cpu-oracle", [](const Assets& a, const BackendOptions& o) { return make_cpu(a, o, /*any_class=*/true); }},
};

const Entry* find_entry(const std::string& name) {
  for (const auto& e : kBackends)
    if (name == e.name) return &e;
  return nullptr;
}

}  // namespace

const std::vector<std::string>& backend_names() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> v;
    for (const auto& e : kBackends) v.push_back(e.name);
    return v;
  }();
  return names;
}

Expected<void> check_backend_name(const std::string& name) {
  if (find_entry(name)) return {};
  const auto& names = backend_names();
  std::string list;
  for (std::size_t i = 0; i < names.size(); ++i) list += (i == 0 ? "" : i + 1 == names.size() ? " or " : ", ") + names[i];
  return fail("--backend '" + name + "': expected " + list);
}

Expected<std::unique_ptr<Backend>> make_backend(const std::string& name, const Assets& assets, const BackendOptions& options) {
  MET_CHECK(check_backend_name(name));
  return find_entry(name)->make(assets, options);
}

}  // namespace met::interp
