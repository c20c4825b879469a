// Renderings of real analyses: the JSON parses, carries its schema and only finite numbers; the
// golden-file diff names the JSON path or the Markdown section and the values; the HTML page is
// self-contained.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>

#include "planner/real_tree.hpp"
#include "report/matrix.hpp"
#include "report/render.hpp"

using met::testing::analyse;
using met::testing::contains;
using met::testing::Loaded;
using nlohmann::json;
namespace estimate = met::estimate;
namespace report = met::report;

namespace {

// JSON paths of every number and every null in a document.
void walk(const json& j, const std::string& path, std::vector<std::string>& bad_numbers, std::vector<std::string>& nulls,
          int& numbers) {
  if (j.is_object()) {
    for (const auto& [k, v] : j.items()) walk(v, path + "/" + k, bad_numbers, nulls, numbers);
  } else if (j.is_array()) {
    for (std::size_t i = 0; i < j.size(); ++i) walk(j[i], path + "/" + std::to_string(i), bad_numbers, nulls, numbers);
  } else if (j.is_number()) {
    ++numbers;
    if (!std::isfinite(j.get<double>())) bad_numbers.push_back(path);
  } else if (j.is_null()) {
    nulls.push_back(path);
  }
}

const std::vector<std::pair<std::string, std::string>> kCases = {
    {"llama-3.1-8b-instruct", "h200-sxm"},  {"deepseek-v3", "h100-sxm"},      {"llama-3.2-1b-instruct", "host-cpu"},
    {"gpt-oss-20b", "mi300x"},              {"qwen3-8b-fp8", "a100-sxm-80g"}, {"nemotron-3-nano-30b-a3b", "b200"},
    {"gemma-4-31b-it-nvfp4", "rtx-pro-6000"},
};

}  // namespace

TEST_CASE("json reports parse, carry schema met-report/1 and only finite numbers (catches NaN or inf written as null)") {
  const Loaded l;
  for (const auto& instance_device : kCases) {
    const std::string& instance = instance_device.first;
    const std::string& device = instance_device.second;
    CAPTURE(instance);
    CAPTURE(device);
    auto c = analyse(l, instance, device);
    const std::string text = report::render_json(c->an, {"met circuit plan --hardware " + device + " --model " + instance});
    const json j = json::parse(text, nullptr, false);
    REQUIRE_FALSE(j.is_discarded());
    CHECK(j["schema"] == "met-report/1");
    CHECK(j["model"]["id"] == instance);
    CHECK(j["device"]["id"] == device);
    CHECK(j["plan"]["digest"] == c->an.plan.digest);
    CHECK(j["generated_by"] == "met circuit plan --hardware " + device + " --model " + instance);
    std::vector<std::string> bad, nulls;
    int numbers = 0;
    walk(j, "", bad, nulls, numbers);
    CHECK(numbers > 100);
    CHECK(bad.empty());
    // The one legitimate null: no smallest TP.
    for (const auto& p : nulls) {
      CAPTURE(p);
      CHECK(p == "/memory/smallest_tp");
    }
    // Full precision: the weight bytes round-trip exactly.
    CHECK(j["key"]["weight_bytes"].get<double>() == c->an.key.weight_bytes);
    CHECK(j["requested"]["ceiling_s"].get<double>() == c->an.requested.ceiling_s);
    CHECK(j["decode"].size() == c->an.decode.size());
    CHECK(j["prefill"].size() == c->an.prefill.size());
  }
}

TEST_CASE("diff of a changed json number names the json path and the old and new values") {
  const Loaded l;
  auto c = analyse(l, "llama-3.1-8b-instruct", "h200-sxm");
  const std::string before = report::render_json(c->an, {"test"});
  json j = json::parse(before);
  const json old_value = j["key"]["weight_bytes"];
  j["key"]["weight_bytes"] = 17000000000.0;
  const std::string after = j.dump(1) + "\n";
  REQUIRE(after != before);

  CHECK(report::diff_file("a--b.json", before, before).empty());
  const auto diffs = report::diff_file("a--b.json", before, after);
  REQUIRE(diffs.size() == 1);
  CAPTURE(diffs[0]);
  CHECK(contains(diffs[0], "a--b.json"));
  CHECK(contains(diffs[0], "/key/weight_bytes"));
  CHECK(contains(diffs[0], old_value.dump() + " -> " + json(17000000000.0).dump()));
}

