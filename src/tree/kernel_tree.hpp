// KernelTree: the only door to the kernel tree. Planner layers read bytes through it and never
// touch the disk; DiskTree serves a directory, MemTree serves an in-memory map (tests, mutations).
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/expected.hpp"

namespace met {

class KernelTree {
 public:
  virtual ~KernelTree() = default;
  // Bytes of a file, by path relative to the tree root ("hopper/FUSIONS.toml").
  virtual Expected<std::string> read(const std::string& path) const = 0;
  virtual bool exists(const std::string& path) const = 0;
  // Relative paths of regular files below dir ("" = root), sorted bytewise.
  virtual std::vector<std::string> list(const std::string& dir) const = 0;
  // How errors name the tree's files: "kernels/" for the embedded tree.
  virtual std::string display(const std::string& path) const = 0;
};

// Files held in memory; tests build trees from these and mutate them.
class MemTree final : public KernelTree {
 public:
  explicit MemTree(std::map<std::string, std::string> files = {}, std::string prefix = "kernels/")
      : files_(std::move(files)), prefix_(std::move(prefix)) {}
  Expected<std::string> read(const std::string& path) const override;
  bool exists(const std::string& path) const override;
  std::vector<std::string> list(const std::string& dir) const override;
  std::string display(const std::string& path) const override { return prefix_ + path; }

  std::map<std::string, std::string>& files() { return files_; }
  const std::map<std::string, std::string>& files() const { return files_; }

 private:
  std::map<std::string, std::string> files_;
  std::string prefix_;
};

// Reads every file of a tree into a MemTree (the CLI loads the tree once; tests copy and mutate).
MemTree snapshot(const KernelTree& tree);

}  // namespace met
