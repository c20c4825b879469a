// Report bytes do not depend on the run or on the order of tables in the kernel tree: the JSON and
// Markdown of a few (instance, device) cases, a MoE and a Gemma among them, from two runs and from
// trees whose [[device]], [[rule]], [[family]] and [[instance]] tables are shuffled.
#include <doctest/doctest.h>

#include "planner/real_tree.hpp"
#include "planner/toml_shuffle.hpp"
#include "report/render.hpp"

using met::testing::analyse;
using met::testing::Loaded;
using met::testing::shuffled_tree;

namespace {

const std::vector<std::pair<std::string, std::string>> kCases = {
    {"llama-3.1-8b-instruct", "h200-sxm"},
    {"qwen3-30b-a3b", "mi300x"},       // MoE
    {"gemma-3-27b-it", "b200"},        // Gemma: sliding + global kinds
    {"gpt-oss-20b", "h100-sxm"},       // MoE with mxfp4 experts and sinks
    {"qwen3-8b-fp8", "a100-sxm-80g"},  // fp8 on a class without fp8 MMA
};

std::string report_bytes(const Loaded& l, const std::string& instance, const std::string& device) {
  auto c = analyse(l, instance, device);
  const met::report::Provenance prov{"met circuit plan --hardware " + device + " --model " + instance};
  return met::report::render_json(c->an, prov) + met::report::render_markdown(c->an, prov) +
         met::report::render_html(c->an, prov) + met::report::render_plan(c->an, prov);
}

}  // namespace

TEST_CASE("two runs give byte-identical json, markdown and html (catches hidden state or hash-order output)") {
  const Loaded a;
  const Loaded b;
  for (const auto& instance_device : kCases) {
    const std::string& instance = instance_device.first;
    const std::string& device = instance_device.second;
    CAPTURE(instance);
    CAPTURE(device);
    const std::string first = report_bytes(a, instance, device);
    CHECK(first == report_bytes(a, instance, device));
    CHECK(first == report_bytes(b, instance, device));
  }
}

TEST_CASE("shuffled [[device]], [[rule]], [[family]] and [[instance]] tables give byte-identical reports") {
  const Loaded base;
  for (unsigned seed : {3u, 4u}) {
    CAPTURE(seed);
    const Loaded shuffled(shuffled_tree(seed));
    for (const auto& instance_device : kCases) {
      const std::string& instance = instance_device.first;
      const std::string& device = instance_device.second;
      CAPTURE(instance);
      CAPTURE(device);
      const std::string want = report_bytes(base, instance, device);
      const std::string got = report_bytes(shuffled, instance, device);
      CHECK(got.size() == want.size());
      CHECK(got == want);
    }
  }
}