TEST_CASE("diff of a json array element names its index") {
  const Loaded l;
  auto c = analyse(l, "llama-3.1-8b-instruct", "h200-sxm");
  const std::string before = report::render_json(c->an, {"test"});
  json j = json::parse(before);
  const json old_value = j["decode"][2]["ceiling_s"];
  j["decode"][2]["ceiling_s"] = 1.5;
  const auto diffs = report::diff_file("x.json", before, j.dump(1) + "\n");
  REQUIRE(diffs.size() == 1);
  CAPTURE(diffs[0]);
  CHECK(contains(diffs[0], "/decode/2/ceiling_s"));
  CHECK(contains(diffs[0], old_value.dump() + " -> 1.5"));
}

TEST_CASE("diff of markdown names the section heading of the changed line and both lines") {
  const Loaded l;
  auto c = analyse(l, "llama-3.1-8b-instruct", "h200-sxm");
  const std::string before = report::render_markdown(c->an, {"test"});
  const auto at = before.find("| runtime reservation |");
  REQUIRE(at != std::string::npos);
  const auto eol = before.find('\n', at);
  const std::string old_line = before.substr(at, eol - at);
  std::string after = before;
  after.replace(at, eol - at, "| runtime reservation | 2.00 GB |");

  const auto diffs = report::diff_file("a--b.md", before, after);
  REQUIRE(diffs.size() == 1);
  CAPTURE(diffs[0]);
  CHECK(contains(diffs[0], "a--b.md"));
  CHECK(contains(diffs[0], "section '## Memory fit'"));
  CHECK(contains(diffs[0], old_line));
  CHECK(contains(diffs[0], "2.00 GB"));
}

TEST_CASE("compare_outputs reports a golden file no longer produced and a new file missing from the golden set") {
  const std::map<std::string, std::string> expected = {{"a.md", "# A\nsame\n"}, {"gone.md", "# G\n"}};
  const std::map<std::string, std::string> actual = {{"a.md", "# A\nsame\n"}, {"new.md", "# N\n"}};
  const auto diffs = report::compare_outputs(expected, actual);
  REQUIRE(diffs.size() == 2);
  int gone = 0, fresh = 0;
  for (const auto& d : diffs) {
    CAPTURE(d);
    if (contains(d, "gone.md")) {
      ++gone;
      CHECK(contains(d, "no longer produced"));
    }
    if (contains(d, "new.md")) {
      ++fresh;
      CHECK(contains(d, "missing"));
    }
    CHECK_FALSE(contains(d, "a.md:"));
  }
  CHECK(gone == 1);
  CHECK(fresh == 1);
  CHECK(report::compare_outputs(expected, expected).empty());

  // A changed file among equal ones is named with its section.
  auto changed = expected;
  changed["a.md"] = "# A\nother\n";
  const auto one = report::compare_outputs(expected, changed);
  REQUIRE(one.size() == 1);
  CHECK(contains(one[0], "a.md"));
  CHECK(contains(one[0], "section '# A'"));
}

