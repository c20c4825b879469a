// Tests of the device registry: facts of the real kernels/DEVICES.toml, and one mutation per
// test case on a small in-memory registry, each asserting the located message names the culprit.
#include <doctest/doctest.h>

#include <algorithm>
#include <cctype>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "device/registry.hpp"
#include "tree/disk_tree.hpp"

namespace {

using met::device::load_registry;
using met::device::Registry;

// A small registry that loads; each mutation test changes one thing in it.
const std::string kBase = R"(schema = 1

[source.sheet]
title = "a datasheet"
url = "https://example.com/sheet"

[source.paper]
title = "a whitepaper"
url = "https://example.com/paper"

[guard]
MET_HAS_WGMMA = "wgmma"
MET_HAS_MMA_SYNC = "mma_sync"

[[device]]
id = "gpu-b"
name = "GPU B"
vendor = "nvidia"
arch = "sm_90a"
class = "hopper"
units = 132
boost_clock_mhz = 1980
memory_type = "HBM3e"
memory_gb = 141.0
visible_gib = 139.8
bandwidth_gbs = 4800.0
l2_mib = 50.0
smem_per_unit_kib = 228
tdp_w = 700
usable_fraction = 0.92
usable_reason = "driver and context"
instructions = ["mma_sync", "wgmma"]
interconnect = { kind = "nvlink4", gbs = 450.0 }
cite = "sheet"
cite_fields = { l2_mib = "paper" }

[device.peaks]
fp32 = 66.9
bf16 = 989.4

[[device]]
id = "gpu-a"
name = "GPU A"
vendor = "amd"
arch = "gfx942"
class = "cdna3"
units = 304
boost_clock_mhz = 2100
memory_type = "HBM3"
memory_gb = 192.0
visible_gib = 191.7
bandwidth_gbs = 5300.0
l2_mib = 32.0
smem_per_unit_kib = 64
tdp_w = 750
usable_fraction = 0.92
usable_reason = "driver and context"
instructions = ["mfma"]
interconnect = { kind = "xgmi", gbs = 448.0 }
cite = "sheet"

[device.peaks]
fp32 = 163.4
bf16 = 1307.4
)";

// Replaces the first occurrence of `from` (which must be present) by `to`.
std::string mutate(std::string text, const std::string& from, const std::string& to) {
  const auto at = text.find(from);
  REQUIRE_MESSAGE(at != std::string::npos, "fixture lacks: " << from);
  text.replace(at, from.size(), to);
  return text;
}

// "kernels/DEVICES.toml:N" of the first line holding `needle`.
std::string at_line_of(const std::string& text, const std::string& needle) {
  const auto at = text.find(needle);
  REQUIRE_MESSAGE(at != std::string::npos, "text lacks: " << needle);
  const auto line = 1 + std::count(text.begin(), text.begin() + static_cast<std::ptrdiff_t>(at), '\n');
  return "kernels/DEVICES.toml:" + std::to_string(line) + ":";
}

met::Expected<Registry> load_text(const std::string& text) {
  met::MemTree tree({{"DEVICES.toml", text}});
  return load_registry(tree);
}

std::string error_of(const std::string& text) {
  auto reg = load_text(text);
  REQUIRE_FALSE(reg.ok());
  return reg.error().message;
}

}  // namespace

TEST_CASE("the real registry loads and holds every planned device") {
  met::DiskTree tree(MET_SOURCE_DIR "/kernels", "kernels/");
  auto reg = load_registry(tree);
  REQUIRE_MESSAGE(reg.ok(), (reg.ok() ? "" : reg.error().message));
  const std::vector<std::string> want = {"a100-sxm-80g", "b200",   "b300",         "gb200",  "gh200",  "h100-nvl",
                                         "h100-sxm",     "h200-sxm", "host-cpu",   "l40s",   "mi300x", "mi325x",
                                         "mi350x",       "mi355x", "rtx-5090",     "rtx-pro-6000"};
  CHECK(reg->ids() == want);
  CHECK(reg->guards.size() == 12);
  CHECK(reg->guards.at("MET_HAS_TCGEN05") == "tcgen05");
}

