// The backends by name, for every command that runs assets (run, optest, campaigns, serve):
//   cpu         the emit's own class on the cpu bodies (host-cpu assets);
//   cuda        the hopper interpreter on an NVIDIA GPU (h100-sxm / h200-sxm assets);
//   cpu-oracle  any class's packets on the cpu bodies, one worker per stream (what cuda is checked
//               against).
// An unknown name is refused with the list of known ones.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/expected.hpp"
#include "interp/assets.hpp"
#include "interp/backend.hpp"

namespace met::interp {

struct BackendOptions {
  std::uint32_t threads = 0;  // cpu, cpu-oracle: worker threads (0: the emit's; cpu refuses any other count)
  bool fetch_logits = true;   // cuda: copy the logits back after every run (tokens always come back)
  // cuda, a tensor-parallel emit: load rank 0's packet alone on GPU 0, without NCCL or collectives
  // (optest: it runs each instruction alone and skips the collectives; a step would not run)
  bool first_rank_only = false;
};

// The known names, in the order errors list them.
const std::vector<std::string>& backend_names();

// Refuses a name that is not a known backend: "--backend 'tpu': expected cpu, cuda or cpu-oracle".
Expected<void> check_backend_name(const std::string& name);

Expected<std::unique_ptr<Backend>> make_backend(const std::string& name, const Assets& assets,
                                                const BackendOptions& options = {});

}  // namespace met::interp