TEST_CASE("the html page is self-contained: no scripts, no external resources, only the svg namespace") {
  const Loaded l;
  for (const auto& instance_device : kCases) {
    const std::string& instance = instance_device.first;
    const std::string& device = instance_device.second;
    CAPTURE(instance);
    CAPTURE(device);
    auto c = analyse(l, instance, device);
    std::string html = report::render_html(c->an, {"met circuit plan --format html"});
    CHECK(html.rfind("<!DOCTYPE html>", 0) == 0);
    CHECK(contains(html, "</html>"));
    CHECK(contains(html, "<svg"));
    CHECK_FALSE(contains(html, "<script"));
    CHECK_FALSE(contains(html, "<link"));
    CHECK_FALSE(contains(html, "src="));
    // Remove the SVG namespace; nothing else may point at the network.
    const std::string ns = "http://www.w3.org/2000/svg";
    for (auto p = html.find(ns); p != std::string::npos; p = html.find(ns)) html.erase(p, ns.size());
    CHECK_FALSE(contains(html, "http://"));
    CHECK_FALSE(contains(html, "https://"));
    CHECK_FALSE(contains(html, "//cdn"));
  }
}

TEST_CASE("the html draws step time against C and T: ceiling and prediction with a point per case, measurements as points") {
  const Loaded l;
  auto c = analyse(l, "llama-3.1-8b-instruct", "h200-sxm");
  auto count = [](const std::string& h, const std::string& what) {
    std::size_t n = 0;
    for (auto p = h.find(what); p != std::string::npos; p = h.find(what, p + 1)) ++n;
    return n;
  };
  // The step charts only (the roofline has its own points and lines).
  auto step_charts = [](const std::string& h) {
    std::string out;
    for (auto p = h.find("class=\"step-chart\""); p != std::string::npos; p = h.find("class=\"step-chart\"", p + 1))
      out += h.substr(p, h.find("</svg>", p) - p);
    return out;
  };
  const std::string page = report::render_html(c->an, {"met circuit plan --format html"});
  const std::string plain = step_charts(page);
  CHECK(count(plain, "class=\"step-chart\"") == 2);
  CHECK(count(plain, "<polyline") == 4);  // ceiling and prediction, decode and prefill
  CHECK(count(plain, "<circle") == 0);    // nothing measured, no measured legend either
  // the decode ceiling line has one point per case of the ladder
  const std::string key = "<polyline points=\"";
  const auto at = plain.find(key);
  REQUIRE(at != std::string::npos);
  const auto from = at + key.size();
  const auto pts = plain.substr(from, plain.find('"', from) - from);
  CHECK(static_cast<std::size_t>(std::count(pts.begin(), pts.end(), ',')) == c->an.decode.size());
  // a measured decode case adds its point, the legend's, and the ladder's prediction and measured columns
  c->an.decode[0].measured_s = 2 * c->an.decode[0].prediction_s;
  c->an.decode[0].measured_source = "campaign.json, 20261201T000000Z";
  const std::string measured_page = report::render_html(c->an, {"met circuit plan --format html"});
  CHECK(count(step_charts(measured_page), "<circle") == 2);
  CHECK(contains(measured_page, "<th>prediction</th><th>measured</th>"));
  CHECK_FALSE(contains(page, "<th>measured</th>"));
}

TEST_CASE("the html roofline: a point at the ceiling and one at the prediction per group with FLOPs and bytes, under the roofs") {
  const Loaded l;
  auto c = analyse(l, "llama-3.1-8b-instruct", "h200-sxm");
  std::size_t groups = 0;
  for (const auto& g : c->an.groups) groups += g.cost.flops > 0 && g.cost.bytes() > 0 && g.cost.seconds > 0 ? 1 : 0;
  REQUIRE(groups > 0);
  auto count = [](const std::string& h, const std::string& what) {
    std::size_t n = 0;
    for (auto p = h.find(what); p != std::string::npos; p = h.find(what, p + 1)) ++n;
    return n;
  };
  const std::string html = report::render_html(c->an, {"met circuit plan --format html"});
  CHECK(count(html, "class=\"roofline\"") == 1);
  CHECK(count(html, "class=\"roof\"") >= 1);
  CHECK(count(html, "<circle class=\"ceiling\"") == groups);
  CHECK(count(html, "<circle class=\"prediction\"") == groups);
  CHECK(count(html, "<circle class=\"measured\"") == 0);
  c->an.requested.measured_s = 2 * c->an.requested.prediction_s;
  CHECK(count(report::render_html(c->an, {"met circuit plan --format html"}), "<circle class=\"measured\"") == 1);
}