TEST_CASE("h200-sxm carries its datasheet and measured figures") {
  met::DiskTree tree(MET_SOURCE_DIR "/kernels", "kernels/");
  auto reg = load_registry(tree);
  REQUIRE(reg.ok());
  const auto* d = reg->find("h200-sxm");
  REQUIRE(d != nullptr);
  CHECK(d->units == 132);
  CHECK(d->klass == "hopper");
  CHECK(d->arch == "sm_90a");
  CHECK(d->bandwidth_gbs == 4800.0);
  CHECK(d->instructions.count("wgmma") == 1);
  // The measured figures are `met circuit probe`'s (they change with each probe; their values are
  // tested where they are used).
  REQUIRE(d->measured.has_value());
  CHECK((d->measured->read_gbs || d->measured->copy_gbs));
  CHECK(d->measured->peaks.count("bf16") == 1);
  CHECK(reg->sources.count(d->measured->cite) == 1);
  CHECK(reg->sources.at("met-h200-measured").url == "perf-data/h200-sxm/");
  CHECK(d->visible_gib == 139.8);
  CHECK(d->cites.at("visible_gib") == "met-h200-measured");
  CHECK(d->location.rfind("kernels/DEVICES.toml:", 0) == 0);
  CHECK(reg->find("h100") == nullptr);
}

TEST_CASE("every number of every real device names a defined source") {
  met::DiskTree tree(MET_SOURCE_DIR "/kernels", "kernels/");
  auto reg = load_registry(tree);
  REQUIRE(reg.ok());
  for (const auto& d : reg->devices) {
    CAPTURE(d.id);
    for (const char* field : {"units", "boost_clock_mhz", "memory_gb", "visible_gib", "bandwidth_gbs", "l2_mib",
                              "smem_per_unit_kib", "tdp_w", "usable_fraction", "interconnect"}) {
      CAPTURE(field);
      REQUIRE(d.cites.count(field) == 1);
      CHECK(reg->sources.count(d.cites.at(field)) == 1);
    }
    for (const auto& [key, value] : d.peaks) {
      REQUIRE(d.cites.count("peaks." + key) == 1);
      CHECK(reg->sources.count(d.cites.at("peaks." + key)) == 1);
    }
    CHECK(d.peaks.count("fp32") == 1);
  }
}

TEST_CASE("instruction kinds of real devices agree within a class (a device claiming wgmma on blackwell is caught)") {
  met::DiskTree tree(MET_SOURCE_DIR "/kernels", "kernels/");
  auto reg = load_registry(tree);
  REQUIRE(reg.ok());
  const std::map<std::string, std::set<std::string>> by_class = {
      {"ampere", {"mma_sync", "cp_async"}},
      {"hopper", {"mma_sync", "cp_async", "wgmma", "tma", "fp8_mma"}},
      {"blackwell", {"mma_sync", "cp_async", "tma", "fp8_mma", "tcgen05", "fp4_mma"}},
      {"blackwell-rtx", {"mma_sync", "cp_async", "tma", "fp8_mma", "fp4_mma"}},
      {"cdna3", {"mfma", "mfma_fp8"}},
      {"cdna4", {"mfma", "mfma_fp8", "mfma_fp4"}},
      {"cpu", {"avx2", "avx512"}},
  };
  const std::map<std::string, std::string> arch_of = {
      {"ampere", "sm_80"},  {"hopper", "sm_90a"}, {"blackwell", "sm_100a"}, {"blackwell-rtx", "sm_120a"},
      {"cdna3", "gfx942"}, {"cdna4", "gfx950"},  {"cpu", "host"}};
  for (const auto& d : reg->devices) {
    CAPTURE(d.id);
    REQUIRE(by_class.count(d.klass) == 1);
    CHECK(d.instructions == by_class.at(d.klass));
    CHECK(d.arch == arch_of.at(d.klass));
  }
}

