// Availability on an in-memory kernel tree: a guard table, two devices, an abstract base and two
// classes. Each case names the mutation of the tree (or of the code) it catches.
#include <doctest/doctest.h>

#include "avail/availability.hpp"
#include "tree/disk_tree.hpp"

using met::MemTree;
using met::avail::Availability;
using met::avail::ClassChain;
using met::avail::ClassInfo;
using met::avail::compute_availability;
using met::device::Registry;

namespace {

std::string device(const std::string& id, const std::string& vendor, const std::string& arch, const std::string& klass,
                   const std::string& instructions) {
  return "[[device]]\nid = \"" + id + "\"\nname = \"" + id + "\"\nvendor = \"" + vendor + "\"\narch = \"" + arch +
         "\"\nclass = \"" + klass +
         "\"\nunits = 100\nboost_clock_mhz = 1800\nmemory_type = \"HBM3\"\nmemory_gb = 80.0\nvisible_gib = 74.0\n"
         "bandwidth_gbs = 3000.0\nl2_mib = 50.0\nsmem_per_unit_kib = 228\ntdp_w = 700\nusable_fraction = 0.9\n"
         "usable_reason = \"runtime context\"\ninstructions = " +
         instructions +
         "\ninterconnect = { kind = \"pcie5\", gbs = 64.0 }\ncite = \"test-sheet\"\n[device.peaks]\nfp32 = 60.0\nbf16 = 900.0\n";
}

std::string hardware(const std::string& id, const std::string& arch, const std::string& language, const std::string& sources,
                     const std::string& defines) {
  return "class = \"" + id + "\"\narch = \"" + arch + "\"\nvendor = \"" + (language == "hip" ? "amd" : "nvidia") +
         "\"\nlanguage = \"" + language + "\"\ninherits = \"common\"\nsources = " + sources + "\n[defines]\n" + defines +
         "[tensor_core]\npolicy = \"required\"\nmin_rows = 64\n"
         "[defaults]\ndecode_rungs = [1, 2]\nprefill_buckets = [128]\nruntime_reserve_gib = 1.0\nworkspace_mib = 64\n";
}

const char* const kGemv =
    "// portable bodies\n"                                              // 1
    "#pragma once\n"                                                    // 2
    "extern \"C\" __global__ void met_gemv(int n) {}\n"                 // 3
    "extern \"C\" void met_launch_gemv(int n) {}\n"                     // 4 host helper, not a kernel
    "#if MET_HAS_MMA_SYNC\n"                                            // 5
    "extern \"C\" __global__ void met_gemm_bf16_mma(int n) {}\n"        // 6
    "#endif\n"                                                          // 7
    "#if MET_HAS_WGMMA && MET_HAS_TMA\n"                                // 8
    "extern \"C\" __global__ void met_gemm_tc(int n) {}\n"              // 9
    "#elif MET_HAS_MFMA\n"                                              // 10
    "extern \"C\" __global__ void met_gemm_tc(int n) {}\n"              // 11
    "#endif\n";                                                         // 12

const char* const kWgmma =
    "#pragma once\n"                                                    // 1
    "#if MET_HAS_WGMMA && MET_HAS_TMA\n"                                // 2
    "extern \"C\" __global__ void met_gemm_bf16_wgmma(int n) {}\n"      // 3
    "#else\n"                                                           // 4
    "extern \"C\" __global__ void met_gemm_no_wgmma(int n) {}\n"        // 5
    "#endif\n"                                                          // 6
    "#if __CUDA_ARCH__ >= 1000\n"                                       // 7
    "extern \"C\" __global__ void met_gemm_sm100(int n) {}\n"           // 8
    "#endif\n";                                                         // 9

const char* const kMfma =
    "#if MET_HAS_MFMA\n"
    "extern \"C\" __global__ void met_gemm_bf16_mfma(int n) {}\n"
    "#endif\n";

MemTree fixture() {
  return MemTree({
      {"DEVICES.toml",
       "schema = 1\n[source.test-sheet]\ntitle = \"test datasheet\"\nurl = \"https://example.invalid/sheet\"\n"
       "[guard]\nMET_HAS_MMA_SYNC = \"mma_sync\"\nMET_HAS_WGMMA = \"wgmma\"\nMET_HAS_TMA = \"tma\"\nMET_HAS_MFMA = \"mfma\"\n" +
           device("h100-test", "nvidia", "sm_90a", "hopper", "[\"mma_sync\", \"wgmma\", \"tma\"]") +
           device("mi300x", "amd", "gfx942", "cdna3", "[\"mfma\"]")},
      {"common/HARDWARE.toml",
       "class = \"common\"\narch = \"abstract\"\nlanguage = \"cuda\"\nsources = [\"common/gemv.cuh\"]\n"},
      {"common/gemv.cuh", kGemv},
      {"hopper/HARDWARE.toml", hardware("hopper", "sm_90a", "cuda", "[\"hopper/gemm_wgmma.cuh\"]",
                                        "__CUDA_ARCH__ = 900\nMET_HAS_MMA_SYNC = 1\nMET_HAS_WGMMA = 1\nMET_HAS_TMA = 1\n")},
      {"hopper/gemm_wgmma.cuh", kWgmma},
      {"cdna3/HARDWARE.toml",
       hardware("cdna3", "gfx942", "hip", "[\"cdna3/gemm_mfma.cuh\"]", "__HIP_PLATFORM_AMD__ = 1\nMET_HAS_MFMA = 1\n")},
      {"cdna3/gemm_mfma.cuh", kMfma},
  });
}

// Everything one device needs, loaded from a tree the way the planner does.
struct Loaded {
  Registry registry;
  std::map<std::string, ClassInfo> classes;
  ClassChain chain;
  const met::device::Device* dev = nullptr;
};

Loaded load(const MemTree& tree, const std::string& device_id) {
  Loaded l;
  auto reg = met::device::load_registry(tree);
  REQUIRE_MESSAGE(reg.ok(), (reg.ok() ? "" : reg.error().message));
  l.registry = std::move(reg).value();
  auto classes = met::avail::load_classes(tree);
  REQUIRE_MESSAGE(classes.ok(), (classes.ok() ? "" : classes.error().message));
  l.classes = std::move(classes).value();
  l.dev = l.registry.find(device_id);
  REQUIRE(l.dev);
  auto chain = met::avail::resolve_chain(l.classes, l.dev->klass);
  REQUIRE(chain.ok());
  l.chain = std::move(chain).value();
  return l;
}

Availability avail_of(const MemTree& tree, const std::string& device_id, const std::set<std::string>& absent = {}) {
  Loaded l = load(tree, device_id);
  auto a = compute_availability(tree, l.chain, *l.dev, l.registry, absent);
  REQUIRE_MESSAGE(a.ok(), (a.ok() ? "" : a.error().message));
  return std::move(a).value();
}

std::string avail_error(const MemTree& tree, const std::string& device_id) {
  Loaded l = load(tree, device_id);
  auto a = compute_availability(tree, l.chain, *l.dev, l.registry);
  REQUIRE(!a.ok());
  return a.error().message;
}

void replace(MemTree& tree, const std::string& path, const std::string& from, const std::string& to) {
  auto& f = tree.files().at(path);
  const auto at = f.find(from);
  REQUIRE_MESSAGE(at != std::string::npos, from);
  f.replace(at, from.size(), to);
}

}  // namespace

