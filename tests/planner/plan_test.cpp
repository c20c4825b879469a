// The planner on the checked-in kernel tree and on mutations of it (a MemTree snapshot edited in
// memory): same class, same digest; determinism of the plan over runs and over shuffled TOML table
// order; the build-vs-device refusal; a deleted kernel becoming gaps and a port item; fp8 never
// upcast. (Report-level determinism is in tests/report/determinism_test.cpp.)
#include <doctest/doctest.h>

#include <algorithm>
#include <map>
#include <set>

#include "planner/real_tree.hpp"
#include "planner/toml_shuffle.hpp"

using met::MemTree;
using met::testing::contains;
using met::testing::Loaded;
using met::testing::plan_of;
using met::testing::real_tree;
using met::testing::shuffle_tables;
using met::testing::shuffled_tree;
using met::testing::split_tables;
namespace planner = met::planner;

namespace {

// Every plan of one (instance, device) at decode 1, batch 16 and prefill 4096, as canonical text.
std::string plans_text(const Loaded& l, const std::string& instance, const std::string& device) {
  const auto graph = l.graph(instance);
  const auto target = l.target(device);
  std::string out;
  for (auto [mode, rows] : {std::pair{planner::Mode::decode, std::int64_t{1}}, std::pair{planner::Mode::batch, std::int64_t{16}},
                            std::pair{planner::Mode::prefill, std::int64_t{4096}}}) {
    const auto p = plan_of(l, target, graph, mode, rows);
    out += p.digest + "\n" + p.canonical;
  }
  return out;
}

// Replaces the `instructions = [...]` line of one device in DEVICES.toml.
void set_instructions(MemTree& tree, const std::string& device, const std::string& list) {
  std::string& text = tree.files().at("DEVICES.toml");
  const auto at = text.find("id = \"" + device + "\"");
  REQUIRE(at != std::string::npos);
  const auto line = text.find("instructions = [", at);
  REQUIRE(line != std::string::npos);
  const auto eol = text.find('\n', line);
  text.replace(line, eol - line, "instructions = " + list);
}

const std::vector<std::pair<std::string, std::string>> kShuffleCases = {
    {"llama-3.1-8b-instruct", "h200-sxm"},
    {"qwen3-30b-a3b", "mi300x"},         // MoE
    {"gemma-3-27b-it", "b200"},          // Gemma: sliding + global kinds
    {"gpt-oss-20b", "h100-sxm"},         // MoE with mxfp4 experts and sinks
    {"qwen3-8b-fp8", "a100-sxm-80g"},    // fp8 on a class without fp8 MMA
};

}  // namespace

TEST_CASE("the table splitter keeps sub-tables and trailing comments with their [[device]]") {
  const std::string text =
      "schema = 1\n[guard]\nA = \"a\"\n\n[[device]]\nid = \"x\"\n[device.peaks]\nfp32 = 1.0\n# next\n"
      "[[device]]\nid = \"y\"\n[device.peaks]\nfp32 = 2.0\n[other]\nk = 1";
  const auto t = split_tables(text, "device");
  CHECK(t.head == "schema = 1\n[guard]\nA = \"a\"\n\n");
  REQUIRE(t.blocks.size() == 2);
  CHECK(t.blocks[0] == "[[device]]\nid = \"x\"\n[device.peaks]\nfp32 = 1.0\n# next\n");
  CHECK(t.blocks[1] == "[[device]]\nid = \"y\"\n[device.peaks]\nfp32 = 2.0\n");
  CHECK(t.tail == "[other]\nk = 1\n");
  const std::string s = shuffle_tables(text, "device", 7);
  CHECK(s == t.head + t.blocks[1] + t.blocks[0] + t.tail);
}

TEST_CASE("devices of one class share the plan digest (catches the device id in the digest)") {
  const Loaded l;
  const auto graph = l.graph("llama-3.1-8b-instruct");
  const auto h100 = l.target("h100-sxm");
  const auto h200 = l.target("h200-sxm");
  std::set<std::string> digests;
  for (auto mode_rows : {std::pair{planner::Mode::decode, std::int64_t{1}}, std::pair{planner::Mode::batch, std::int64_t{16}},
                         std::pair{planner::Mode::prefill, std::int64_t{4096}}}) {
    const planner::Mode mode = mode_rows.first;
    const std::int64_t rows = mode_rows.second;
    CAPTURE(rows);
    const auto a = plan_of(l, h100, graph, mode, rows);
    const auto b = plan_of(l, h200, graph, mode, rows);
    CHECK(a.device == "h100-sxm");
    CHECK(b.device == "h200-sxm");
    CHECK(a.klass == "hopper");
    CHECK(a.digest.size() == 64);
    CHECK(a.digest == b.digest);
    CHECK(a.canonical == b.canonical);
    digests.insert(a.digest);
  }
  CHECK(digests.size() == 3);  // mode and rows are part of the digest
}

