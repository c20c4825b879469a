#include "cli/version.hpp"

#include <fmt/format.h>

#include "core/strings.hpp"
#include "emit/packet.hpp"
#include "emit/packet_abi.h"
#include "interp/cuda_backend.hpp"

namespace met::cli {

std::vector<std::string> gpu_interpreters() {
  std::vector<std::string> out;
  if (interp::hopper_interp_image().size > 0) out.push_back("hopper sm_90a");
  return out;
}

std::string version_text() {
  const auto gpus = gpu_interpreters();
  return fmt::format("met {}\ncommit: {}\npacket abi: version {}, hash {}\ngpu interpreters: {}\n", build_version(),
                     build_commit(), MET_PACKET_VERSION, emit::abi_hash(), gpus.empty() ? "none" : join(gpus, ", "));
}

}  // namespace met::cli