TEST_CASE("the mutation fixture itself loads, sorted by id, with cite overrides applied") {
  auto reg = load_text(kBase);
  REQUIRE_MESSAGE(reg.ok(), (reg.ok() ? "" : reg.error().message));
  CHECK(reg->ids() == std::vector<std::string>{"gpu-a", "gpu-b"});
  const auto* b = reg->find("gpu-b");
  REQUIRE(b != nullptr);
  CHECK(b->cites.at("l2_mib") == "paper");
  CHECK(b->cites.at("units") == "sheet");
  CHECK(b->cites.at("peaks.bf16") == "sheet");
  // location is the [[device]] header line, without the trailing ':'.
  const auto header = kBase.find("[[device]]");
  const std::string at = at_line_of(kBase.substr(0, header) + "@@", "@@");
  CHECK(b->location == at.substr(0, at.size() - 1));
}

TEST_CASE("malformed toml is reported with line and column") {
  const std::string text = mutate(kBase, "units = 132", "units = = 132");
  const std::string msg = error_of(text);
  const std::string at = at_line_of(text, "units = = 132");
  CHECK(msg.find(at) == 0);
  // line:col: a column number follows the line.
  const auto after = msg.substr(at.size());
  CHECK(!after.empty());
  CHECK(std::isdigit(static_cast<unsigned char>(after[0])));
}

TEST_CASE("an unknown key in a device is refused, not ignored") {
  const std::string text = mutate(kBase, "tdp_w = 700", "tdp_w = 700\ntdp_watts = 700");
  const std::string msg = error_of(text);
  CHECK(msg.find(at_line_of(text, "tdp_watts")) == 0);
  CHECK(msg.find("device 'gpu-b'") != std::string::npos);
  CHECK(msg.find("'tdp_watts': unknown key") != std::string::npos);
}

TEST_CASE("a string where a number belongs is a type error, not a zero") {
  const std::string text = mutate(kBase, "bandwidth_gbs = 4800.0", "bandwidth_gbs = \"4800\"");
  const std::string msg = error_of(text);
  CHECK(msg.find(at_line_of(text, "bandwidth_gbs = \"4800\"")) == 0);
  CHECK(msg.find("'bandwidth_gbs'") != std::string::npos);
  CHECK(msg.find("expected a number, found a string") != std::string::npos);
}

TEST_CASE("a misspelt instruction kind is refused and the known kinds are listed") {
  const std::string text = mutate(kBase, "[\"mma_sync\", \"wgmma\"]", "[\"mma_sync\", \"wgmmma\"]");
  const std::string msg = error_of(text);
  CHECK(msg.find(at_line_of(text, "wgmmma")) == 0);
  CHECK(msg.find("device 'gpu-b'") != std::string::npos);
  CHECK(msg.find("unknown instruction kind 'wgmmma' (known: mma_sync, cp_async, wgmma,") != std::string::npos);
}

TEST_CASE("a guard macro mapped to an unknown instruction kind is refused") {
  const std::string text = mutate(kBase, "MET_HAS_WGMMA = \"wgmma\"", "MET_HAS_WGMMA = \"wgmma2\"");
  const std::string msg = error_of(text);
  CHECK(msg.find(at_line_of(text, "wgmma2")) == 0);
  CHECK(msg.find("guard 'MET_HAS_WGMMA'") != std::string::npos);
  CHECK(msg.find("unknown instruction kind 'wgmma2'") != std::string::npos);
}

TEST_CASE("an unknown peak key is refused and the known keys are listed") {
  const std::string text = mutate(kBase, "bf16 = 989.4", "bf61 = 989.4");
  const std::string msg = error_of(text);
  CHECK(msg.find(at_line_of(text, "bf61")) == 0);
  CHECK(msg.find("'bf61': unknown peak key (known: fp64, fp32,") != std::string::npos);
}

