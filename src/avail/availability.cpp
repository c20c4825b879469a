// Availability of every entry point of a class chain on one device. A guarded-out kernel's why
// names the guard, where it is, and the smallest set of missing instruction kinds that would make
// the whole enclosing condition true (none when the class defines alone explain it).
#include "avail/availability.hpp"

#include <fmt/format.h>

#include <algorithm>

#include "avail/scan.hpp"
#include "core/strings.hpp"

namespace met::avail {

namespace {

// Largest number of missing kinds whose subsets are searched for the smallest explanation.
constexpr std::size_t kMaxSubsetSearch = 12;

bool holds(const std::string& expr, const Macros& env) {
  auto v = eval_pp_expr(expr, env, "");
  return v && *v != 0;
}

// The fewest guard macros, among those the condition names whose kind the device lacks, that make
// `expr` true when set to 1; first in order of appearance on ties. Empty when none does.
std::vector<std::string> smallest_flip(const std::string& expr, const Macros& env, const std::vector<std::string>& lacking) {
  const std::size_t n = lacking.size();
  if (n == 0) return {};
  auto with = [&](const std::vector<std::size_t>& pick) {
    Macros m = env;
    for (std::size_t k : pick) m.insert_or_assign(lacking[k], 1);
    return m;
  };
  if (n > kMaxSubsetSearch) {
    std::vector<std::size_t> all(n);
    for (std::size_t k = 0; k < n; ++k) all[k] = k;
    return holds(expr, with(all)) ? lacking : std::vector<std::string>{};
  }
  for (std::size_t size = 1; size <= n; ++size) {
    // Combinations of `size` indices in lexicographic order.
    std::vector<std::size_t> pick(size);
    for (std::size_t k = 0; k < size; ++k) pick[k] = k;
    for (;;) {
      if (holds(expr, with(pick))) {
        std::vector<std::string> out;
        for (std::size_t k : pick) out.push_back(lacking[k]);
        return out;
      }
      std::size_t k = size;
      while (k > 0 && pick[k - 1] == n - size + k - 1) --k;
      if (k == 0) break;
      ++pick[k - 1];
      for (std::size_t j = k; j < size; ++j) pick[j] = pick[j - 1] + 1;
    }
  }
  return {};
}

std::vector<std::string> needs_of(const EntryPoint& e, const device::Device& device, const device::Registry& registry) {
  for (const std::string* expr : {&e.condition, &e.failed}) {
    if (expr->empty()) continue;
    std::vector<std::string> lacking;
    for (const auto& id : pp_identifiers(*expr, /*with_defined_operands=*/true)) {
      auto g = registry.guards.find(id);
      if (g != registry.guards.end() && !device.instructions.count(g->second)) lacking.push_back(id);
    }
    auto flip = smallest_flip(*expr, e.env, lacking);
    if (flip.empty()) continue;
    std::vector<std::string> kinds;
    for (const auto& m : flip) {
      const std::string& kind = registry.guards.at(m);
      if (std::find(kinds.begin(), kinds.end(), kind) == kinds.end()) kinds.push_back(kind);
    }
    return kinds;
  }
  return {};
}

}  // namespace

KernelStatus Availability::status(const std::string& name) const {
  auto it = kernels.find(name);
  if (it != kernels.end()) return it->second;
  KernelStatus s;
  s.name = name;
  s.why = fmt::format("not defined by any source of class '{}'", klass);
  return s;
}

Expected<Availability> compute_availability(const KernelTree& tree, const ClassChain& chain, const device::Device& device,
                                            const device::Registry& registry, const std::set<std::string>& declared_absent) {
  MET_CHECK(check_build_vs_device(chain, device, registry));
  const ClassInfo& leaf = chain.leaf();
  const bool kernels_are_global = leaf.language != "cpp";

  std::map<std::string, std::vector<EntryPoint>> by_name;  // occurrences in chain and line order
  for (const auto& src : chain.sources) {
    MET_TRY(std::string text, tree.read(src));
    MET_TRY(auto entries, scan_entry_points(text, tree.display(src), chain.defines));
    for (auto& e : entries) {
      if (e.global == kernels_are_global) by_name[e.name].push_back(std::move(e));
    }
  }

  Availability out;
  out.klass = leaf.id;
  out.device = device.id;
  for (const auto& [name, list] : by_name) {
    const EntryPoint* def = nullptr;
    for (const auto& e : list) {
      if (!e.defined) continue;
      if (def) {
        return fail(fmt::format("{}:{}: '{}' is defined by two sources of class '{}': {}:{} and {}:{}", e.file, e.line, name,
                                leaf.id, def->file, def->line, e.file, e.line));
      }
      def = &e;
    }
    KernelStatus st;
    st.name = name;
    const EntryPoint& at = def ? *def : list.front();
    st.file = at.file;
    st.line = at.line;
    if (def) {
      st.available = true;
    } else {
      st.needs = needs_of(at, device, registry);
      const std::string guard = fmt::format("guard '{}' at {}:{} is false", at.failed, at.file, at.failed_line);
      st.why = st.needs.empty() ? fmt::format("{} under class '{}' defines", guard, leaf.id)
                                : fmt::format("{}: needs {}, which {} lacks", guard, join(st.needs, ", "), device.id);
    }
    if (declared_absent.count(name)) {
      st.available = false;
      st.why = "declared absent by MODEL.toml";
      st.needs.clear();
    }
    out.kernels.emplace(name, std::move(st));
  }
  return out;
}

}  // namespace met::avail