TEST_CASE("kernels under satisfied guards are available, with the defining source and line") {
  const MemTree tree = fixture();
  const Availability a = avail_of(tree, "h100-test");
  CHECK(a.klass == "hopper");
  for (const char* k : {"met_gemv", "met_gemm_bf16_mma", "met_gemm_tc", "met_gemm_bf16_wgmma"}) {
    CHECK_MESSAGE(a.status(k).available, k);
    CHECK(a.status(k).why.empty());
  }
  CHECK(a.status("met_gemm_bf16_wgmma").file == "kernels/hopper/gemm_wgmma.cuh");
  CHECK(a.status("met_gemm_bf16_wgmma").line == 3);
  CHECK(a.status("met_gemm_tc").line == 9);  // the wgmma branch, not the mfma one
  CHECK(a.kernels.count("met_launch_gemv") == 0);  // a host function in a cuda source is no kernel
  CHECK(a.kernels.size() == 6);
}

TEST_CASE("a guard false on the device names the missing instruction kind") {
  const MemTree tree = fixture();
  const Availability a = avail_of(tree, "mi300x");
  const auto mma = a.status("met_gemm_bf16_mma");
  CHECK(!mma.available);
  CHECK(mma.file == "kernels/common/gemv.cuh");
  CHECK(mma.line == 6);
  CHECK(mma.needs == std::vector<std::string>{"mma_sync"});
  CHECK(mma.why == "guard 'MET_HAS_MMA_SYNC' at kernels/common/gemv.cuh:5 is false: needs mma_sync, which mi300x lacks");
  CHECK(a.status("met_gemm_tc").available);  // the #elif MET_HAS_MFMA branch
  CHECK(a.status("met_gemm_tc").line == 11);
  CHECK(a.status("met_gemm_bf16_mfma").available);
}