TEST_CASE("a number with no source is refused (a device without cite whose field has no override)") {
  const std::string text = mutate(kBase, "cite = \"sheet\"\n\n[device.peaks]\nfp32 = 163.4",
                                  "\n[device.peaks]\nfp32 = 163.4");
  const std::string msg = error_of(text);
  // The first uncited field of gpu-a is its unit count.
  CHECK(msg.find(at_line_of(text, "units = 304")) == 0);
  CHECK(msg.find("device 'gpu-a'") != std::string::npos);
  CHECK(msg.find("'units' has no source") != std::string::npos);
}

TEST_CASE("an uncited peak is refused even when every top-level field has an override") {
  std::string text = mutate(kBase, "cite = \"sheet\"\ncite_fields = { l2_mib = \"paper\" }",
                            "cite_fields = { units = \"sheet\", boost_clock_mhz = \"sheet\", memory_gb = \"sheet\", "
                            "visible_gib = \"sheet\", bandwidth_gbs = \"sheet\", l2_mib = \"paper\", "
                            "smem_per_unit_kib = \"sheet\", tdp_w = \"sheet\", usable_fraction = \"sheet\", "
                            "interconnect = \"sheet\", \"peaks.fp32\" = \"sheet\" }");
  const std::string msg = error_of(text);
  CHECK(msg.find(at_line_of(text, "bf16 = 989.4")) == 0);
  CHECK(msg.find("'peaks.bf16' has no source") != std::string::npos);
}

TEST_CASE("a cite of an undefined source is refused and the defined ones are listed") {
  const std::string text = mutate(kBase, "cite_fields = { l2_mib = \"paper\" }", "cite_fields = { l2_mib = \"papr\" }");
  const std::string msg = error_of(text);
  CHECK(msg.find(at_line_of(text, "\"papr\"")) == 0);
  CHECK(msg.find("device 'gpu-b'") != std::string::npos);
  CHECK(msg.find("'l2_mib': unknown source 'papr' (known: paper, sheet)") != std::string::npos);
}

TEST_CASE("a device-level cite of an undefined source is refused") {
  const std::string text = mutate(kBase, "cite = \"sheet\"\ncite_fields", "cite = \"shet\"\ncite_fields");
  const std::string msg = error_of(text);
  CHECK(msg.find(at_line_of(text, "\"shet\"")) == 0);
  CHECK(msg.find("unknown source 'shet'") != std::string::npos);
}

TEST_CASE("a cite_fields key that is no field is refused") {
  const std::string text = mutate(kBase, "{ l2_mib = \"paper\" }", "{ l2_mb = \"paper\" }");
  const std::string msg = error_of(text);
  CHECK(msg.find(at_line_of(text, "l2_mb")) == 0);
  CHECK(msg.find("unknown field 'l2_mb'") != std::string::npos);
}

TEST_CASE("a duplicate device id is refused and the first one located") {
  const std::string text = mutate(kBase, "id = \"gpu-a\"", "id = \"gpu-b\"");
  const std::string msg = error_of(text);
  // The second [[device]] is the duplicate; the first is named in the message.
  const auto second = text.find("[[device]]", text.find("[[device]]") + 1);
  const std::string second_at = at_line_of(text.substr(0, second) + "@@", "@@");
  CHECK(msg.find(second_at) == 0);
  CHECK(msg.find("device 'gpu-b': duplicate id (first at " + at_line_of(text, "[[device]]").substr(0, at_line_of(text, "[[device]]").size() - 1) + ")") !=
        std::string::npos);
}

TEST_CASE("a missing required field is refused at its device") {
  const std::string text = mutate(kBase, "memory_gb = 192.0\n", "");
  const std::string msg = error_of(text);
  const auto second = text.find("[[device]]", text.find("[[device]]") + 1);
  CHECK(msg.find(at_line_of(text.substr(0, second) + "@@", "@@")) == 0);
  CHECK(msg.find("device 'gpu-a'") != std::string::npos);
  CHECK(msg.find("missing key 'memory_gb'") != std::string::npos);
}

