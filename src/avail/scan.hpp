// Entry points of one kernel source: the `extern "C" [__global__] void met_<name>(` definitions and
// the preprocessor conditions around each, evaluated under a macro map. Declarations (a prototype
// ending in ';') are not entry points; a name defined twice in compiled code is an error.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "avail/guards.hpp"
#include "core/expected.hpp"

namespace met::avail {

struct EntryPoint {
  std::string name;       // "met_gemm_bf16_wgmma"
  std::string file;       // as passed to scan_entry_points (the tree's display name)
  int line = 0;
  bool global = false;    // `__global__` (CUDA/HIP kernel); false for a cpu entry point
  bool defined = false;   // every enclosing condition holds
  std::string condition;  // conjunction of the enclosing conditions, "" = unconditional
  std::string failed;     // the outermost condition that is false; "" when defined
  int failed_line = 0;    // line of the directive that opened the failed branch
  Macros env;             // values of the identifiers of `condition` where they were evaluated
};

// Entry points in line order (also those compiled out, with defined = false).
Expected<std::vector<EntryPoint>> scan_entry_points(std::string_view text, const std::string& file, const Macros& macros);

}  // namespace met::avail
