// The kernel tree compiled into the binary (generated at build time from kernels/), so `met`
// plans with no checkout beside it; `--kernels DIR` reads a tree from disk instead.
#pragma once

#include <map>
#include <string>

namespace met::cli {

std::map<std::string, std::string> embedded_kernel_files();

}  // namespace met::cli
