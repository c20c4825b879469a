// Entry-point scanning: which declarations count, the condition and failed guard recorded with
// each, and duplicate definitions.
#include <doctest/doctest.h>

#include "avail/scan.hpp"

using met::avail::EntryPoint;
using met::avail::Macros;
using met::avail::scan_entry_points;

namespace {

std::vector<EntryPoint> scan(const std::string& src, const Macros& m) {
  auto r = scan_entry_points(src, "kernels/hopper/gemm_wgmma.cuh", m);
  REQUIRE_MESSAGE(r.ok(), (r.ok() ? "" : r.error().message));
  return *r;
}

const char* const kHopper =
    "// gemm bodies\n"                                                             // 1
    "#pragma once\n"                                                               // 2
    "#include \"common/device.cuh\"\n"                                             // 3
    "#if MET_HAS_WGMMA && MET_HAS_TMA\n"                                           // 4
    "extern \"C\" __global__ void met_gemm_bf16_wgmma(const void* a,\n"            // 5
    "                                                 void* c) {\n"                // 6
    "}\n"                                                                          // 7
    "#elif MET_HAS_MMA_SYNC\n"                                                     // 8
    "extern \"C\" __global__ void __launch_bounds__(256) met_gemm_bf16_mma(int n) {}\n"  // 9
    "#endif\n"                                                                     // 10
    "#if MET_HAS_WGMMA\n"                                                          // 11
    "#if defined(MET_HAS_FP8_MMA)\n"                                               // 12
    "extern \"C\" __global__ void met_gemm_fp8_wgmma(int n)\n"                     // 13
    "{}\n"                                                                         // 14
    "#endif\n"                                                                     // 15
    "#endif\n"                                                                     // 16
    "extern \"C\" __global__ void met_embed(int n);\n"                             // 17 prototype
    "extern \"C\" __global__ void met_embed(int n) {}\n"                           // 18
    "extern \"C\" void met_host_launch(int n) {}\n"                                // 19 cpu form
    "extern \"C\" __device__ void met_helper(int n) {}\n"                          // 20 not an entry
    "static __global__ void met_static(int n) {}\n"                                // 21 not extern C
    "// extern \"C\" __global__ void met_commented(int n) {}\n"                    // 22
    "/* extern \"C\" __global__ void met_block_commented(int n) {} */\n";          // 23

}  // namespace

TEST_CASE("entry points are found with their file, line and kind; prototypes and look-alikes are not") {
  auto eps = scan(kHopper, {{"MET_HAS_WGMMA", 1}, {"MET_HAS_TMA", 1}, {"MET_HAS_FP8_MMA", 1}});
  REQUIRE(eps.size() == 5);
  CHECK(eps[0].name == "met_gemm_bf16_wgmma");
  CHECK(eps[0].file == "kernels/hopper/gemm_wgmma.cuh");
  CHECK(eps[0].line == 5);
  CHECK(eps[0].global);
  CHECK(eps[1].name == "met_gemm_bf16_mma");
  CHECK(eps[1].line == 9);
  CHECK(eps[2].name == "met_gemm_fp8_wgmma");
  CHECK(eps[3].name == "met_embed");
  CHECK(eps[3].line == 18);
  CHECK(eps[4].name == "met_host_launch");
  CHECK(!eps[4].global);
}

TEST_CASE("a kernel under a true guard is defined and records the condition") {
  auto eps = scan(kHopper, {{"MET_HAS_WGMMA", 1}, {"MET_HAS_TMA", 1}, {"MET_HAS_FP8_MMA", 1}});
  CHECK(eps[0].defined);
  CHECK(eps[0].condition == "MET_HAS_WGMMA && MET_HAS_TMA");
  CHECK(eps[0].failed.empty());
  CHECK(!eps[1].defined);  // the #elif branch after a taken #if
  CHECK(eps[1].condition == "!(MET_HAS_WGMMA && MET_HAS_TMA) && MET_HAS_MMA_SYNC");
  CHECK(eps[1].failed == eps[1].condition);
  CHECK(eps[1].failed_line == 8);
  CHECK(eps[2].defined);
  CHECK(eps[2].condition == "MET_HAS_WGMMA && defined(MET_HAS_FP8_MMA)");
  CHECK(eps[3].defined);
  CHECK(eps[3].condition.empty());
}