TEST_CASE("markdown names the basis, the digest and the generating command") {
  const Loaded l;
  auto c = analyse(l, "llama-3.1-8b-instruct", "h200-sxm");
  const std::string md = report::render_markdown(c->an, {"met circuit plan --hardware h200-sxm --model llama-3.1-8b-instruct"});
  CHECK(contains(md, "generated by `met circuit plan --hardware h200-sxm --model llama-3.1-8b-instruct`"));
  CHECK(contains(md, c->an.plan.digest));
  CHECK(contains(md, "4800 GB/s (datasheet"));
  CHECK(contains(md, "measured on our device ("));
  CHECK(contains(md, "(`--basis measured` uses them)"));
  for (const char* heading : {"## Key figures", "## Fused plan", "## Gaps", "## Port list", "## Formats", "## Tensor-core policy",
                              "## Decode", "## Prefill", "## Tensor parallelism", "## Memory fit"}) {
    CHECK_MESSAGE(contains(md, std::string("\n") + heading), heading);
  }
}

TEST_CASE("markdown words key figures and fit verdicts from the analysis (llama 8b, llama 70b, deepseek-v3, host-cpu)") {
  const Loaded l;
  {
    estimate::Options opt;
    opt.basis = estimate::BasisChoice::datasheet;
    auto c = analyse(l, "llama-3.1-8b-instruct", "h200-sxm", opt);
    const auto md = report::render_markdown(c->an, {"test"});
    CHECK(contains(md, "| weights | 16.06 GB"));
    CHECK(contains(md, "| weights read per decode step (C = 1) | 15.01 GB |"));
    CHECK(contains(md, "| KV cache per token | 131072 bytes (bf16) |"));
    CHECK(contains(md, "4800 GB/s (datasheet"));
  }
  {
    auto c = analyse(l, "llama-3.1-70b-instruct", "h100-sxm");
    REQUIRE(c->an.fit.smallest_tp.has_value());
    CHECK(contains(report::render_markdown(c->an, {"test"}), "does not fit: needs "));
    CHECK(contains(report::render_markdown(c->an, {"test"}), "; fits at TP 2"));
  }
  {
    auto c = analyse(l, "deepseek-v3", "h100-sxm");
    const auto md = report::render_markdown(c->an, {"test"});
    CHECK(contains(md, "does not fit"));
    if (c->an.fit.devices_that_fit.empty()) {
      CHECK(contains(md, "no TP degree or listed device holds it"));
    } else {
      std::string list;
      for (const auto& d : c->an.fit.devices_that_fit) list += (list.empty() ? "" : ", ") + d;
      CHECK(contains(md, "; fits on " + list));
    }
  }
  {
    auto c = analyse(l, "llama-3.2-1b-instruct", "host-cpu");
    CHECK(contains(report::render_markdown(c->an, {"test"}), "Not applicable: host-cpu has no device interconnect"));
  }
}

TEST_CASE("diff of a removed or added json key names the path and says absent") {
  const std::string before = "{\"a\": {\"b\": 1, \"c\": 2}}\n";
  const std::string after = "{\"a\": {\"b\": 1, \"d\": 3}}\n";
  const auto diffs = report::diff_file("k.json", before, after);
  REQUIRE(diffs.size() == 2);
  std::string all = diffs[0] + "\n" + diffs[1];
  CAPTURE(all);
  CHECK(contains(all, "/a/c: 2 -> (absent)"));
  CHECK(contains(all, "/a/d: (absent) -> 3"));
}

