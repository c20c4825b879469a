// The model layer is pure (docs/arch/overview.md, Purity): no file system, clock or environment access.
// Reads src/model/* and fails on any forbidden include or call.
#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

TEST_CASE("no file in src/model includes <fstream>, <filesystem>, <chrono> or calls getenv") {
  const std::filesystem::path dir = std::filesystem::path(MET_SOURCE_DIR) / "src" / "model";
  int files = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    const auto ext = entry.path().extension();
    if (ext != ".cpp" && ext != ".hpp") continue;
    ++files;
    std::ifstream in(entry.path());
    std::stringstream ss;
    ss << in.rdbuf();
    const std::string text = ss.str();
    for (const char* bad : {"<fstream>", "<filesystem>", "<chrono>", "getenv"}) {
      const std::string what = entry.path().string() + " uses " + bad;
      CHECK_MESSAGE(text.find(bad) == std::string::npos, what);
    }
  }
  CHECK(files > 10);
}
