#include "tree/disk_tree.hpp"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>

namespace met {

namespace fs = std::filesystem;

DiskTree::DiskTree(std::string root, std::string display_prefix)
    : root_(std::move(root)), prefix_(std::move(display_prefix)) {}

Expected<std::string> read_file(const std::string& path) {
  std::error_code ec;
  if (!fs::is_regular_file(path, ec)) return fail(path + ": no such file");
  std::ifstream in(path, std::ios::binary);
  if (!in) return fail(path + ": cannot open");
  std::ostringstream ss;
  ss << in.rdbuf();
  if (in.bad()) return fail(path + ": read error");
  return ss.str();
}

Expected<std::string> DiskTree::read(const std::string& path) const {
  auto bytes = read_file((fs::path(root_) / path).string());
  if (!bytes) return fail(display(path) + ": no such file");
  return bytes;
}

bool DiskTree::exists(const std::string& path) const {
  std::error_code ec;
  return fs::is_regular_file(fs::path(root_) / path, ec);
}

std::vector<std::string> DiskTree::list(const std::string& dir) const {
  std::vector<std::string> out;
  std::error_code ec;
  const fs::path base = fs::path(root_) / dir;
  if (!fs::is_directory(base, ec)) return out;
  for (auto it = fs::recursive_directory_iterator(base, ec); it != fs::recursive_directory_iterator(); it.increment(ec)) {
    if (ec) break;
    if (it->is_regular_file(ec)) out.push_back(fs::relative(it->path(), root_, ec).generic_string());
  }
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace met
