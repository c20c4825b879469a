// Checkpoint sources inside the model layer: TreeCheckpoint (an instance's config directory in the
// kernel tree) and MemCheckpoint (bytes in memory: tests, fuzzing). DiskCheckpoint lives in
// tree/checkpoint_dir.hpp because only the tree layer may touch the disk.
#pragma once

#include <map>
#include <string>

#include "tree/checkpoint_dir.hpp"
#include "tree/kernel_tree.hpp"

namespace met::model {

using met::CheckpointSource;

class TreeCheckpoint final : public CheckpointSource {
 public:
  // dir: relative to the tree root ("circuits/configs/meta-llama--Llama-3.1-8B-Instruct").
  TreeCheckpoint(const KernelTree& tree, std::string dir);
  std::string name() const override;
  bool exists(const std::string& file) const override;
  Expected<std::string> read(const std::string& file) const override;
  Expected<std::string> read_prefix(const std::string& file, std::uint64_t n) const override;
  Expected<std::uint64_t> size(const std::string& file) const override;
  std::string display(const std::string& file) const override;

 private:
  const KernelTree& tree_;
  std::string dir_;
};

class MemCheckpoint final : public CheckpointSource {
 public:
  MemCheckpoint(std::string name, std::map<std::string, std::string> files, std::string prefix = "checkpoints/");
  std::string name() const override { return name_; }
  bool exists(const std::string& file) const override { return files_.count(file) != 0; }
  Expected<std::string> read(const std::string& file) const override;
  Expected<std::string> read_prefix(const std::string& file, std::uint64_t n) const override;
  Expected<std::uint64_t> size(const std::string& file) const override;
  std::string display(const std::string& file) const override { return prefix_ + name_ + "/" + file; }
  std::map<std::string, std::string>& files() { return files_; }

 private:
  std::string name_;
  std::map<std::string, std::string> files_;
  std::string prefix_;
};

}  // namespace met::model
