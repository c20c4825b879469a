// Tests of writing probed figures into DEVICES.toml (src/device/update.cpp), on the real file's
// text: the only bytes that change are the device's measured table and the probe's source; a GPU
// that is not the named device, or a measured table with a figure the probe does not measure, is
// refused at its line.
#include <doctest/doctest.h>

#include <algorithm>
#include <string>

#include "device/registry.hpp"
#include "device/identity.hpp"
#include "device/update.hpp"
#include "tree/disk_tree.hpp"

namespace {

using met::device::ProbedFigures;
using met::device::update_measured;

const char* kFile = "kernels/DEVICES.toml";

std::string real_text() {
  auto t = met::read_file(MET_SOURCE_DIR "/kernels/DEVICES.toml");
  REQUIRE(t.ok());
  return *t;
}

// An H200 as its driver reports it, with figures and a citation.
ProbedFigures h200() {
  ProbedFigures p;
  p.device = "h200-sxm";
  p.read_gbs = 4311.96;
  p.copy_gbs = 4105.04;
  p.bf16_tflops = 821.349;
  p.sm_count = 132;
  p.compute_major = 9;
  p.compute_minor = 0;
  p.memory_gib = 139.8;
  p.source_title = "`met circuit probe --gib 8` on NVIDIA H200 (132 SMs), 2026-12-01 10:15 UTC";
  p.source_url = "perf-data/h200-sxm/probe/20261201T101500Z.json";
  return p;
}

// `text` with the first `from` (which must be present) replaced by `to`.
std::string replaced(std::string text, const std::string& from, const std::string& to) {
  const auto at = text.find(from);
  REQUIRE_MESSAGE(at != std::string::npos, "text lacks: " << from);
  return text.replace(at, from.size(), to);
}

// The table the updater writes for h200(): 38-column comments, one decimal.
const std::string kH200Table =
    "[device.measured]\n"
    "read_gbs = 4312.0                     # streaming read (met circuit probe)\n"
    "copy_gbs = 4105.0                     # device-to-device copy, bytes read + written\n"
    "bf16 = 821.3                          # wgmma from shared memory, fp32 accumulate\n"
    "cite = \"met-h200-sxm-probe\"\n";
const std::string kH200Source =
    "\n[source.met-h200-sxm-probe]\n"
    "title = \"`met circuit probe --gib 8` on NVIDIA H200 (132 SMs), 2026-12-01 10:15 UTC\"\n"
    "url = \"perf-data/h200-sxm/probe/20261201T101500Z.json\"\n";

// The h200's measured table as the file has it, header to its last key line.
std::string old_h200_table(const std::string& text) {
  const auto at = text.find("[device.measured]\n", text.find("id = \"h200-sxm\""));
  const auto end = text.find("\n\n", at);
  REQUIRE(at != std::string::npos);
  return text.substr(at, end + 1 - at);
}

// The probe's source block as the file has it ("\n[source.met-h200-sxm-probe]\n" through its url
// line), or "" while the file carries no probe of the H200 yet.
std::string old_probe_source(const std::string& text) {
  const auto at = text.find("\n[source.met-h200-sxm-probe]\n");
  if (at == std::string::npos) return "";
  const auto url = text.find("\nurl = ", at + 1);
  REQUIRE(url != std::string::npos);
  return text.substr(at, text.find('\n', url + 1) + 1 - at);
}

}  // namespace