TEST_CASE("an AMD plan names its units matrix core and vector ALU, an NVIDIA plan keeps the unit ids (catches CUDA wording on mi355x)") {
  const Loaded l;
  auto amd = analyse(l, "llama-3.1-8b-instruct", "mi355x");
  const auto md = report::render_markdown(amd->an, {"test"});
  CHECK(contains(md, "| matrix core |"));
  CHECK(contains(md, "| vector ALU |"));  // decode attention
  CHECK_FALSE(contains(md, "| tensor_core |"));
  CHECK_FALSE(contains(md, "| cuda_core |"));
  CHECK_FALSE(contains(md, "CUDA cores"));
  auto nv = analyse(l, "llama-3.1-8b-instruct", "h200-sxm");
  CHECK(contains(report::render_markdown(nv->an, {"test"}), "| cuda_core |"));
}

TEST_CASE("MATRIX.md has a coverage table at C = 16 (100% where no op is a gap, the gap ops by share where some are), MATRIX.html a heat map") {
  const Loaded l;
  report::MatrixSpec spec;
  spec.devices = {"h200-sxm"};
  spec.instances = {"llama-3.1-8b-instruct", "qwen3-30b-a3b", "gpt-oss-20b", "deepseek-v3"};
  auto files = report::build_matrix(l.lib, spec);
  REQUIRE_MESSAGE(files.ok(), (files.ok() ? "" : files.error().message));
  const std::string& md = files->at("MATRIX.md");
  const auto at = md.find("## Coverage at C = 16");
  REQUIRE(at != std::string::npos);
  const std::string table = md.substr(at, md.find("## Port lists") - at);
  CHECK(contains(table, "| llama-3.1-8b-instruct | 100.0% |"));
  CHECK(contains(table, "| qwen3-30b-a3b | 100.0% |"));  // bf16 experts: common/moe.cuh
  CHECK(contains(table, "| gpt-oss-20b | 100.0% |"));    // MXFP4 experts, biases: common/moe.cuh, gemv.cuh, gemm_mma.cuh
  // deepseek-v3's experts (block-scaled fp8, a sigmoid router) have no hopper kernel: its coverage is
  // below 100% and names moe_gate_up first
  const auto row = table.find("| deepseek-v3 | ");
  REQUIRE(row != std::string::npos);
  const std::string cell = table.substr(row, table.find('\n', row) - row);
  CAPTURE(cell);
  CHECK_FALSE(contains(cell, "100.0%"));
  CHECK(contains(cell, "%; moe_gate_up "));
  CHECK(cell.find("moe_gate_up") < cell.find("moe_down"));
  // MATRIX.html draws the same matrix as a heat map: one cell per model x device
  const std::string& html = files->at("MATRIX.html");
  CHECK(contains(html, "class=\"heat-map\""));
  std::size_t rects = 0;
  for (auto p = html.find("<rect"); p != std::string::npos; p = html.find("<rect", p + 1)) ++rects;
  CHECK(rects == 4);
  CHECK_FALSE(contains(html, "<script"));
}

