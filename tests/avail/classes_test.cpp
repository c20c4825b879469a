// HARDWARE.toml loading and class chains on in-memory trees: inheritance order, merged defines,
// and every schema mistake a class file can make.
#include <doctest/doctest.h>

#include "avail/classes.hpp"

using met::MemTree;
using met::avail::load_classes;
using met::avail::resolve_chain;

namespace {

std::string hardware(const std::string& id, const std::string& arch, const std::string& extra, const std::string& sources = "[]") {
  std::string s = "class = \"" + id + "\"\narch = \"" + arch + "\"\nvendor = \"nvidia\"\nlanguage = \"cuda\"\nsources = " + sources + "\n" +
                   extra;
  if (arch != "abstract") {
    s += "[tensor_core]\npolicy = \"required\"\nmin_rows = 64\n"
         "[defaults]\ndecode_rungs = [1, 2, 4]\nprefill_buckets = [128, 512]\nruntime_reserve_gib = 1.0\nworkspace_mib = 256\n";
  }
  return s;
}

MemTree base_tree() {
  return MemTree({
      {"common/HARDWARE.toml", hardware("common", "abstract", "[defines]\nMET_BLOCK = 256\nMET_HAS_TMA = 0\n", "[\"common/gemv.cuh\"]")},
      {"common/gemv.cuh", ""},
      {"ampere/HARDWARE.toml",
       hardware("ampere", "sm_80", "inherits = \"common\"\n[defines]\nMET_HAS_MMA_SYNC = 1\n__CUDA_ARCH__ = 800\n",
                "[\"ampere/gemm_mma.cuh\", \"common/gemv.cuh\"]")},
      {"ampere/gemm_mma.cuh", ""},
      {"hopper/HARDWARE.toml",
       hardware("hopper", "sm_90a", "inherits = \"ampere\"\n[defines]\nMET_HAS_TMA = 1\n__CUDA_ARCH__ = 900\n",
                "[\"hopper/gemm_wgmma.cuh\"]")},
      {"hopper/gemm_wgmma.cuh", ""},
      {"hopper/llama/HARDWARE.toml", "not a class: two levels deep"},
      {"README.md", ""},
  });
}

std::string load_error(const MemTree& tree) {
  auto r = load_classes(tree);
  REQUIRE_MESSAGE(!r.ok(), "expected an error");
  return r.error().message;
}

// The base tree with `extra` keys in hopper's HARDWARE.toml.
MemTree hopper_with(const std::string& extra) {
  MemTree tree = base_tree();
  auto& f = tree.files()["hopper/HARDWARE.toml"];
  f.replace(f.find("inherits = "), 0, extra);
  return tree;
}

}  // namespace

TEST_CASE("a chain lists ancestors root first, sources inherited first and once, child defines win") {
  MemTree tree = base_tree();
  auto classes = load_classes(tree);
  REQUIRE_MESSAGE(classes.ok(), (classes.ok() ? "" : classes.error().message));
  CHECK(classes->size() == 3);
  const auto& hopper = classes->at("hopper");
  CHECK(hopper.arch == "sm_90a");
  CHECK(hopper.inherits == std::optional<std::string>("ampere"));
  CHECK(hopper.tc_policy == "required");
  CHECK(hopper.tc_min_rows == 64);
  CHECK(hopper.defaults.activation == "bf16");
  CHECK(hopper.defaults.decode_rungs == std::vector<int>{1, 2, 4});
  CHECK(hopper.defaults.prefill_buckets == std::vector<int>{128, 512});
  CHECK(hopper.defaults.runtime_reserve_gib == 1.0);
  CHECK(hopper.defaults.workspace_mib == 256.0);
  CHECK(hopper.location == "kernels/hopper/HARDWARE.toml");
  CHECK(classes->at("common").tc_policy == "none");

  auto chain = resolve_chain(*classes, "hopper");
  REQUIRE(chain.ok());
  CHECK(chain->ids() == std::vector<std::string>{"common", "ampere", "hopper"});
  CHECK(chain->leaf().id == "hopper");
  CHECK(chain->sources == std::vector<std::string>{"common/gemv.cuh", "ampere/gemm_mma.cuh", "hopper/gemm_wgmma.cuh"});
  CHECK(chain->defines.at("MET_HAS_TMA") == 1);  // hopper overrides common's 0
  CHECK(chain->defines.at("__CUDA_ARCH__") == 900);
  CHECK(chain->defines.at("MET_HAS_MMA_SYNC") == 1);
  CHECK(chain->defines.at("MET_BLOCK") == 256);
}