TEST_CASE("a guard of two kinds lists both missing kinds, in the guard's order") {
  MemTree tree = fixture();
  replace(tree, "common/gemv.cuh", "#elif MET_HAS_MFMA\nextern \"C\" __global__ void met_gemm_tc(int n) {}\n", "");
  const auto st = avail_of(tree, "mi300x").status("met_gemm_tc");
  CHECK(!st.available);
  CHECK(st.needs == std::vector<std::string>{"wgmma", "tma"});
  CHECK(st.why == "guard 'MET_HAS_WGMMA && MET_HAS_TMA' at kernels/common/gemv.cuh:8 is false: needs wgmma, tma, which mi300x lacks");
}

TEST_CASE("a guard that no missing kind explains says it is false under the class defines") {
  const MemTree tree = fixture();
  const Availability a = avail_of(tree, "h100-test");
  const auto sm100 = a.status("met_gemm_sm100");
  CHECK(!sm100.available);
  CHECK(sm100.needs.empty());
  CHECK(sm100.why == "guard '__CUDA_ARCH__ >= 1000' at kernels/hopper/gemm_wgmma.cuh:7 is false under class 'hopper' defines");
  // The #else of a guard the device satisfies: setting a missing kind cannot make "!(A) && ..." true.
  const auto fallback = a.status("met_gemm_no_wgmma");
  CHECK(!fallback.available);
  CHECK(fallback.needs.empty());
  CHECK(fallback.why ==
        "guard '!(MET_HAS_WGMMA && MET_HAS_TMA)' at kernels/hopper/gemm_wgmma.cuh:4 is false under class 'hopper' defines");
}

TEST_CASE("a kind the device has is never named as missing, even when a source undefines its macro") {
  MemTree tree = fixture();
  replace(tree, "hopper/gemm_wgmma.cuh", "#pragma once\n", "#pragma once\n#undef MET_HAS_TMA\n");
  const auto st = avail_of(tree, "h100-test").status("met_gemm_bf16_wgmma");
  CHECK(!st.available);
  CHECK(st.needs.empty());
  CHECK(st.why == "guard 'MET_HAS_WGMMA && MET_HAS_TMA' at kernels/hopper/gemm_wgmma.cuh:3 is false under class 'hopper' defines");
}

TEST_CASE("a kernel of another class's source is not defined by any source of this class") {
  const MemTree tree = fixture();
  const Availability a = avail_of(tree, "mi300x");
  const auto st = a.status("met_gemm_bf16_wgmma");
  CHECK(!st.available);
  CHECK(st.why == "not defined by any source of class 'cdna3'");
  CHECK(a.kernels.count("met_gemm_bf16_wgmma") == 0);
}