TEST_CASE("an id with upper case or underscores is refused") {
  const std::string text = mutate(kBase, "id = \"gpu-a\"", "id = \"GPU_A\"");
  const std::string msg = error_of(text);
  CHECK(msg.find(at_line_of(text, "GPU_A")) == 0);
  CHECK(msg.find("'id': must be lower-case") != std::string::npos);
}

TEST_CASE("an unknown vendor is refused and the vendors listed") {
  const std::string text = mutate(kBase, "vendor = \"amd\"", "vendor = \"intel\"");
  const std::string msg = error_of(text);
  CHECK(msg.find(at_line_of(text, "intel")) == 0);
  CHECK(msg.find("unknown vendor 'intel' (known: nvidia, amd, host)") != std::string::npos);
}

TEST_CASE("usable_fraction outside (0, 1] is refused") {
  const std::string text = mutate(kBase, "usable_fraction = 0.92", "usable_fraction = 92");
  const std::string msg = error_of(text);
  CHECK(msg.find(at_line_of(text, "usable_fraction = 92")) == 0);
  CHECK(msg.find("'usable_fraction': must be in (0, 1]") != std::string::npos);
}

TEST_CASE("a gpu without an interconnect ('none') is refused; only the host may have none") {
  const std::string text = mutate(kBase, "{ kind = \"xgmi\", gbs = 448.0 }", "{ kind = \"none\", gbs = 0 }");
  const std::string msg = error_of(text);
  CHECK(msg.find(at_line_of(text, "kind = \"none\"")) == 0);
  CHECK(msg.find("device 'gpu-a' interconnect") != std::string::npos);
  CHECK(msg.find("'none' is only for the host") != std::string::npos);
}

TEST_CASE("visible memory beyond the datasheet size (a misplaced decimal point) is refused") {
  const std::string text = mutate(kBase, "visible_gib = 139.8", "visible_gib = 1398");
  const std::string msg = error_of(text);
  CHECK(msg.find(at_line_of(text, "visible_gib = 1398")) == 0);
  CHECK(msg.find("'visible_gib'") != std::string::npos);
}

TEST_CASE("a measured block with an unknown figure is refused and its keys listed") {
  const std::string text =
      mutate(kBase, "bf16 = 989.4\n", "bf16 = 989.4\n\n[device.measured]\nbandwith_gbs = 4250.0\ncite = \"paper\"\n");
  const std::string msg = error_of(text);
  CHECK(msg.find(at_line_of(text, "bandwith_gbs")) == 0);
  CHECK(msg.find("device 'gpu-b' measured") != std::string::npos);
  CHECK(msg.find("'bandwith_gbs': unknown key (known: read_gbs, copy_gbs, cite, fp64,") != std::string::npos);
}

TEST_CASE("a measured block with the old bandwidth_gbs is refused: copy and read bandwidth are different figures") {
  const std::string text =
      mutate(kBase, "bf16 = 989.4\n", "bf16 = 989.4\n\n[device.measured]\nbandwidth_gbs = 4250.0\ncite = \"paper\"\n");
  const std::string msg = error_of(text);
  CHECK(msg.find(at_line_of(text, "bandwidth_gbs = 4250.0")) == 0);
  CHECK(msg.find("'bandwidth_gbs': unknown key (known: read_gbs, copy_gbs,") != std::string::npos);
}

TEST_CASE("a measured block reads read_gbs and copy_gbs apart") {
  const std::string text = mutate(kBase, "bf16 = 989.4\n",
                                  "bf16 = 989.4\n\n[device.measured]\nread_gbs = 4262.0\ncopy_gbs = 4105.0\nbf16 = 821.0\ncite = \"paper\"\n");
  auto reg = load_text(text);
  REQUIRE(reg.ok());
  const auto& m = *reg->find("gpu-b")->measured;
  CHECK(*m.read_gbs == 4262.0);
  CHECK(*m.copy_gbs == 4105.0);
  CHECK(m.peaks.at("bf16") == 821.0);
}