TEST_CASE("a guard false under the macros names the outermost false condition (catches inner-first reporting)") {
  auto eps = scan(kHopper, {{"MET_HAS_MMA_SYNC", 1}});
  CHECK(!eps[0].defined);
  CHECK(eps[0].failed == "MET_HAS_WGMMA && MET_HAS_TMA");
  CHECK(eps[0].failed_line == 4);
  CHECK(eps[1].defined);
  CHECK(!eps[2].defined);
  CHECK(eps[2].failed == "MET_HAS_WGMMA");
  CHECK(eps[2].failed_line == 11);
  CHECK(eps[2].condition == "MET_HAS_WGMMA && defined(MET_HAS_FP8_MMA)");
}

TEST_CASE("the values a guard saw are kept for re-evaluation") {
  auto eps = scan("#define MET_HAS_TMA 1\n#if MET_HAS_WGMMA && MET_HAS_TMA\nextern \"C\" __global__ void met_k() {}\n#endif\n",
                  {{"MET_HAS_WGMMA", 0}});
  REQUIRE(eps.size() == 1);
  CHECK(!eps[0].defined);
  CHECK(eps[0].env == Macros{{"MET_HAS_TMA", 1}, {"MET_HAS_WGMMA", 0}});
}

TEST_CASE("a name defined twice in compiled code is an error; in exclusive branches it is not") {
  auto ok = scan("#if A\nextern \"C\" void met_k() {}\n#else\nextern \"C\" void met_k() {}\n#endif\n", {});
  REQUIRE(ok.size() == 2);
  CHECK(!ok[0].defined);
  CHECK(ok[1].defined);
  auto dup = scan_entry_points("extern \"C\" void met_k() {}\n\nextern \"C\" void met_k() {}\n", "kernels/cpu/x.hpp", {});
  REQUIRE(!dup.ok());
  CHECK(dup.error().message == "kernels/cpu/x.hpp:3: 'met_k' is already defined at line 1");
}

TEST_CASE("a conditional error in a source fails the scan with its location") {
  auto r = scan_entry_points("#if MET_HAS_WGMMA\nextern \"C\" void met_k() {}\n#elif\n#endif\n", "kernels/hopper/x.cuh", {});
  REQUIRE(!r.ok());
  CHECK(r.error().message == "kernels/hopper/x.cuh:3: #elif with no expression");
}

TEST_CASE("an entry point declaration split across lines is an error, not a silently missing kernel (nvcc would emit it)") {
  const std::string text = "extern \"C\" __global__ void\nmet_split(int* p) { *p = 1; }\n";
  auto r = met::avail::scan_entry_points(text, "kernels/x/split.cuh", {});
  REQUIRE_FALSE(r);
  CHECK(r.error().message.find("kernels/x/split.cuh:1") != std::string::npos);
  CHECK(r.error().message.find("same line") != std::string::npos);
}

TEST_CASE("an interpreter body MET_ENTRY(op) is the entry point met_<op>, guarded like any other (a scan that missed bodies would call every interpreter kernel missing)") {
  auto r = scan("MET_ENTRY(gemv) {\n}\n#if MET_HAS_WGMMA\nMET_ENTRY(gemm_x) { }\n#endif\n#define MET_ENTRY(name) void met_##name()\n",
                {{"MET_HAS_WGMMA", 0}});
  REQUIRE(r.size() == 2);
  CHECK(r[0].name == "met_gemv");
  CHECK(r[0].defined);
  CHECK(r[0].global);
  CHECK(r[1].name == "met_gemm_x");
  CHECK(!r[1].defined);
}
