#include "cli/files.hpp"

#include <fmt/format.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "tree/disk_tree.hpp"

namespace met::cli {

namespace fs = std::filesystem;

Expected<void> write_atomic(const std::string& path, const std::string& bytes) {
  const fs::path target(path);
  std::error_code ec;
  if (target.has_parent_path() && !fs::is_directory(target.parent_path(), ec)) {
    return fail(fmt::format("{}: directory '{}' does not exist", path, target.parent_path().string()));
  }
  const std::string tmp = fmt::format("{}.tmp.{}", path, ::getpid());
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out) return fail(fmt::format("{}: cannot write: {}", path, std::strerror(errno)));
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    out.flush();
    if (!out) {
      fs::remove(tmp, ec);
      return fail(fmt::format("{}: write failed", path));
    }
  }
  fs::rename(tmp, target, ec);
  if (ec) {
    fs::remove(tmp, ec);
    return fail(fmt::format("{}: cannot rename into place: {}", path, ec.message()));
  }
  return {};
}

Expected<std::map<std::string, std::string>> read_dir(const std::string& dir) {
  std::map<std::string, std::string> files;
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return fail(fmt::format("{}: no such directory", dir));
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    if (!e.is_regular_file()) continue;
    MET_TRY(auto bytes, read_file(e.path().string()));
    files.emplace(e.path().filename().string(), std::move(bytes));
  }
  return files;
}

Expected<void> write_dir(const std::string& dir, const std::map<std::string, std::string>& files) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) return fail(fmt::format("{}: cannot create: {}", dir, ec.message()));
  for (const auto& [name, bytes] : files) MET_CHECK(write_atomic((fs::path(dir) / name).string(), bytes));
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    const std::string name = e.path().filename().string();
    if (e.is_regular_file() && !files.count(name) && (name.ends_with(".md") || name.ends_with(".json"))) fs::remove(e.path(), ec);
  }
  return {};
}

}  // namespace met::cli