TEST_CASE("two runs give byte-identical plans (catches hidden state or hash-order output)") {
  const Loaded a;
  const Loaded b;
  for (const auto& instance_device : kShuffleCases) {
    const std::string& instance = instance_device.first;
    const std::string& device = instance_device.second;
    CAPTURE(instance);
    CAPTURE(device);
    const std::string first = plans_text(a, instance, device);
    CHECK(first == plans_text(a, instance, device));
    CHECK(first == plans_text(b, instance, device));
  }
}

TEST_CASE("shuffled [[device]], [[rule]], [[family]] and [[instance]] order gives byte-identical plans") {
  const Loaded base;
  for (unsigned seed : {1u, 2u}) {
    CAPTURE(seed);
    const Loaded shuffled(shuffled_tree(seed));
    CHECK(shuffled.lib.registry.ids() == base.lib.registry.ids());
    CHECK(shuffled.lib.instance_ids() == base.lib.instance_ids());
    for (const auto& instance_device : kShuffleCases) {
      const std::string& instance = instance_device.first;
      const std::string& device = instance_device.second;
      CAPTURE(instance);
      CAPTURE(device);
      const auto rules_a = base.target(device).rules;
      const auto rules_b = shuffled.target(device).rules;
      REQUIRE(rules_a.rules.size() == rules_b.rules.size());
      for (std::size_t i = 0; i < rules_a.rules.size(); ++i) CHECK(rules_a.rules[i].id == rules_b.rules[i].id);
      CHECK(plans_text(shuffled, instance, device) == plans_text(base, instance, device));
    }
  }
}

TEST_CASE("a device claiming an instruction its class compiles out is refused") {
  Loaded l([] {
    MemTree t = real_tree();
    set_instructions(t, "a100-sxm-80g", "[\"mma_sync\", \"cp_async\", \"wgmma\"]");
    return t;
  }());
  auto t = planner::resolve_target(l.lib, "a100-sxm-80g");
  REQUIRE_FALSE(t.ok());
  const std::string& msg = t.error().message;
  CAPTURE(msg);
  CHECK(contains(msg, "a100-sxm-80g"));
  CHECK(contains(msg, "wgmma"));
  CHECK(contains(msg, "ampere"));
  CHECK(contains(msg, "DEVICES.toml:"));
  // Only the mutated device is refused.
  CHECK(planner::resolve_target(l.lib, "l40s").ok());
  CHECK(planner::resolve_target(l.lib, "h200-sxm").ok());
}

TEST_CASE("a device lacking an instruction its class compiles in is refused") {
  Loaded l([] {
    MemTree t = real_tree();
    set_instructions(t, "h100-sxm", "[\"mma_sync\", \"cp_async\", \"tma\", \"fp8_mma\"]");
    return t;
  }());
  auto t = planner::resolve_target(l.lib, "h100-sxm");
  REQUIRE_FALSE(t.ok());
  const std::string& msg = t.error().message;
  CAPTURE(msg);
  CHECK(contains(msg, "h100-sxm"));
  CHECK(contains(msg, "wgmma"));
  CHECK(contains(msg, "hopper"));
  CHECK(planner::resolve_target(l.lib, "h200-sxm").ok());
}

TEST_CASE("an unknown device is an error listing the known ids") {
  const Loaded l;
  auto t = planner::resolve_target(l.lib, "h300-sxm");
  REQUIRE_FALSE(t.ok());
  CHECK(contains(t.error().message, "'h300-sxm'"));
  CHECK(contains(t.error().message, "h200-sxm"));
  CHECK(contains(t.error().message, "mi300x"));
}

