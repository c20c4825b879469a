// The opcode harness (`met circuit optest`): every distinct instruction of an emit's programs runs
// on its own on the backend under test and on the reference (the cpu bodies), from the same fresh
// random inputs, and the bytes each writes are compared. Cases are named by their parameters
// (opcode, program, instruction, rows, slices, ints), and --filter re-runs any of them alone.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/expected.hpp"
#include "interp/assets.hpp"
#include "interp/backend.hpp"

namespace met::interp {

struct OptestOptions {
  std::string filter;                  // run the cases whose name contains this
  std::vector<std::string> programs;   // program names; empty: every program
  std::uint64_t seed = 1;
  double tolerance = 1e-2;             // relative L2 error over the elements either side wrote
};

struct OptestCase {
  std::string name;
  bool pass = false;
  double rel_err = 0, max_abs = 0;
  std::uint64_t elements = 0;  // compared (written by either side)
  std::string detail;
  // Not run: a collective of a tensor-parallel emit meets its peers' slices, so it cannot run
  // alone on one rank (`met circuit run` checks it, against --backend cpu).
  bool skipped = false;
};

Expected<std::vector<OptestCase>> run_optest(Backend& test, Backend& reference, const Assets& assets,
                                             const OptestOptions& options);

}  // namespace met::interp