TEST_CASE("deleting a kernel's source makes it unavailable with a why") {
  MemTree tree = fixture();
  replace(tree, "hopper/gemm_wgmma.cuh", "extern \"C\" __global__ void met_gemm_bf16_wgmma(int n) {}\n", "");
  const auto st = avail_of(tree, "h100-test").status("met_gemm_bf16_wgmma");
  CHECK(!st.available);
  CHECK(st.why == "not defined by any source of class 'hopper'");
  // Deleting the whole file is caught where the class names it.
  tree.files().erase("hopper/gemm_wgmma.cuh");
  auto classes = met::avail::load_classes(tree);
  REQUIRE(!classes.ok());
  CHECK(classes.error().message == "kernels/hopper/HARDWARE.toml:6: 'sources': source 'kernels/hopper/gemm_wgmma.cuh' does not exist");
}

TEST_CASE("a device claiming an instruction its class compiles out is refused") {
  MemTree tree = fixture();
  replace(tree, "DEVICES.toml", "instructions = [\"mfma\"]", "instructions = [\"mfma\", \"wgmma\"]");
  Loaded l = load(tree, "mi300x");
  auto r = met::avail::check_build_vs_device(l.chain, *l.dev, l.registry);
  REQUIRE(!r.ok());
  const std::string want = l.dev->location + ": device 'mi300x' claims wgmma, which class 'cdna3' compiles out (MET_HAS_WGMMA = 0)";
  CHECK(r.error().message == want);
  CHECK(avail_error(tree, "mi300x") == want);  // availability never runs on a mismatched build
}

TEST_CASE("a class compiling in an instruction its device lacks is refused") {
  MemTree tree = fixture();
  replace(tree, "DEVICES.toml", "[\"mma_sync\", \"wgmma\", \"tma\"]", "[\"mma_sync\", \"wgmma\"]");
  Loaded l = load(tree, "h100-test");
  auto r = met::avail::check_build_vs_device(l.chain, *l.dev, l.registry);
  REQUIRE(!r.ok());
  CHECK(r.error().message == l.dev->location + ": class 'hopper' compiles in tma (MET_HAS_TMA = 1), which device 'h100-test' lacks");
}

TEST_CASE("a device of another arch than its class, or of an abstract class, is refused") {
  MemTree tree = fixture();
  replace(tree, "DEVICES.toml", "arch = \"sm_90a\"", "arch = \"sm_90\"");
  Loaded l = load(tree, "h100-test");
  auto r = met::avail::check_build_vs_device(l.chain, *l.dev, l.registry);
  REQUIRE(!r.ok());
  CHECK(r.error().message ==
        l.dev->location + ": device 'h100-test' has arch 'sm_90', but class 'hopper' is built for 'sm_90a' (kernels/hopper/HARDWARE.toml)");

  MemTree abstract = fixture();
  replace(abstract, "DEVICES.toml", "class = \"hopper\"", "class = \"common\"");
  Loaded a = load(abstract, "h100-test");
  auto ra = met::avail::check_build_vs_device(a.chain, *a.dev, a.registry);
  REQUIRE(!ra.ok());
  CHECK(ra.error().message.find("device 'h100-test' names class 'common', which is abstract") != std::string::npos);

  Loaded other = load(fixture(), "h100-test");
  auto cdna = met::avail::resolve_chain(other.classes, "cdna3");
  REQUIRE(cdna.ok());
  auto rc = met::avail::check_build_vs_device(*cdna, *other.dev, other.registry);
  REQUIRE(!rc.ok());
  CHECK(rc.error().message.find("device 'h100-test' runs class 'hopper', not class 'cdna3'") != std::string::npos);
}

TEST_CASE("a kernel compiled by two sources of the chain is an error naming both places") {
  MemTree tree = fixture();
  tree.files()["hopper/gemm_wgmma.cuh"] += "extern \"C\" __global__ void met_gemv(int n) {}\n";
  CHECK(avail_error(tree, "h100-test") ==
        "kernels/hopper/gemm_wgmma.cuh:10: 'met_gemv' is defined by two sources of class 'hopper': "
        "kernels/common/gemv.cuh:3 and kernels/hopper/gemm_wgmma.cuh:10");
  // The same name compiled out in one of them is no conflict.
  MemTree guarded = fixture();
  guarded.files()["hopper/gemm_wgmma.cuh"] += "#if 0\nextern \"C\" __global__ void met_gemv(int n) {}\n#endif\n";
  CHECK(avail_of(guarded, "h100-test").status("met_gemv").file == "kernels/common/gemv.cuh");
}