TEST_CASE("a device typo suggests the device id, also when only an alias is near (an alias would name it twice)") {
  const Loaded l;
  auto t = planner::resolve_target(l.lib, "grace-hoper");
  REQUIRE_FALSE(t.ok());
  CHECK(contains(t.error().message, "unknown device 'grace-hoper': did you mean 'gh200'?"));
  auto m = planner::resolve_target(l.lib, "mi355x-oam");
  REQUIRE_FALSE(m.ok());
  CHECK(contains(m.error().message, "did you mean 'mi355x'? (known: "));
  auto alias = planner::resolve_target(l.lib, "H200");
  REQUIRE(alias.ok());
  CHECK(alias->device->id == "h200-sxm");
}

TEST_CASE("deleting a kernel's source turns its groups into gaps and puts it in the port list") {
  const Loaded base;
  const auto graph = base.graph("llama-3.1-8b-instruct");
  const auto before = plan_of(base, base.target("h200-sxm"), graph, planner::Mode::decode, 1);
  CHECK(before.gap_groups == 0);
  REQUIRE(!before.scopes.empty());

  // The module stays listed in HARDWARE.toml (it must exist) but defines nothing any more.
  Loaded cut([] {
    MemTree t = real_tree();
    REQUIRE(t.files().count("common/gemv.cuh"));
    t.files()["common/gemv.cuh"] = "#pragma once\n// emptied by the test\n";
    return t;
  }());
  const auto target = cut.target("h200-sxm");
  CHECK_FALSE(target.availability.status("met_gemv").available);
  CHECK(contains(target.availability.status("met_gemv").why, "not defined"));
  const auto after = plan_of(cut, target, graph, planner::Mode::decode, 1);
  CHECK(after.gap_groups > 0);
  CHECK(after.digest != before.digest);

  // Every matrix node a gemv rule covered before is a gap now; groups of other families are untouched.
  int gemv_nodes = 0;
  for (std::size_t s = 0; s < before.scopes.size(); ++s) {
    const auto& bs = before.scopes[s];
    const auto& as = after.scopes[s];
    REQUIRE(as.name == bs.name);
    auto group_of = [](const planner::Scope& sc, int node) -> const planner::Group& {
      for (const auto& g : sc.groups) {
        if (std::find(g.nodes.begin(), g.nodes.end(), node) != g.nodes.end()) return g;
      }
      FAIL("node in no group");
      return sc.groups.front();
    };
    for (int i = 0; i < static_cast<int>(bs.nodes.size()); ++i) {
      CAPTURE(bs.name);
      CAPTURE(i);
      const auto& was = group_of(bs, i);
      const auto& now = group_of(as, i);
      bool uses_gemv = false;
      for (const auto& k : was.kernels) uses_gemv = uses_gemv || k.rfind("met_gemv", 0) == 0;
      const bool linear = bs.nodes[static_cast<std::size_t>(i)].op == "linear";
      if (uses_gemv && linear) {
        ++gemv_nodes;
        CHECK(now.gap);
        CHECK(now.nodes.size() == 1);
        CHECK(now.rule.empty());
        CHECK(now.kernels.empty());
        REQUIRE_FALSE(now.blocked.empty());
        CHECK(now.blocked.front().kernels.front().rfind("met_gemv", 0) == 0);
        CHECK(contains(now.blocked.front().why, "not defined"));
      } else if (uses_gemv) {
        // The norms, rope, cache append and residuals it fused fall back to their own kernels.
        for (const auto& k : now.kernels) CHECK(k.rfind("met_gemv", 0) != 0);
      } else {
        CHECK(now.gap == was.gap);
        CHECK(now.rule == was.rule);
      }
    }
  }
  CHECK(gemv_nodes == 5);  // qkv, o, gate_up, down, lm_head

  bool named = false;
  for (const auto& p : after.ports) {
    if (p.kernel.find("met_gemv") == std::string::npos) continue;
    named = true;
    CAPTURE(p.kernel);
    CHECK(contains(p.why, "not defined"));
    CHECK(contains(p.why, "hopper"));
    CHECK_FALSE(p.rule.empty());
    CHECK(p.nodes >= 1);
  }
  CHECK(named);
  // The qkv projection runs 32 times per step: its port item counts every layer.
  bool qkv = false;
  for (const auto& p : after.ports) {
    if (p.op == "linear:qkv") {
      qkv = true;
      CHECK(p.nodes == 32);
    }
  }
  CHECK(qkv);
}