TEST_CASE(
    "hopper's fp8 GEMM on bf16 activations is W8A8 and says it quantises them, in the markdown, html and json formats (catches "
    "'native (fp8, gemm_fp8_wgmma)' with no word on the activations)") {
  // The fp8 wgmma body is not written yet: a tree whose hopper sources define it, as a class that
  // has it will.
  const Loaded l([] {
    auto t = met::testing::real_tree();
    std::string& src = t.files()["hopper/gemm_wgmma.cuh"];
    const std::string close = "#endif  // MET_HAS_WGMMA && MET_HAS_TMA";
    REQUIRE(src.find(close) != std::string::npos);
    src.insert(src.find(close), "MET_ENTRY(gemm_fp8_wgmma) { gemm_wgmma_slice(a, slice, smem); }\n");
    return t;
  }());
  auto c = analyse(l, "qwen3-8b-fp8", "h200-sxm");
  const estimate::FormatRow* gate_up = nullptr;
  for (const auto& f : c->an.formats)
    if (contains(f.node, "linear:gate_up")) gate_up = &f;
  REQUIRE(gate_up != nullptr);
  CAPTURE(gate_up->prefill);
  CAPTURE(gate_up->decode);
  CHECK(contains(gate_up->prefill, "W8A8 native (fp8, gemm_fp8_wgmma; activations quantised to fp8-e4m3 on the fly)"));
  CHECK(contains(gate_up->decode, "W8A16 emulate (bf16, "));  // the gemv expands weights and keeps bf16 activations
  CHECK_FALSE(contains(gate_up->decode, "quantised"));
  CHECK(gate_up->act == "bf16");
  const std::string row = "| " + gate_up->node + " | fp8-e4m3 | bf16 |";
  CHECK(contains(report::render_markdown(c->an, {"test"}), row));
  CHECK(contains(report::render_html(c->an, {"test"}), "activations quantised to fp8-e4m3 on the fly"));
  const json j = json::parse(report::render_json(c->an, {"test"}));
  bool found = false;
  for (const auto& f : j["formats"]) {
    if (f["node"] != gate_up->node) continue;
    found = true;
    CHECK(f["prefill_exec"]["path"] == "W8A8");
    CHECK(f["prefill_exec"]["act"] == "bf16");
    CHECK(f["prefill_exec"]["act_math"] == "fp8-e4m3");
    CHECK(f["prefill_exec"]["quantizes_act"] == true);
    CHECK(f["prefill_rule"] == "gemm_fp8_wgmma");
    CHECK(f["decode_exec"]["path"] == "W8A16");
    CHECK(f["decode_exec"]["quantizes_act"] == false);
  }
  CHECK(found);
}

TEST_CASE(
    "an NVFP4 checkpoint planned as declared is W4A4: no weight-only path takes its quantised nodes (catches W4A4 planned as "
    "W4A16)") {
  const Loaded l;
  for (const char* device : {"h200-sxm", "b200"}) {
    CAPTURE(device);
    auto c = analyse(l, "gemma-4-31b-it-nvfp4", device, {}, /*declared=*/true);
    int quantised = 0;
    for (const auto& f : c->an.formats) {
      if (f.weight != "nvfp4") continue;
      ++quantised;
      CAPTURE(f.node);
      CHECK(f.act == "nvfp4");
      REQUIRE(f.decode_exec.has_value());
      REQUIRE(f.prefill_exec.has_value());
      CHECK(f.decode_exec->path == "W4A4");
      CHECK(f.prefill_exec->path == "W4A4");
      CHECK_FALSE(contains(f.decode + f.prefill, "W4A16"));
    }
    CHECK(quantised > 0);
    // No class has a W4A4 kernel yet: the port list asks for one by its pair.
    bool asked = false;
    for (const auto& p : c->an.ports) asked = asked || p.item.kernel == "(a nvfp4 x nvfp4 kernel)";
    CHECK(asked);
  }
}

TEST_CASE(
    "an AMD report's tensor-core findings and html legend name matrix cores and vector ALUs (catches 'tensor cores' or CUDA "
    "wording in a cdna3 finding)") {
  const Loaded l;
  auto amd = analyse(l, "gpt-oss-20b", "mi300x");
  REQUIRE_FALSE(amd->an.tc_audit.empty());
  for (const auto& f : amd->an.tc_audit) {
    CAPTURE(f.message);
    CHECK(contains(f.message, "wants matrix cores from"));
    CHECK_FALSE(contains(f.message, "tensor cores"));
    CHECK_FALSE(contains(f.message, "cuda_core"));
  }
  const std::string html = report::render_html(amd->an, {"test"});
  CHECK(contains(html, "kernels on vector ALUs or memory-bound; blue: kernels on matrix cores"));
  for (const auto& text : {html, report::render_markdown(amd->an, {"test"}), report::render_json(amd->an, {"test"})}) {
    CHECK_FALSE(contains(text, "CUDA"));
    CHECK_FALSE(contains(text, "tensor cores"));
  }
  auto nv = analyse(l, "gpt-oss-20b", "h200-sxm");
  CHECK(contains(report::render_html(nv->an, {"test"}), "kernels on CUDA cores or memory-bound; blue: kernels on tensor cores"));
}
