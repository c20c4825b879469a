// The identity of this build: version, git commit, packet ABI and the GPU interpreters compiled
// in. `met --version` prints it and emit records the same values in build.json, so a bug report
// and an assets directory name the same build (tests/cli/version.sh checks that they agree).
#pragma once

#include <string>
#include <vector>

namespace met::cli {

// From cmake/build_id.cmake, regenerated at every build.
const char* build_version();  // "0.1.0"
const char* build_commit();   // 40 hex digits, "-dirty" when tracked files differ from it; "unknown" without git

// The GPU interpreters embedded in this binary, as "<class> <arch>" ("hopper sm_90a"); empty
// when met was built without nvcc (the cpu interpreter is always there).
std::vector<std::string> gpu_interpreters();

// The text of `met --version`, one field a line.
std::string version_text();

}  // namespace met::cli
