// TreeCheckpoint and MemCheckpoint: byte access only; parsing lives in config/safetensors/quant.
#include "model/checkpoint.hpp"

#include <fmt/format.h>

namespace met::model {

TreeCheckpoint::TreeCheckpoint(const KernelTree& tree, std::string dir) : tree_(tree), dir_(std::move(dir)) {
  while (!dir_.empty() && dir_.back() == '/') dir_.pop_back();
}

std::string TreeCheckpoint::name() const {
  const auto slash = dir_.rfind('/');
  return slash == std::string::npos ? dir_ : dir_.substr(slash + 1);
}

bool TreeCheckpoint::exists(const std::string& file) const { return tree_.exists(dir_ + "/" + file); }
Expected<std::string> TreeCheckpoint::read(const std::string& file) const { return tree_.read(dir_ + "/" + file); }
std::string TreeCheckpoint::display(const std::string& file) const { return tree_.display(dir_ + "/" + file); }

Expected<std::string> TreeCheckpoint::read_prefix(const std::string& file, std::uint64_t n) const {
  MET_TRY(std::string all, read(file));
  if (all.size() > n) all.resize(static_cast<std::size_t>(n));
  return all;
}

Expected<std::uint64_t> TreeCheckpoint::size(const std::string& file) const {
  MET_TRY(std::string all, read(file));
  return static_cast<std::uint64_t>(all.size());
}

MemCheckpoint::MemCheckpoint(std::string name, std::map<std::string, std::string> files, std::string prefix)
    : name_(std::move(name)), files_(std::move(files)), prefix_(std::move(prefix)) {}

Expected<std::string> MemCheckpoint::read(const std::string& file) const {
  auto it = files_.find(file);
  if (it == files_.end()) return fail(display(file) + ": no such file");
  return it->second;
}

Expected<std::string> MemCheckpoint::read_prefix(const std::string& file, std::uint64_t n) const {
  MET_TRY(std::string all, read(file));
  if (all.size() > n) all.resize(static_cast<std::size_t>(n));
  return all;
}

Expected<std::uint64_t> MemCheckpoint::size(const std::string& file) const {
  auto it = files_.find(file);
  if (it == files_.end()) return fail(display(file) + ": no such file");
  return static_cast<std::uint64_t>(it->second.size());
}

}  // namespace met::model
