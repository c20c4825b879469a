// Loads DEVICES.toml into a Registry and validates it: every table goes through Fields (unknown
// keys and wrong types are located errors), every numeric figure resolves to a defined source,
// and vocabularies (vendors, instruction kinds, peak keys, interconnects) are closed lists.
#include "device/registry.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>

#include "core/strings.hpp"
#include "tree/toml.hpp"

namespace met::device {

namespace {

constexpr std::int64_t kSchema = 1;

const std::vector<std::string> kVendors = {"nvidia", "amd", "host"};
// "none" is reserved for the host device, which has no peer interconnect.
const std::vector<std::string> kInterconnectKinds = {"nvlink3", "nvlink4", "nvlink5", "xgmi",
                                                     "pcie4",   "pcie5",   "none"};
// Device fields that hold a number and so must name a source. "interconnect" stands for its gbs.
const std::vector<std::string> kNumericFields = {
    "units",  "boost_clock_mhz",   "memory_gb", "visible_gib",     "bandwidth_gbs",
    "l2_mib", "smem_per_unit_kib", "tdp_w",     "usable_fraction", "interconnect"};
// A device may not claim more visible memory than this multiple of its datasheet size (GiB vs GB
// and rounding leave room; a misplaced decimal point does not fit).
constexpr double kVisibleSlack = 1.10;
constexpr double kBytesPerGiB = 1073741824.0;

bool contains(const std::vector<std::string>& v, const std::string& s) {
  return std::find(v.begin(), v.end(), s) != v.end();
}

// Ids, classes and source keys: lower-case letters, digits and single inner '-'.
bool valid_id(const std::string& s) {
  if (s.empty() || s.front() == '-' || s.back() == '-') return false;
  return std::all_of(s.begin(), s.end(),
                     [](char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-'; });
}

// Guard macros are C identifiers in upper case: MET_HAS_WGMMA.
bool valid_macro(const std::string& s) {
  if (s.empty() || (s.front() >= '0' && s.front() <= '9')) return false;
  return std::all_of(s.begin(), s.end(),
                     [](char c) { return (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_'; });
}

std::string known(const std::vector<std::string>& v) { return fmt::format("(known: {})", join(v, ", ")); }

std::vector<std::string> source_keys(const Registry& reg) {
  std::vector<std::string> keys;
  for (const auto& [k, s] : reg.sources) keys.push_back(k);
  return keys;
}

Expected<void> parse_sources(const std::string& file, const toml::table& table, Registry& reg) {
  for (const auto& [k, node] : table) {
    const std::string key(k.str());
    if (!node.is_table()) {
      return fail(fmt::format("{}: source '{}': expected a table with title and url", where(file, node), key));
    }
    Fields f(file, *node.as_table(), fmt::format("source '{}'", key));
    if (!valid_id(key)) return f.error("source key must be lower-case letters, digits and '-'");
    Source s;
    s.key = key;
    MET_TRY(s.title, f.str("title"));
    MET_TRY(s.url, f.str("url"));
    MET_CHECK(f.done());
    if (s.title.empty()) return f.error_at("title", "must not be empty");
    if (s.url.empty()) return f.error_at("url", "must not be empty");
    reg.sources.emplace(key, std::move(s));
  }
  return {};
}

Expected<void> parse_guards(const std::string& file, const toml::table& table, Registry& reg) {
  for (const auto& [k, node] : table) {
    const std::string macro(k.str());
    const std::string head = fmt::format("{}: guard '{}'", where(file, node), macro);
    if (!valid_macro(macro)) return fail(head + ": macro names are upper-case identifiers");
    if (!node.is_string()) return fail(head + ": expected a string naming an instruction kind");
    const std::string kind = node.as_string()->get();
    if (!contains(instruction_kinds(), kind)) {
      return fail(fmt::format("{}: unknown instruction kind '{}' {}", head, kind, known(instruction_kinds())));
    }
    reg.guards.emplace(macro, kind);
  }
  return {};
}

// A number that must be > 0.
Expected<double> positive(Fields& f, const std::string& key) {
  MET_TRY(double v, f.number(key));
  if (!(v > 0)) return f.error_at(key, fmt::format("must be positive, found {}", v));
  return v;
}

Expected<std::string> cited_source(Fields& f, const Registry& reg, const std::string& key,
                                   const std::string& source) {
  if (!reg.sources.count(source)) {
    return f.error_at(key, fmt::format("unknown source '{}' {}", source, known(source_keys(reg))));
  }
  return source;
}

Expected<Interconnect> parse_interconnect(const std::string& file, const toml::table& t, const std::string& what,
                                          const std::string& vendor) {
  Fields f(file, t, what + " interconnect");
  Interconnect ic;
  MET_TRY(ic.kind, f.str("kind"));
  MET_TRY(ic.gbs, f.number("gbs"));
  MET_CHECK(f.done());
  if (!contains(kInterconnectKinds, ic.kind)) {
    return f.error_at("kind", fmt::format("unknown interconnect '{}' {}", ic.kind, known(kInterconnectKinds)));
  }
  if (ic.kind == "none") {
    if (vendor != "host") return f.error_at("kind", "'none' is only for the host device; a gpu names its link");
    if (ic.gbs != 0) return f.error_at("gbs", "must be 0 when kind is 'none'");
  } else if (!(ic.gbs > 0)) {
    return f.error_at("gbs", fmt::format("must be positive, found {}", ic.gbs));
  }
  return ic;
}

Expected<std::map<std::string, double>> parse_peaks(const std::string& file, const toml::table& t,
                                                    const std::string& what) {
  Fields f(file, t, what + " peaks");
  std::map<std::string, double> peaks;
  for (const auto& [k, node] : t) {
    const std::string key(k.str());
    if (!contains(peak_keys(), key)) {
      return f.error_at(key, fmt::format("unknown peak key {}", known(peak_keys())));
    }
    MET_TRY(peaks[key], positive(f, key));
  }
  MET_CHECK(f.done());
  if (!peaks.count("fp32")) return f.error("missing key 'fp32' (cuda-core groups are costed at it)");
  return peaks;
}

Expected<Measured> parse_measured(const std::string& file, const toml::table& t, const std::string& what,
                                  const Registry& reg) {
  Fields f(file, t, what + " measured");
  std::vector<std::string> allowed = {"read_gbs", "copy_gbs", "cite"};
  allowed.insert(allowed.end(), peak_keys().begin(), peak_keys().end());
  for (const auto& [k, node] : t) {
    const std::string key(k.str());
    if (!contains(allowed, key)) return f.error_at(key, fmt::format("unknown key {}", known(allowed)));
  }
  Measured m;
  for (auto [key, slot] : {std::pair{"read_gbs", &m.read_gbs}, std::pair{"copy_gbs", &m.copy_gbs}}) {
    if (!f.has(key)) continue;
    MET_TRY(double gbs, positive(f, key));
    *slot = gbs;
  }
  for (const std::string& key : peak_keys()) {
    if (!f.has(key)) continue;
    MET_TRY(m.peaks[key], positive(f, key));
  }
  MET_TRY(std::string cite, f.str("cite"));
  MET_TRY(m.cite, cited_source(f, reg, "cite", cite));
  MET_CHECK(f.done());
  if (!m.read_gbs && !m.copy_gbs && m.peaks.empty()) return f.error("holds no measured figure");
  return m;
}

// Fills d.cites: every numeric field (and each peak as "peaks.<key>") names a defined source.
// Precedence: cite_fields.<field>, then cite_fields.peaks for peaks, then the device's cite.
Expected<void> resolve_cites(Fields& f, const toml::table& t, const Registry& reg, Device& d) {
  MET_TRY(std::optional<std::string> cite, f.opt_str("cite"));
  if (cite) { MET_TRY(cite, cited_source(f, reg, "cite", *cite)); }
  MET_TRY(const toml::table* overrides, f.table("cite_fields"));

  std::map<std::string, std::string> by_field;
  if (overrides) {
    Fields o(f.file(), *overrides, "");
    std::vector<std::string> citable = kNumericFields;
    citable.push_back("peaks");
    for (const auto& [k, v] : d.peaks) citable.push_back("peaks." + k);
    for (const auto& [k, node] : *overrides) {
      const std::string key(k.str());
      const std::string head = fmt::format("{}: device '{}': cite_fields", where(f.file(), node), d.id);
      if (!contains(citable, key)) {
        return fail(fmt::format("{}: unknown field '{}' {}", head, key, known(citable)));
      }
      if (!node.is_string()) return fail(fmt::format("{}: '{}' must name a source (a string)", head, key));
      const std::string source = node.as_string()->get();
      if (!reg.sources.count(source)) {
        return fail(fmt::format("{}: '{}': unknown source '{}' {}", head, key, source, known(source_keys(reg))));
      }
      by_field[key] = source;
    }
  }

  auto resolve = [&](const std::string& field, const std::string& group,
                     const toml::node* node) -> Expected<void> {
    if (auto it = by_field.find(field); it != by_field.end()) {
      d.cites[field] = it->second;
    } else if (auto g = by_field.find(group); !group.empty() && g != by_field.end()) {
      d.cites[field] = g->second;
    } else if (cite) {
      d.cites[field] = *cite;
    } else {
      const std::string at = node ? where(f.file(), *node) : where(f.file(), t);
      return fail(fmt::format("{}: device '{}': '{}' has no source (set 'cite' or cite_fields.{})", at, d.id,
                              field, field));
    }
    return {};
  };
  for (const std::string& field : kNumericFields) MET_CHECK(resolve(field, "", t.get(field)));
  const toml::table* peaks = t.get("peaks") ? t.get("peaks")->as_table() : nullptr;
  for (const auto& [k, v] : d.peaks) {
    MET_CHECK(resolve("peaks." + k, "peaks", peaks ? peaks->get(k) : nullptr));
  }
  return {};
}

Expected<Device> parse_device(const std::string& file, const toml::table& t, const Registry& reg) {
  const std::string hint = t["id"].value<std::string>().value_or("");
  const std::string what = hint.empty() ? "device" : fmt::format("device '{}'", hint);
  Fields f(file, t, what);
  Device d;
  d.location = where(file, t);

  MET_TRY(d.id, f.str("id"));
  if (!valid_id(d.id)) return f.error_at("id", "must be lower-case letters, digits and '-'");
  MET_TRY(d.name, f.str("name"));
  if (d.name.empty()) return f.error_at("name", "must not be empty");
  MET_TRY(d.vendor, f.str("vendor"));
  if (!contains(kVendors, d.vendor)) {
    return f.error_at("vendor", fmt::format("unknown vendor '{}' {}", d.vendor, known(kVendors)));
  }
  MET_TRY(d.arch, f.str("arch"));
  if (d.arch.empty()) return f.error_at("arch", "must not be empty");
  MET_TRY(d.klass, f.str("class"));
  if (!valid_id(d.klass)) return f.error_at("class", "must be lower-case letters, digits and '-'");
  MET_TRY(d.aliases, f.str_list("aliases"));
  if (const toml::node* a = t.get("aliases")) d.aliases_location = where(file, *a);
  for (const std::string& alias : d.aliases) {
    if (!valid_id(alias)) return f.error_at("aliases", fmt::format("alias '{}' must be lower-case letters, digits and '-'", alias));
  }

  MET_TRY(std::int64_t units, f.integer("units"));
  if (units <= 0) return f.error_at("units", fmt::format("must be positive, found {}", units));
  d.units = static_cast<int>(units);
  MET_TRY(d.boost_clock_mhz, positive(f, "boost_clock_mhz"));
  MET_TRY(d.memory_type, f.str("memory_type"));
  if (d.memory_type.empty()) return f.error_at("memory_type", "must not be empty");
  MET_TRY(d.memory_gb, positive(f, "memory_gb"));
  MET_TRY(d.visible_gib, positive(f, "visible_gib"));
  if (d.visible_gib * kBytesPerGiB > d.memory_gb * 1e9 * kVisibleSlack) {
    return f.error_at("visible_gib", fmt::format("{} GiB is more than the datasheet's {} GB allows", d.visible_gib,
                                                 d.memory_gb));
  }
  MET_TRY(d.bandwidth_gbs, positive(f, "bandwidth_gbs"));
  MET_TRY(d.l2_mib, positive(f, "l2_mib"));
  MET_TRY(d.smem_per_unit_kib, positive(f, "smem_per_unit_kib"));
  MET_TRY(d.tdp_w, positive(f, "tdp_w"));
  MET_TRY(d.usable_fraction, f.number("usable_fraction"));
  if (!(d.usable_fraction > 0 && d.usable_fraction <= 1)) {
    return f.error_at("usable_fraction", fmt::format("must be in (0, 1], found {}", d.usable_fraction));
  }
  MET_TRY(d.usable_reason, f.str("usable_reason"));
  if (d.usable_reason.empty()) return f.error_at("usable_reason", "must say why the fraction is what it is");

  MET_TRY(std::vector<std::string> instructions, f.str_list("instructions"));
  if (!f.has("instructions")) return f.error("missing key 'instructions'");
  for (const std::string& kind : instructions) {
    if (!contains(instruction_kinds(), kind)) {
      return f.error_at("instructions",
                        fmt::format("unknown instruction kind '{}' {}", kind, known(instruction_kinds())));
    }
    if (!d.instructions.insert(kind).second) {
      return f.error_at("instructions", fmt::format("instruction kind '{}' listed twice", kind));
    }
  }

  MET_TRY(const toml::table* ic, f.table("interconnect"));
  if (!ic) return f.error("missing key 'interconnect'");
  MET_TRY(d.interconnect, parse_interconnect(file, *ic, what, d.vendor));

  MET_TRY(const toml::table* peaks, f.table("peaks"));
  if (!peaks) return f.error("missing table 'peaks'");
  MET_TRY(d.peaks, parse_peaks(file, *peaks, what));

  MET_TRY(const toml::table* measured, f.table("measured"));
  if (measured) { MET_TRY(d.measured, parse_measured(file, *measured, what, reg)); }

  MET_CHECK(resolve_cites(f, t, reg, d));
  MET_CHECK(f.done());
  return d;
}

}  // namespace

const std::vector<std::string>& instruction_kinds() {
  static const std::vector<std::string> kinds = {"mma_sync", "cp_async", "wgmma", "tma",      "fp8_mma",
                                                 "tcgen05",  "fp4_mma",  "mfma",  "mfma_fp8", "mfma_fp4",
                                                 "avx2",     "avx512"};
  return kinds;
}

const std::vector<std::string>& peak_keys() {
  static const std::vector<std::string> keys = {"fp64", "fp32", "tf32", "bf16", "f16", "fp8", "fp4", "int8"};
  return keys;
}

const Device* Registry::find(const std::string& id) const {
  auto it = std::lower_bound(devices.begin(), devices.end(), id,
                             [](const Device& d, const std::string& key) { return d.id < key; });
  return it != devices.end() && it->id == id ? &*it : nullptr;
}

const Device* Registry::resolve(const std::string& name) const {
  std::string key = name;
  std::transform(key.begin(), key.end(), key.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  if (const Device* d = find(key)) return d;
  for (const Device& d : devices) {
    if (contains(d.aliases, key)) return &d;
  }
  return nullptr;
}

std::vector<std::string> Registry::names() const {
  std::vector<std::string> out;
  for (const Device& d : devices) {
    out.push_back(d.id);
    out.insert(out.end(), d.aliases.begin(), d.aliases.end());
  }
  std::sort(out.begin(), out.end());
  return out;
}

std::vector<std::string> Registry::ids() const {
  std::vector<std::string> out;
  for (const Device& d : devices) out.push_back(d.id);
  return out;
}

Expected<Registry> load_registry(const KernelTree& tree, const std::string& path) {
  MET_TRY(TomlDoc doc, parse_toml(tree, path));
  const std::string& file = doc.file;
  Fields top(file, doc.root, "");
  Registry reg;

  MET_TRY(std::int64_t schema, top.integer("schema"));
  if (schema != kSchema) return top.error_at("schema", fmt::format("unsupported schema {} (known: {})", schema, kSchema));

  MET_TRY(const toml::table* sources, top.table("source"));
  if (!sources) return top.error("missing table 'source' (every number cites one)");
  MET_CHECK(parse_sources(file, *sources, reg));

  MET_TRY(const toml::table* guards, top.table("guard"));
  if (!guards) return top.error("missing table 'guard'");
  MET_CHECK(parse_guards(file, *guards, reg));

  MET_TRY(const toml::array* devices, top.array("device"));
  if (!devices || devices->empty()) return top.error("no [[device]] entries");
  std::map<std::string, std::string> first_at;  // id -> location
  for (const toml::node& node : *devices) {
    if (!node.is_table()) return fail(fmt::format("{}: device: expected a table ([[device]])", where(file, node)));
    MET_TRY(Device d, parse_device(file, *node.as_table(), reg));
    if (auto [it, fresh] = first_at.emplace(d.id, d.location); !fresh) {
      return fail(fmt::format("{}: device '{}': duplicate id (first at {})", d.location, d.id, it->second));
    }
    reg.devices.push_back(std::move(d));
  }
  MET_CHECK(top.done());
  // A name resolves to one device: aliases may not repeat an id or another alias, in any device.
  std::map<std::string, std::string> owner;  // name -> "device 'x' (location)"
  for (const Device& d : reg.devices) owner.emplace(d.id, fmt::format("the id of device '{}' ({})", d.id, d.location));
  for (const Device& d : reg.devices) {
    for (const std::string& alias : d.aliases) {
      if (auto [it, fresh] = owner.emplace(alias, fmt::format("an alias of device '{}' ({})", d.id, d.aliases_location)); !fresh) {
        return fail(fmt::format("{}: device '{}': alias '{}' is already {}", d.aliases_location, d.id, alias, it->second));
      }
    }
  }

  std::sort(reg.devices.begin(), reg.devices.end(), [](const Device& a, const Device& b) { return a.id < b.id; });
  return reg;
}

}  // namespace met::device