TEST_CASE("a measured block must cite a defined source") {
  const std::string text =
      mutate(kBase, "bf16 = 989.4\n", "bf16 = 989.4\n\n[device.measured]\nread_gbs = 4250.0\ncite = \"ours\"\n");
  const std::string msg = error_of(text);
  CHECK(msg.find(at_line_of(text, "\"ours\"")) == 0);
  CHECK(msg.find("unknown source 'ours'") != std::string::npos);
}

TEST_CASE("an unsupported schema version is refused") {
  const std::string text = mutate(kBase, "schema = 1", "schema = 2");
  const std::string msg = error_of(text);
  CHECK(msg.find("kernels/DEVICES.toml:1:") == 0);
  CHECK(msg.find("unsupported schema 2") != std::string::npos);
}

TEST_CASE("an alias resolves to its device, in any case; ids still resolve and unknown names do not") {
  const std::string text = mutate(kBase, "id = \"gpu-b\"\n", "id = \"gpu-b\"\naliases = [\"b\", \"gpu-b-141gb\"]\n");
  auto reg = load_text(text);
  REQUIRE(reg.ok());
  REQUIRE(reg->resolve("b") != nullptr);
  CHECK(reg->resolve("b")->id == "gpu-b");
  CHECK(reg->resolve("GPU-B-141GB")->id == "gpu-b");
  CHECK(reg->resolve("gpu-a")->id == "gpu-a");
  CHECK(reg->resolve("gpu-c") == nullptr);
  CHECK(reg->names() == std::vector<std::string>{"b", "gpu-a", "gpu-b", "gpu-b-141gb"});
}

TEST_CASE("an alias already taken by another device is refused at the second device's aliases, naming the first") {
  std::string text = mutate(kBase, "id = \"gpu-b\"\n", "id = \"gpu-b\"\naliases = [\"big\"]\n");
  text = mutate(text, "id = \"gpu-a\"\n", "id = \"gpu-a\"\naliases = [\"a\", \"big\"]\n");
  const std::string msg = error_of(text);
  CHECK(msg.find(at_line_of(text, "aliases = [\"a\", \"big\"]")) == 0);
  CHECK(msg.find("device 'gpu-a': alias 'big' is already an alias of device 'gpu-b' (" +
                 at_line_of(text, "aliases = [\"big\"]").substr(0, at_line_of(text, "aliases = [\"big\"]").size() - 1)) !=
        std::string::npos);
}

TEST_CASE("an alias equal to another device's id is refused (the name would mean two devices)") {
  const std::string text = mutate(kBase, "id = \"gpu-b\"\n", "id = \"gpu-b\"\naliases = [\"gpu-a\"]\n");
  const std::string msg = error_of(text);
  CHECK(msg.find(at_line_of(text, "aliases = [\"gpu-a\"]")) == 0);
  CHECK(msg.find("alias 'gpu-a' is already the id of device 'gpu-a'") != std::string::npos);
}

TEST_CASE("an alias with upper case is refused (aliases match case-insensitively, so they are written lower-case)") {
  const std::string text = mutate(kBase, "id = \"gpu-b\"\n", "id = \"gpu-b\"\naliases = [\"GPU-B\"]\n");
  const std::string msg = error_of(text);
  CHECK(msg.find("alias 'GPU-B' must be lower-case") != std::string::npos);
}

TEST_CASE("every alias of the real registry resolves to its own device") {
  met::DiskTree tree(MET_SOURCE_DIR "/kernels", "kernels/");
  auto reg = load_registry(tree);
  REQUIRE(reg.ok());
  const auto* h200 = reg->resolve("h200");
  REQUIRE(h200 != nullptr);
  CHECK(h200->id == "h200-sxm");
  CHECK(reg->resolve("mi355")->id == "mi355x");
  for (const auto& d : reg->devices) {
    for (const auto& a : d.aliases) CHECK(reg->resolve(a)->id == d.id);
  }
}