TEST_CASE("h200-sxm's measured table becomes the probe's and its source follows the last source (or replaces the probe's); no other byte changes") {
  const std::string text = real_text();
  auto out = update_measured(text, kFile, h200());
  REQUIRE_MESSAGE(out.ok(), (out.ok() ? "" : out.error().message));
  std::string want = replaced(text, old_h200_table(text), kH200Table);
  // A file that already carries a probe of the H200 has its source replaced where it stands.
  const std::string last_source = "[source.met-h200-measured]\ntitle = \"measured on our own H200 (met device machine)\"\nurl = \"perf-data/h200-sxm/\"\n";
  const std::string old_source = old_probe_source(text);
  want = old_source.empty() ? replaced(want, last_source, last_source + kH200Source) : replaced(want, old_source, kH200Source);
  CHECK(*out == want);
  // And it loads with those figures (the measured basis reads them).
  met::MemTree tree({{"DEVICES.toml", *out}});
  auto reg = met::device::load_registry(tree);
  REQUIRE(reg.ok());
  const auto& m = *reg->find("h200-sxm")->measured;
  CHECK(*m.read_gbs == 4312.0);
  CHECK(*m.copy_gbs == 4105.0);
  CHECK(m.peaks.at("bf16") == 821.3);
  CHECK(reg->sources.at("met-h200-sxm-probe").url == "perf-data/h200-sxm/probe/20261201T101500Z.json");
}

TEST_CASE("a second probe replaces the first's figures and source: the same bytes as probing once") {
  const std::string text = real_text();
  ProbedFigures first = h200();
  first.read_gbs = 4000;
  first.source_url = "perf-data/h200-sxm/probe/first.json";
  auto once = update_measured(text, kFile, first);
  REQUIRE(once.ok());
  auto twice = update_measured(*once, kFile, h200());
  auto direct = update_measured(text, kFile, h200());
  REQUIRE(twice.ok());
  REQUIRE(direct.ok());
  CHECK(*twice == *direct);
}

TEST_CASE("an alias names the device, and the source key is the device id's") {
  ProbedFigures p = h200();
  p.device = "H200";
  auto out = update_measured(real_text(), kFile, p);
  REQUIRE(out.ok());
  CHECK(out->find("[source.met-h200-sxm-probe]") != std::string::npos);
  CHECK(out->find("[source.met-h200-probe]") == std::string::npos);
}

TEST_CASE("a device without a measured table gets one after its last table, before the comments of what follows") {
  const std::string text = real_text();
  ProbedFigures p = h200();
  p.device = "gh200";
  p.memory_gib = 95.0;
  p.source_title = "gh200 probe";
  p.source_url = "perf-data/gh200/probe/x.json";
  auto out = update_measured(text, kFile, p);
  REQUIRE_MESSAGE(out.ok(), (out.ok() ? "" : out.error().message));
  const auto gh = out->find("id = \"gh200\"");
  const auto table = out->find("[device.measured]\n", gh);
  const auto next = out->find("# --- blackwell", gh);
  REQUIRE(table != std::string::npos);
  CHECK(table < next);
  CHECK(out->find("int8 = 1978.9\n\n[device.measured]\nread_gbs = 4312.0", gh) != std::string::npos);
  met::MemTree tree({{"DEVICES.toml", *out}});
  auto reg = met::device::load_registry(tree);
  REQUIRE(reg.ok());
  CHECK(reg->find("gh200")->measured->cite == "met-gh200-probe");
  // the other device untouched
  met::MemTree before({{"DEVICES.toml", text}});
  auto reg0 = met::device::load_registry(before);
  REQUIRE(reg0.ok());
  CHECK(reg->find("h200-sxm")->measured->cite == reg0->find("h200-sxm")->measured->cite);
}

