// The NCCL loader (src/interp/nccl.cpp) without a GPU: what it says when the library is missing or
// is not NCCL, the version it refuses, and NVLink multicast forced off when a library does open.
#include <doctest/doctest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "interp/nccl.hpp"

namespace met {

using interp::nccl::check_version;
using interp::nccl::open_library;

namespace {
bool has(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }
}  // namespace

TEST_CASE(
    "a missing NCCL library is refused naming the file, where the loader looked and MET_NCCL_LIBRARY (a loader that "
    "reports success, or an error without the path, fails)") {
  const auto by_path = open_library("/nonexistent/met-test/libnccl.so.2");
  REQUIRE_FALSE(by_path.ok());
  const std::string& m = by_path.error().message;
  CAPTURE(m);
  if (!interp::nccl::built_with_headers()) {
    // Without the headers no library is opened at all; the message says what to rebuild with.
    CHECK(has(m, "nccl: this met was built without the NCCL headers (nccl.h and nccl_device.h, looked for in "));
    CHECK(has(m, "--backend cpu"));
    MESSAGE("built without the NCCL headers: the missing-library message itself is not reached in this build");
    return;
  }
  CHECK(has(m, "nccl: cannot open /nonexistent/met-test/libnccl.so.2: "));
  CHECK(has(m, "install NCCL 2.28 or newer, or name the library in MET_NCCL_LIBRARY"));
  const auto by_name = open_library("libmet-test-no-such-nccl.so.2");
  REQUIRE_FALSE(by_name.ok());
  CHECK(has(by_name.error().message,
            "nccl: cannot open libmet-test-no-such-nccl.so.2 (searched the loader's path: LD_LIBRARY_PATH"));
}

TEST_CASE("a library that is not NCCL is refused naming the first entry point it lacks (a loader that trusts any file fails)") {
  if (!interp::nccl::built_with_headers()) {
    MESSAGE("built without the NCCL headers: the loader refuses before opening any library");
    return;
  }
  const auto libm = open_library("libm.so.6");
  REQUIRE_FALSE(libm.ok());
  CHECK(libm.error().message == "nccl: libm.so.6 lacks ncclGetVersion (NCCL older than 2.28.0?)");
  // A file that is not a shared object at all.
  const auto text = std::filesystem::temp_directory_path() / "met-test-not-a-library.so";
  std::ofstream(text) << "not an ELF file\n";
  const auto bad = open_library(text.string());
  REQUIRE_FALSE(bad.ok());
  CHECK(has(bad.error().message, "nccl: cannot open " + text.string() + ": "));
  std::filesystem::remove(text);
}

TEST_CASE(
    "an NCCL older than 2.28 (no device API) or of another major.minor than the headers met was built with is refused "
    "(a check that lets 2.27 or a mismatched layout through fails)") {
  CHECK(interp::nccl::version_string(22809) == "2.28.9");
  const auto old = check_version(22709, 22809, "/x/libnccl.so.2");
  REQUIRE_FALSE(old.ok());
  CHECK(old.error().message ==
        "nccl: /x/libnccl.so.2 is NCCL 2.27.9; tensor parallelism on cuda needs 2.28.0 or newer (the device API: "
        "ncclDevCommCreate, LSA barriers, symmetric windows)");
  const auto newer = check_version(22903, 22809, "libnccl.so.2");
  REQUIRE_FALSE(newer.ok());
  CHECK(newer.error().message ==
        "nccl: libnccl.so.2 is NCCL 2.29.3 but met was built with the headers of 2.28.9 (the device communicator's layout is "
        "theirs): point MET_NCCL_LIBRARY at an NCCL 2.28.x library, or rebuild met against this one's headers");
  CHECK(check_version(22809, 22809, "libnccl.so.2").ok());
  CHECK(check_version(22800, 22809, "libnccl.so.2").ok());  // patch releases keep the layout
  CHECK(check_version(22819, 22803, "libnccl.so.2").ok());
}

TEST_CASE(
    "opening an NCCL library forces NCCL_NVLS_ENABLE=0 whatever the environment said (a loader that leaves NVLink "
    "multicast to the environment fails)") {
  if (!interp::nccl::built_with_headers()) {
    MESSAGE("built without the NCCL headers: no library is opened, so nothing is set");
    return;
  }
  setenv("NCCL_NVLS_ENABLE", "1", /*overwrite=*/1);
  const auto api = open_library(interp::nccl::kDefaultLibrary);
  if (!api.ok()) {
    // CI has no NCCL: the refusal must still name the library; the positive path is reported as not run.
    CHECK(has(api.error().message, std::string("nccl: ") + "cannot open libnccl.so.2"));
    MESSAGE("no libnccl.so.2 on this machine: NCCL_NVLS_ENABLE forcing not exercised (" << api.error().message << ")");
    return;
  }
  CHECK((*api)->version >= interp::nccl::kMinVersion);
  CHECK((*api)->path == "libnccl.so.2");
  const char* nvls = std::getenv("NCCL_NVLS_ENABLE");
  REQUIRE(nvls != nullptr);
  CHECK(std::string(nvls) == "0");
}

}  // namespace met