TEST_CASE("an inheritance cycle is an error that lists the cycle") {
  MemTree tree = base_tree();
  auto& f = tree.files()["common/HARDWARE.toml"];
  f = "inherits = \"hopper\"\n" + f;
  CHECK(load_error(tree) == "kernels/ampere/HARDWARE.toml: class inheritance cycle: ampere -> common -> hopper -> ampere");
}

TEST_CASE("an unknown key in any table is rejected, never ignored") {
  MemTree tree = base_tree();
  tree.files()["hopper/HARDWARE.toml"] += "[extra]\nx = 1\n";
  CHECK(load_error(tree) == "kernels/hopper/HARDWARE.toml:18: 'extra': unknown key");
  tree = base_tree();
  tree.files()["hopper/HARDWARE.toml"] += "prefill_rungs = [1]\n";  // lands in [defaults]
  CHECK(load_error(tree) == "kernels/hopper/HARDWARE.toml:18: defaults: 'prefill_rungs': unknown key");
}

TEST_CASE("schema mistakes are located errors") {
  auto with = [](const std::string& path, const std::string& from, const std::string& to) {
    MemTree tree = base_tree();
    auto& f = tree.files()[path];
    const auto at = f.find(from);
    REQUIRE_MESSAGE(at != std::string::npos, from);
    f.replace(at, from.size(), to);
    return load_error(tree);
  };
  CHECK(with("hopper/HARDWARE.toml", "class = \"hopper\"", "class = \"hoper\"") ==
        "kernels/hopper/HARDWARE.toml:1: 'class': class 'hoper' must equal its directory name 'hopper'");
  CHECK(with("hopper/HARDWARE.toml", "language = \"cuda\"", "language = \"ptx\"") ==
        "kernels/hopper/HARDWARE.toml:4: 'language': unknown language 'ptx' (known: cuda, hip, cpp)");
  CHECK(with("hopper/HARDWARE.toml", "policy = \"required\"", "policy = \"always\"") ==
        "kernels/hopper/HARDWARE.toml:11: tensor_core: 'policy': unknown policy 'always' (known: required, preferred, none)");
  CHECK(with("hopper/HARDWARE.toml", "hopper/gemm_wgmma.cuh", "hopper/gone.cuh") ==
        "kernels/hopper/HARDWARE.toml:5: 'sources': source 'kernels/hopper/gone.cuh' does not exist");
  CHECK(with("hopper/HARDWARE.toml", "inherits = \"ampere\"", "inherits = \"amper\"") ==
        "kernels/hopper/HARDWARE.toml: class 'hopper' inherits 'amper', which is not a class (known: ampere, common, hopper)");
  CHECK(with("hopper/HARDWARE.toml", "MET_HAS_TMA = 1", "MET_HAS_TMA = true") ==
        "kernels/hopper/HARDWARE.toml:8: defines: 'MET_HAS_TMA': expected an integer, found a boolean");
  CHECK(with("hopper/HARDWARE.toml", "decode_rungs = [1, 2, 4]", "decode_rungs = [1, 4, 2]") ==
        "kernels/hopper/HARDWARE.toml:14: defaults: 'decode_rungs': values must be strictly ascending");
  CHECK(with("hopper/HARDWARE.toml", "[defaults]", "[defaults]\nkv = \"fp9\"").find("'kv': unknown format 'fp9'") !=
        std::string::npos);
  CHECK(with("hopper/HARDWARE.toml", "[defaults]", "[defaults]\nkv_formats = [\"bf16\", \"fp9\"]").find("'kv_formats': unknown format 'fp9'") !=
        std::string::npos);
  CHECK(with("hopper/HARDWARE.toml", "[defaults]", "[defaults]\nkv_formats = []").find("'kv_formats': must list at least one format") !=
        std::string::npos);
  CHECK(with("hopper/HARDWARE.toml", "workspace_mib = 256\n", "") ==
        "kernels/hopper/HARDWARE.toml:13: defaults: missing key 'workspace_mib'");
  CHECK(with("hopper/HARDWARE.toml", "min_rows = 64\n", "") ==
        "kernels/hopper/HARDWARE.toml:10: tensor_core: missing key 'min_rows' (policy 'required')");
}