TEST_CASE("fp8 weights on a device without fp8 MMA plan as emulation or no path, never bf16") {
  const Loaded l;
  const auto graph = l.graph("qwen3-8b-fp8");
  const auto target = l.target("a100-sxm-80g");
  for (auto mode_rows : {std::pair{planner::Mode::decode, std::int64_t{1}}, std::pair{planner::Mode::batch, std::int64_t{16}},
                         std::pair{planner::Mode::prefill, std::int64_t{4096}}}) {
    const planner::Mode mode = mode_rows.first;
    const std::int64_t rows = mode_rows.second;
    CAPTURE(rows);
    const auto plan = plan_of(l, target, graph, mode, rows);
    int fp8_nodes = 0;
    for (const auto& s : plan.scopes) {
      for (const auto& g : s.groups) {
        for (int idx : g.nodes) {
          const auto& n = s.nodes[static_cast<std::size_t>(idx)];
          if (n.op != "linear" || n.role == "lm_head") continue;
          CAPTURE(s.name);
          CAPTURE(n.role);
          ++fp8_nodes;
          REQUIRE(n.weight_format.has_value());
          CHECK(*n.weight_format == met::Format::fp8_e4m3);
          REQUIRE(g.exec.has_value());
          CHECK(g.exec->weight == "fp8-e4m3");
          CHECK(g.exec->how != "native");
          CHECK((g.exec->how == "emulate" || g.exec->how == "no path" || g.exec->how == "no kernel"));
        }
      }
    }
    CHECK(fp8_nodes == 4);  // qkv, o, gate_up, down of the one layer kind
    CHECK(plan.canonical.find("fp8-e4m3xbf16:native") == std::string::npos);
  }
}

// docs/arch/overview.md, Devices and classes: every device of a class gets the same plan digest. The
// availability why of a guarded-out kernel names the device ("which mi300x lacks"); the canonical text must leave it out.
TEST_CASE("every golden instance has one digest per class, whichever device of the class plans it") {
  const Loaded l;
  std::map<std::string, std::vector<std::string>> by_class;
  for (const auto& d : l.lib.registry.devices) by_class[d.klass].push_back(d.id);
  for (const auto& id : l.lib.instance_ids()) {
    const auto graph = l.graph(id);
    for (const auto& class_devices : by_class) {
      const std::vector<std::string>& devices = class_devices.second;
      if (devices.size() < 2) continue;
      for (auto mode_rows : {std::pair{planner::Mode::decode, std::int64_t{1}}, std::pair{planner::Mode::prefill, std::int64_t{4096}}}) {
        const planner::Mode mode = mode_rows.first;
        const std::int64_t rows = mode_rows.second;
        const auto first = plan_of(l, l.target(devices.front()), graph, mode, rows);
        for (std::size_t i = 1; i < devices.size(); ++i) {
          CAPTURE(id);
          CAPTURE(devices.front());
          CAPTURE(devices[i]);
          CAPTURE(rows);
          const auto other = plan_of(l, l.target(devices[i]), graph, mode, rows);
          CHECK(other.digest == first.digest);
          if (other.canonical != first.canonical) {
            // Name the first differing line.
            std::size_t p = 0;
            while (p < first.canonical.size() && first.canonical[p] == other.canonical[p]) ++p;
            const auto ls = first.canonical.rfind('\n', p) + 1;
            const std::string a = first.canonical.substr(ls, first.canonical.find('\n', p) - ls);
            const std::string b = other.canonical.substr(ls, other.canonical.find('\n', ls) - ls);
            CAPTURE(a);
            CAPTURE(b);
            FAIL_CHECK("canonical plan text differs between devices of one class");
          }
        }
      }
    }
  }
}

TEST_CASE("hopper devices (h100-sxm, h100-nvl, h200-sxm, gh200) share every golden instance's digest") {
  const Loaded l;
  const std::vector<std::string> hopper = {"h100-sxm", "h100-nvl", "h200-sxm", "gh200"};
  for (const auto& id : l.lib.instance_ids()) {
    CAPTURE(id);
    const auto graph = l.graph(id);
    for (auto [mode, rows] : {std::pair{planner::Mode::decode, std::int64_t{1}}, std::pair{planner::Mode::prefill, std::int64_t{4096}}}) {
      const auto first = plan_of(l, l.target(hopper.front()), graph, mode, rows);
      for (std::size_t i = 1; i < hopper.size(); ++i) {
        CAPTURE(hopper[i]);
        CHECK(plan_of(l, l.target(hopper[i]), graph, mode, rows).digest == first.digest);
      }
    }
  }
}

