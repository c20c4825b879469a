// Registry: DEVICES.toml as values. A device is a SKU (datasheet or measured numbers, each with a
// cited source); its class names the compiled kernel tree it runs. The guard table maps source
// macros to instruction kinds and is what `avail` uses to evaluate kernel guards on a device.
#pragma once

#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "core/expected.hpp"
#include "tree/kernel_tree.hpp"

namespace met::device {

struct Source {
  std::string key;  // "nvidia-h200-datasheet"
  std::string title;
  std::string url;
};

struct Interconnect {
  std::string kind;  // "nvlink4", "xgmi", "pcie5", "none"
  double gbs = 0;    // GB/s per direction per device
};

// Figures measured on our own device of this SKU, beside the datasheet ones (`met circuit probe`
// measures them). The measured basis costs memory traffic at the read bandwidth.
struct Measured {
  std::optional<double> read_gbs;        // streaming read, GB/s
  std::optional<double> copy_gbs;        // device-to-device copy, bytes read + written, GB/s
  std::map<std::string, double> peaks;   // peak key -> TFLOP/s ("bf16" -> 790)
  std::string cite;                      // source key
};

struct Device {
  std::string id;       // "h200-sxm"
  std::string name;     // "NVIDIA H200 SXM 141GB"
  std::string vendor;   // nvidia | amd | host
  std::string arch;     // "sm_90a", "gfx942", "host"
  std::string klass;    // class id: "hopper"
  std::vector<std::string> aliases;  // other names users type: "h200", "h200-141gb" (unique registry-wide)
  int units = 0;        // SMs / CUs / cores
  double boost_clock_mhz = 0;
  std::string memory_type;
  double memory_gb = 0;      // datasheet, 1e9 bytes
  double visible_gib = 0;    // what the runtime reports, 2^30 bytes
  double bandwidth_gbs = 0;  // datasheet
  double l2_mib = 0;
  double smem_per_unit_kib = 0;
  double tdp_w = 0;
  double usable_fraction = 0;
  std::string usable_reason;
  std::set<std::string> instructions;     // instruction kinds
  Interconnect interconnect;
  std::map<std::string, double> peaks;    // peak key -> dense TFLOP/s
  std::optional<Measured> measured;
  std::map<std::string, std::string> cites;  // every numeric field name -> source key
  std::string location;                      // "kernels/DEVICES.toml:123" (for messages)
  std::string aliases_location;              // where `aliases` is written (for messages)
};

struct Registry {
  std::map<std::string, Source> sources;      // by key
  std::map<std::string, std::string> guards;  // macro -> instruction kind
  std::vector<Device> devices;                // sorted by id

  const Device* find(const std::string& id) const;
  // By id or alias, ASCII case-insensitive ("H200" -> h200-sxm); nullptr when neither matches.
  const Device* resolve(const std::string& name) const;
  std::vector<std::string> ids() const;       // sorted
  std::vector<std::string> names() const;     // ids and aliases, sorted (for suggestions, completions)
};

// The instruction kinds and peak keys the registry accepts (docs/arch/kernel-tree.md).
const std::vector<std::string>& instruction_kinds();
const std::vector<std::string>& peak_keys();

// Loads and validates DEVICES.toml: unknown keys, wrong types, unknown instruction kinds or peak
// keys, uncited numbers, cites of unknown sources, duplicate ids, and an alias that is not unique
// across ids and aliases of every device are located errors.
Expected<Registry> load_registry(const KernelTree& tree, const std::string& path = "DEVICES.toml");

}  // namespace met::device
