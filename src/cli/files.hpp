// Disk side of the CLI: atomic writes (a temporary file renamed into place, so an interrupted or
// failed run leaves no half-written output) and reading a directory of generated files.
#pragma once

#include <map>
#include <string>

#include "core/expected.hpp"

namespace met::cli {

Expected<void> write_atomic(const std::string& path, const std::string& bytes);
// Regular files directly in dir, by name.
Expected<std::map<std::string, std::string>> read_dir(const std::string& dir);
// Writes every file into dir (created if needed) and removes files there that are no longer
// produced; each file is written atomically.
Expected<void> write_dir(const std::string& dir, const std::map<std::string, std::string>& files);

}  // namespace met::cli