TEST_CASE(
    "verify plans the layers as a prefill chunk of K rows and the head on every one of them (catches the head on the last row "
    "only, or the layers planned as a decode batch)") {
  const Loaded l;
  const auto graph = l.graph("llama-3.1-8b-instruct");
  const auto target = l.target("h200-sxm");
  for (const std::int64_t k : {std::int64_t{1}, std::int64_t{4}, std::int64_t{16}}) {
    CAPTURE(k);
    const auto plan = plan_of(l, target, graph, planner::Mode::verify, k);
    CHECK(plan.mode == planner::Mode::verify);
    CHECK(contains(plan.canonical, "mode verify rows " + std::to_string(k) + "\n"));
    for (const auto& s : plan.scopes) {
      CAPTURE(s.name);
      CHECK(s.rows == k);  // every scope, the head included, runs all K rows
      if (s.name == "post")
        CHECK(s.mode == (k == 1 ? planner::Mode::decode : planner::Mode::batch));
      else
        CHECK(s.mode == planner::Mode::prefill);
    }
    // The same layers as a prefill of K tokens, but not the same program.
    const auto prefill = plan_of(l, target, graph, planner::Mode::prefill, k);
    CHECK(prefill.digest != plan.digest);
    REQUIRE(prefill.scopes.size() == plan.scopes.size());
    for (std::size_t i = 0; i + 1 < plan.scopes.size(); ++i) {
      REQUIRE(prefill.scopes[i].groups.size() == plan.scopes[i].groups.size());
      for (std::size_t g = 0; g < plan.scopes[i].groups.size(); ++g)
        CHECK(prefill.scopes[i].groups[g].rule == plan.scopes[i].groups[g].rule);
    }
  }
}

TEST_CASE(
    "gemma-4's 256- and 512-dim heads plan on hopper, prefill and decode; a head dim no flash prefill body takes is a gap "
    "(catches flash_prefill_wgmma or attn_decode_split_merge without 512 or 8 heads per KV head, and either without its "
    "head-dim requirement)") {
  // gemma-4-26b-a4b: sliding layers of 256-dim heads (16 over 8 KV heads), full layers of 512 (16
  // over 2). The wgmma body takes 64, 128 and 256 (an even group) and routes the rest to the
  // mma.sync body, which takes nothing else; the split-merge decode folds 256 and 512 in parts of 128 and groups of 8 in
  // two passes of 4. The full layers' heads set to 96 leave both prefill bodies without a head dim.
  const Loaded l;
  const auto graph = l.graph("gemma-4-26b-a4b");
  auto attention_groups = [&](const met::model::ModelGraph& g, planner::Mode mode, std::int64_t rows) {
    std::pair<int, int> planned_gaps{0, 0};
    const auto p = plan_of(l, l.target("h200-sxm"), g, mode, rows);
    for (const auto& sc : p.scopes) {
      for (const auto& grp : sc.groups) {
        const bool attention = grp.nodes.size() == 1 && sc.nodes[static_cast<std::size_t>(grp.nodes.front())].op == "attention";
        if (!attention) continue;
        CAPTURE(sc.name);
        if (!grp.gap) {
          ++planned_gaps.first;
          continue;
        }
        REQUIRE_FALSE(grp.blocked.empty());
        CHECK(contains(grp.blocked.front().why, "head_dim"));
        ++planned_gaps.second;
      }
    }
    return planned_gaps;
  };
  for (auto [mode, rows] : {std::pair{planner::Mode::prefill, std::int64_t{4096}}, std::pair{planner::Mode::decode, std::int64_t{1}}}) {
    const auto [planned, gaps] = attention_groups(graph, mode, rows);
    CHECK(planned > 0);
    CHECK(gaps == 0);
  }
  auto odd = graph;
  int changed = 0;
  for (auto& kind : odd.kinds)
    for (auto& n : kind.nodes)
      if (n.op == "attention" && n.params.at("head_dim") == 512) {
        n.params["head_dim"] = n.params["v_head_dim"] = 96;
        ++changed;
      }
  REQUIRE(changed > 0);
  const auto [planned, gaps] = attention_groups(odd, planner::Mode::prefill, 4096);
  CHECK(planned > 0);  // the sliding layers
  CHECK(gaps > 0);
}
