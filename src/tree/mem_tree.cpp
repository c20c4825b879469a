#include "tree/kernel_tree.hpp"

namespace met {

Expected<std::string> MemTree::read(const std::string& path) const {
  auto it = files_.find(path);
  if (it == files_.end()) return fail(display(path) + ": no such file");
  return it->second;
}

bool MemTree::exists(const std::string& path) const { return files_.count(path) != 0; }

std::vector<std::string> MemTree::list(const std::string& dir) const {
  std::vector<std::string> out;
  const std::string prefix = dir.empty() ? "" : (dir.back() == '/' ? dir : dir + "/");
  for (const auto& [path, bytes] : files_) {
    if (path.compare(0, prefix.size(), prefix) == 0) out.push_back(path);
  }
  return out;  // std::map iterates in bytewise order
}

MemTree snapshot(const KernelTree& tree) {
  std::map<std::string, std::string> files;
  for (const auto& path : tree.list("")) {
    auto bytes = tree.read(path);
    if (bytes) files.emplace(path, std::move(bytes).value());
  }
  return MemTree(std::move(files), tree.display(""));
}

}  // namespace met
