// DiskCheckpoint: plain file reads below one directory. "Small files" are capped (kMaxSmallFile)
// so a weight shard passed to read() by mistake is refused instead of loaded.
#include "tree/checkpoint_dir.hpp"

#include <fmt/format.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <limits>

namespace met {
namespace {
constexpr std::uint64_t kMaxSmallFile = std::uint64_t{256} << 20;  // config/index json: far below this
}

CheckpointSource::~CheckpointSource() = default;

Expected<std::string> CheckpointSource::read_range(const std::string& file, std::uint64_t offset, std::uint64_t n) const {
  if (offset > std::numeric_limits<std::uint64_t>::max() - n) return fail(fmt::format("{}: range of {} bytes at {} overflows", display(file), n, offset));
  MET_TRY(std::string head, read_prefix(file, offset + n));
  if (head.size() < offset + n) {
    return fail(fmt::format("{}: {} bytes at {} asked for, the file ends at {}", display(file), n, offset, head.size()));
  }
  return head.substr(static_cast<std::size_t>(offset), static_cast<std::size_t>(n));
}

DiskCheckpoint::DiskCheckpoint(std::string dir) : dir_(std::move(dir)) {
  while (dir_.size() > 1 && dir_.back() == '/') dir_.pop_back();
}

std::string DiskCheckpoint::name() const {
  return std::filesystem::path(dir_).filename().string();
}

bool DiskCheckpoint::exists(const std::string& file) const {
  std::error_code ec;
  return std::filesystem::is_regular_file(std::filesystem::path(dir_) / file, ec);
}

std::string DiskCheckpoint::display(const std::string& file) const { return dir_ + "/" + file; }

Expected<std::uint64_t> DiskCheckpoint::size(const std::string& file) const {
  std::error_code ec;
  const auto n = std::filesystem::file_size(std::filesystem::path(dir_) / file, ec);
  if (ec) return fail(fmt::format("{}: {}", display(file), ec.message()));
  return static_cast<std::uint64_t>(n);
}

Expected<std::string> DiskCheckpoint::read_prefix(const std::string& file, std::uint64_t n) const {
  MET_TRY(std::uint64_t total, size(file));
  const std::uint64_t want = std::min(n, total);
  std::ifstream in(std::filesystem::path(dir_) / file, std::ios::binary);
  if (!in) return fail(fmt::format("{}: cannot open", display(file)));
  std::string out(static_cast<std::size_t>(want), '\0');
  in.read(out.data(), static_cast<std::streamsize>(want));
  if (static_cast<std::uint64_t>(in.gcount()) != want) return fail(fmt::format("{}: short read", display(file)));
  return out;
}

Expected<std::string> DiskCheckpoint::read(const std::string& file) const {
  MET_TRY(std::uint64_t total, size(file));
  if (total > kMaxSmallFile) {
    return fail(fmt::format("{}: {} bytes is too large for a metadata file", display(file), total));
  }
  return read_prefix(file, total);
}

Expected<std::string> DiskCheckpoint::read_range(const std::string& file, std::uint64_t offset, std::uint64_t n) const {
  MET_TRY(std::uint64_t total, size(file));
  if (offset > total || n > total - offset) {
    return fail(fmt::format("{}: {} bytes at {} asked for, the file has {}", display(file), n, offset, total));
  }
  std::ifstream in(std::filesystem::path(dir_) / file, std::ios::binary);
  if (!in) return fail(fmt::format("{}: cannot open", display(file)));
  in.seekg(static_cast<std::streamoff>(offset));
  std::string out(static_cast<std::size_t>(n), '\0');
  in.read(out.data(), static_cast<std::streamsize>(n));
  if (!in || static_cast<std::uint64_t>(in.gcount()) != n) return fail(fmt::format("{}: short read at {}", display(file), offset));
  return out;
}

}  // namespace met
