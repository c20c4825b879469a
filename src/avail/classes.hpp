// Kernel classes: every kernels/<class>/HARDWARE.toml as a value, and a class resolved with its
// ancestors (root first) into the sources it compiles and the defines it builds with.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "avail/guards.hpp"
#include "core/expected.hpp"
#include "tree/kernel_tree.hpp"

namespace met::avail {

struct Defaults {
  std::string activation = "bf16";
  std::string kv = "bf16";
  std::vector<int> decode_rungs;     // ascending, > 0
  std::vector<int> prefill_buckets;  // ascending, > 0
  double runtime_reserve_gib = 0;
  double workspace_mib = 0;
  // Whether the class's attention bodies read a sliding-window layer's KV cache as a ring
  // (model/kv_ring.hpp; kernels/common/ops.def `ring`): the emit makes rings, and the memory fit
  // counts them, only where it is true.
  bool kv_ring = false;
  // The KV cache formats the class's attention and cache-writing bodies read and write (format
  // names; default bf16 alone). A graph whose KV format is not here plans those nodes as gaps.
  std::vector<std::string> kv_formats = {"bf16"};
};

struct ClassInfo {
  std::string id;        // directory name: "hopper"
  std::string arch;      // "sm_90a", "gfx942", "host"; "abstract" for a shared base
  std::string vendor;    // nvidia | amd | host ("" allowed only for an abstract class)
  std::string language;  // cuda | hip | cpp
  std::optional<std::string> inherits;
  std::vector<std::string> sources;  // tree paths this class adds: "hopper/gemm_wgmma.cuh"
  Macros defines;
  std::string tc_policy = "none";    // required | preferred | none
  int tc_min_rows = 0;
  Defaults defaults;
  // Measured time an interpreter step spends per fused-plan group beyond the groups' own work
  // (dependency gaps between packets), with the campaign it came from. Applies to this class
  // only: a child class never inherits it (its interpreter is another program).
  std::optional<double> packet_overhead_us;
  std::string packet_overhead_evidence;
  // Output tile of the class's interpreter GEMM body, rows x columns (a gated GEMM's columns are
  // its activation's, each reading a gate and an up row): the prediction of a gemm group divides
  // its compute by the share of the SMs the tiles keep busy. Not inherited, like the overhead.
  std::optional<std::pair<std::int64_t, std::int64_t>> gemm_tile;
  // The GEMM body's split K (most parts, fewest K values per part): a GEMM whose tiles leave SMs
  // idle runs its K in parts (estimate::gemm_k_parts). Not inherited.
  std::optional<std::pair<std::int64_t, std::int64_t>> gemm_k_split;
  // The grouped expert body's block (kernels/common/moe_mma.cuh): routed slots of one expert x
  // weight rows. A prefill's routed experts run in blocks of that many of one expert's slots per
  // row part, each block reading the expert's weights of its columns (estimate::moe_blocks). Not
  // inherited.
  std::optional<std::pair<std::int64_t, std::int64_t>> moe_gemm_block;
  // Whether that body sorts every slot of the step by expert first (moe_group): one row part, each
  // expert's slots in whole blocks but the last. Not inherited.
  bool moe_gemm_sorted = false;
  std::string location;              // "kernels/hopper/HARDWARE.toml"
};

// Loads <dir>/HARDWARE.toml for every top-level dir that has one. Validates the schema (unknown
// keys, types), class id == directory, language, policy, formats, that sources exist, that
// inherits names a loaded class, and that inheritance has no cycle.
Expected<std::map<std::string, ClassInfo>> load_classes(const KernelTree& tree);
// One HARDWARE.toml (no cross-class checks).
Expected<ClassInfo> load_class(const KernelTree& tree, const std::string& path);

struct ClassChain {
  std::vector<const ClassInfo*> chain;  // root first; points into the map given to resolve_chain
  std::vector<std::string> sources;     // inherited first, de-duplicated
  Macros defines;                       // merged, child overrides

  const ClassInfo& leaf() const { return *chain.back(); }
  std::vector<std::string> ids() const;  // root first
};

// Errors: unknown class (lists the known ones), an inherits naming no class, a cycle (listed).
Expected<ClassChain> resolve_chain(const std::map<std::string, ClassInfo>& classes, const std::string& id);

}  // namespace met::avail
