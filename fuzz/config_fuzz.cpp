// Fuzzes config.json (and, after a NUL byte, hf_quant_config.json) through circuit choice,
// parameter evaluation, scheduling and declared formats, against every circuit of the kernel tree.
// Any input may be refused; none may crash, hang or leak.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "model/instantiate.hpp"
#include "tree/disk_tree.hpp"

namespace {
const std::map<std::string, met::model::Circuit>& circuits() {
  static const auto all = [] {
    met::DiskTree tree(std::string(MET_SOURCE_DIR) + "/kernels", "kernels/");
    auto c = met::model::load_circuits(tree);
    if (!c) {
      std::fprintf(stderr, "%s\n", c.error().message.c_str());
      std::abort();
    }
    return *c;
  }();
  return all;
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string bytes(reinterpret_cast<const char*>(data), size);
  std::map<std::string, std::string> files;
  const auto nul = bytes.find('\0');
  files["config.json"] = bytes.substr(0, nul);
  if (nul != std::string::npos) files["hf_quant_config.json"] = bytes.substr(nul + 1);
  met::model::MemCheckpoint src("fuzz", std::move(files));
  met::MemTree empty;
  auto g = met::model::instantiate_checkpoint(empty, circuits(), src);
  (void)g;
  return 0;
}