TEST_CASE("a measured packet overhead needs its evidence, must be positive, and stays with its class") {
  {
    auto r = load_classes(hopper_with("packet_overhead_us = 4.2\npacket_overhead_evidence = \"perf-data/x.json\"\n"));
    REQUIRE(r.ok());
    CHECK(r->at("hopper").packet_overhead_us == 4.2);
    CHECK(r->at("hopper").packet_overhead_evidence == "perf-data/x.json");
    CHECK(!r->at("ampere").packet_overhead_us);
  }
  CHECK(load_error(hopper_with("packet_overhead_us = 4.2\n")).find("'packet_overhead_us': must be positive and come with "
                                                           "packet_overhead_evidence") != std::string::npos);
  CHECK(load_error(hopper_with("packet_overhead_us = -1.0\npacket_overhead_evidence = \"x\"\n")).find("must be positive") !=
        std::string::npos);
  CHECK(load_error(hopper_with("packet_overhead_evidence = \"x\"\n")).find("'packet_overhead_evidence': without packet_overhead_us") !=
        std::string::npos);
}

TEST_CASE("a grouped expert block is [slots, weight rows], both positive, and stays with its class") {
  auto r = load_classes(hopper_with("moe_gemm_block = [64, 32]\n"));
  REQUIRE(r.ok());
  CHECK(r->at("hopper").moe_gemm_block == std::make_pair<std::int64_t, std::int64_t>(64, 32));
  CHECK(!r->at("ampere").moe_gemm_block);
  CHECK(load_error(hopper_with("moe_gemm_block = [64]\n")).find("'moe_gemm_block': must be [slots, weight rows], both positive") !=
        std::string::npos);
  CHECK(load_error(hopper_with("moe_gemm_block = [64, -1]\n")).find("both positive") != std::string::npos);
}

TEST_CASE("a GEMM tile is [rows, columns], both positive, and stays with its class") {
  auto r = load_classes(hopper_with("gemm_tile = [128, 64]\n"));
  REQUIRE(r.ok());
  CHECK(r->at("hopper").gemm_tile == std::make_pair<std::int64_t, std::int64_t>(128, 64));
  CHECK(!r->at("ampere").gemm_tile);
  CHECK(load_error(hopper_with("gemm_tile = [128]\n")).find("'gemm_tile': must be [rows, columns], both positive") != std::string::npos);
  CHECK(load_error(hopper_with("gemm_tile = [0, 128]\n")).find("both positive") != std::string::npos);
}

TEST_CASE("resolving an unknown class names the known ones") {
  MemTree tree = base_tree();
  auto classes = load_classes(tree);
  REQUIRE(classes.ok());
  auto r = resolve_chain(*classes, "blackwell");
  REQUIRE(!r.ok());
  CHECK(r.error().message == "unknown class 'blackwell' (known: ampere, common, hopper)");
}

TEST_CASE("a class's KV cache formats default to bf16 alone and are its own (never inherited)") {
  MemTree tree = base_tree();
  auto& f = tree.files()["ampere/HARDWARE.toml"];
  f.replace(f.find("[defaults]"), std::string("[defaults]").size(), "[defaults]\nkv_formats = [\"bf16\", \"fp8-e4m3\"]");
  auto classes = load_classes(tree);
  REQUIRE_MESSAGE(classes.ok(), (classes.ok() ? "" : classes.error().message));
  CHECK(classes->at("ampere").defaults.kv_formats == std::vector<std::string>{"bf16", "fp8-e4m3"});
  CHECK(classes->at("hopper").defaults.kv_formats == std::vector<std::string>{"bf16"});
}