TEST_CASE("a kernel declared absent by MODEL.toml is unavailable whatever its guards say") {
  const MemTree tree = fixture();
  const Availability a = avail_of(tree, "h100-test", {"met_gemm_bf16_wgmma"});
  const auto st = a.status("met_gemm_bf16_wgmma");
  CHECK(!st.available);
  CHECK(st.why == "declared absent by MODEL.toml");
  CHECK(st.needs.empty());
  CHECK(a.status("met_gemv").available);
}

TEST_CASE("a broken guard in a chain source fails availability with its location") {
  MemTree tree = fixture();
  replace(tree, "cdna3/gemm_mfma.cuh", "#if MET_HAS_MFMA", "#if MET_HAS_MFMA &&");
  CHECK(avail_error(tree, "mi300x") == "kernels/cdna3/gemm_mfma.cuh:1: expression ends too early in expression 'MET_HAS_MFMA &&'");
}

TEST_CASE("availability is the same on a second run (no hidden state)") {
  const MemTree tree = fixture();
  const Availability a = avail_of(tree, "mi300x");
  const Availability b = avail_of(tree, "mi300x");
  REQUIRE(a.kernels.size() == b.kernels.size());
  for (const auto& [name, st] : a.kernels) {
    const auto& other = b.kernels.at(name);
    CHECK(st.available == other.available);
    CHECK(st.why == other.why);
    CHECK(st.needs == other.needs);
  }
}

TEST_CASE("the checked-in kernel tree: every device's build agrees with its class and availability computes") {
  const met::DiskTree disk(std::string(MET_SOURCE_DIR) + "/kernels", "kernels/");
  const MemTree tree = met::snapshot(disk);
  auto reg = met::device::load_registry(tree);
  REQUIRE_MESSAGE(reg.ok(), (reg.ok() ? "" : reg.error().message));
  auto classes = met::avail::load_classes(tree);
  REQUIRE_MESSAGE(classes.ok(), (classes.ok() ? "" : classes.error().message));
  for (const auto& d : reg->devices) {
    auto chain = met::avail::resolve_chain(*classes, d.klass);
    REQUIRE_MESSAGE(chain.ok(), (chain.ok() ? "" : chain.error().message));
    auto a = compute_availability(tree, *chain, d, *reg);
    REQUIRE_MESSAGE(a.ok(), (a.ok() ? "" : a.error().message));
    CHECK_MESSAGE(!a->kernels.empty(), d.id);
    for (const auto& kernel : a->kernels) CHECK_MESSAGE(kernel.second.available == kernel.second.why.empty(), kernel.first);
  }
  // Guards from docs/arch/kernels.md: hopper runs its own wgmma GEMM (kernels/hopper/gemm_wgmma.cuh)
  // and keeps the inherited mma.sync one; ampere has no wgmma; AMD lacks mma.sync.
  REQUIRE(reg->find("h200-sxm"));
  REQUIRE(reg->find("a100-sxm-80g"));
  REQUIRE(reg->find("mi300x"));
  CHECK(avail_of(tree, "h200-sxm").status("met_gemm_bf16_mma").available);
  const auto wgmma = avail_of(tree, "h200-sxm").status("met_gemm_bf16_wgmma");
  CHECK(wgmma.available);
  CHECK(wgmma.file == "kernels/hopper/gemm_wgmma.cuh");
  CHECK(!avail_of(tree, "a100-sxm-80g").status("met_gemm_bf16_wgmma").available);
  const auto mma = avail_of(tree, "mi300x").status("met_gemm_bf16_mma");
  CHECK(!mma.available);
  CHECK(mma.needs == std::vector<std::string>{"mma_sync", "cp_async"});  // its cp.async pipeline too
}
