// DiskTree: a KernelTree over a directory. Only the CLI and tests construct one.
#pragma once

#include <string>

#include "tree/kernel_tree.hpp"

namespace met {

class DiskTree final : public KernelTree {
 public:
  // display_prefix names the root in error messages ("kernels/").
  DiskTree(std::string root, std::string display_prefix);
  Expected<std::string> read(const std::string& path) const override;
  bool exists(const std::string& path) const override;
  std::vector<std::string> list(const std::string& dir) const override;
  std::string display(const std::string& path) const override { return prefix_ + path; }
  const std::string& root() const { return root_; }

 private:
  std::string root_;
  std::string prefix_;
};

// Reads a whole file from disk (checkpoint directories, --out targets); used by the CLI layer.
Expected<std::string> read_file(const std::string& path);

}  // namespace met