TEST_CASE("figures of another GPU are refused: SM count, compute capability, memory") {
  const std::string text = real_text();
  SUBCASE("an H200's figures named as an H100 (same SMs and arch, 80 GB)") {
    ProbedFigures p = h200();
    p.device = "h100-sxm";
    auto out = update_measured(text, kFile, p);
    REQUIRE_FALSE(out.ok());
    CHECK(out.error().message.find("kernels/DEVICES.toml:") == 0);
    CHECK(out.error().message.find("device 'h100-sxm' has 79.1 GiB visible; the probe's GPU has 139.8 GiB: these figures are another device's") != std::string::npos);
  }
  SUBCASE("another SM count") {
    ProbedFigures p = h200();
    p.sm_count = 114;
    auto out = update_measured(text, kFile, p);
    REQUIRE_FALSE(out.ok());
    CHECK(out.error().message.find("device 'h200-sxm' has 132 SMs; the probe's GPU has 114") != std::string::npos);
  }
  SUBCASE("another compute capability") {
    ProbedFigures p = h200();
    p.compute_major = 10;
    auto out = update_measured(text, kFile, p);
    REQUIRE_FALSE(out.ok());
    CHECK(out.error().message.find("is sm_90a (compute 9.0); the probe's GPU is compute 10.0") != std::string::npos);
  }
  SUBCASE("an AMD device") {
    ProbedFigures p = h200();
    p.device = "mi300x";
    auto out = update_measured(text, kFile, p);
    REQUIRE_FALSE(out.ok());
    CHECK(out.error().message.find("is not an NVIDIA GPU") != std::string::npos);
  }
  SUBCASE("an unknown device") {
    ProbedFigures p = h200();
    p.device = "h300";
    auto out = update_measured(text, kFile, p);
    REQUIRE_FALSE(out.ok());
    CHECK(out.error().message == "kernels/DEVICES.toml: no device 'h300' (see `met circuit devices`)");
  }
}

TEST_CASE("a measured table with a figure the probe does not measure is refused at that line: its cite would change") {
  // fp8 added after the bf16 line of h200-sxm's measured table, whatever its figures are now
  const std::string real = real_text();
  const std::string table = old_h200_table(real);
  std::string with_fp8 = table;
  with_fp8.insert(table.find('\n', table.find("\nbf16 = ") + 1) + 1, "fp8 = 1500.0\n");
  const std::string text = replaced(real, table, with_fp8);
  auto out = update_measured(text, kFile, h200());
  REQUIRE_FALSE(out.ok());
  const auto line = 1 + std::count(text.begin(), text.begin() + static_cast<std::ptrdiff_t>(text.find("fp8 = 1500.0")), '\n');
  CHECK(out.error().message.find("kernels/DEVICES.toml:" + std::to_string(line) + ": [device.measured] of 'h200-sxm' holds 'fp8'") == 0);
}

TEST_CASE("quotes and backslashes in the citation are escaped, so the file still loads") {
  ProbedFigures p = h200();
  p.source_title = "a \"quoted\" \\ title";
  auto out = update_measured(real_text(), kFile, p);
  REQUIRE(out.ok());
  met::MemTree tree({{"DEVICES.toml", *out}});
  auto reg = met::device::load_registry(tree);
  REQUIRE(reg.ok());
  CHECK(reg->sources.at("met-h200-sxm-probe").title == "a \"quoted\" \\ title");
}

TEST_CASE("a GPU as its driver reports it is matched to the registry's devices (campaign and probe --identify)") {
  met::MemTree tree({{"DEVICES.toml", real_text()}});
  auto reg = met::device::load_registry(tree);
  REQUIRE(reg.ok());
  const met::device::GpuIdentity h100{"NVIDIA H100 80GB HBM3", 132, 9, 0, 79.19};
  const met::device::GpuIdentity h200{"NVIDIA H200", 132, 9, 0, 139.8};
  CHECK(met::device::devices_matching(*reg, h100) == std::vector<std::string>{"h100-sxm"});
  CHECK(met::device::devices_matching(*reg, h200) == std::vector<std::string>{"h200-sxm"});
  auto wrong = met::device::check_gpu(*reg->find("h200-sxm"), h100);
  REQUIRE_FALSE(wrong.ok());
  CHECK(wrong.error().message.find("device 'h200-sxm' has 139.8 GiB visible; NVIDIA H100 80GB HBM3 has 79.2 GiB") != std::string::npos);
  CHECK(met::device::check_gpu(*reg->find("h100-sxm"), h100).ok());
  const met::device::GpuIdentity odd{"NVIDIA Something", 7, 9, 0, 10.0};
  CHECK(met::device::devices_matching(*reg, odd).empty());
  CHECK(met::device::describe(h100) == "NVIDIA H100 80GB HBM3 (132 SMs, compute 9.0, 79.2 GiB)");
}
