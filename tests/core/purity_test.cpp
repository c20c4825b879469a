// The planning layers are pure (docs/arch/overview.md, Purity): every byte arrives through KernelTree or a
// CheckpointSource, so the same inputs give the same bytes out. This scans their sources.
#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace fs = std::filesystem;

namespace {

std::vector<std::string> violations(const std::string& layer) {
  static const std::vector<std::string> kForbidden = {"<fstream>", "<filesystem>", "<chrono>", "getenv", "<ctime>", "std::rand"};
  std::vector<std::string> out;
  for (const auto& e : fs::directory_iterator(fs::path(MET_SOURCE_DIR) / "src" / layer)) {
    const auto ext = e.path().extension().string();
    if (ext != ".cpp" && ext != ".hpp") continue;
    std::ifstream in(e.path());
    std::stringstream ss;
    ss << in.rdbuf();
    const std::string text = ss.str();
    for (const auto& bad : kForbidden) {
      if (text.find(bad) != std::string::npos) out.push_back(e.path().filename().string() + " uses " + bad);
    }
  }
  return out;
}

}  // namespace

TEST_CASE("planning layers never touch the disk, the environment or a clock (catches an fstream in the planner)") {
  for (const char* layer : {"device", "model", "avail", "planner", "estimate", "report"}) {
    CAPTURE(layer);
    const auto v = violations(layer);
    for (const auto& s : v) CAPTURE(s);
    CHECK(v.empty());
  }
}
