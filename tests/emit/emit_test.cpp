// The emitter: each program's instruction groups are the plan's (and the report's) fused groups in
// order, for the cpu and a GPU class; the plan digests are the report's; plans with gaps are
// refused naming the gap; every emitted file passes the verifier; emission is deterministic.
#include <doctest/doctest.h>

#include <nlohmann/json.hpp>

#include "../interp/tiny_model.hpp"
#include "emit/disasm.hpp"
#include "estimate/analysis.hpp"

namespace {

using namespace met;

const std::filesystem::path& ckpt() {
  static const auto p = testing::tiny_checkpoint("emit", testing::tiny_llama_config(3));
  return p;
}

planner::Plan plan_for(const planner::Target& t, const model::ModelGraph& g, planner::Mode mode, std::int64_t rows) {
  auto& tl = testing::tree_lib();
  planner::PlanInput in;
  in.tree = &tl.tree;
  in.registry = &tl.lib.registry;
  in.device = t.device;
  in.chain = &t.chain;
  in.availability = &t.availability;
  in.rules = &t.rules;
  in.model = &g;
  in.mode = mode;
  in.rows = rows;
  return planner::build_plan(in);
}

void check_groups_match_plan(const std::string& device, const testing::EmitSpec& spec) {
  auto a = testing::emit_checkpoint(ckpt(), spec);
  REQUIRE_MESSAGE(a.ok(), (a.ok() ? "" : a.error().message));
  const auto problems = emit::verify(a->packet, emit::opcode_table());
  CHECK(problems.empty());
  auto target = planner::resolve_target(testing::tree_lib().lib, device);
  REQUIRE(target.ok());
  const auto graph = testing::graph_of(ckpt());
  const auto build = nlohmann::json::parse(a->build_json);
  REQUIRE(a->packet.programs.size() == spec.buckets.size() + spec.rungs.size());
  for (std::size_t i = 0; i < a->packet.programs.size(); ++i) {
    const auto& p = a->packet.programs[i];
    INFO(device << " " << p.name);
    const bool prefill = p.kind == MET_PROGRAM_PREFILL;
    const auto mode = prefill ? planner::Mode::prefill : p.rows == 1 ? planner::Mode::decode : planner::Mode::batch;
    const auto plan = plan_for(*target, graph, mode, p.rows);
    const auto want = emit::plan_group_rules(plan, graph);
    CHECK(a->programs[i].groups == want);
    CHECK(build["programs"][i]["groups"].get<std::vector<std::string>>() == want);
    CHECK(build["programs"][i]["digest"] == plan.digest);
    // the instructions themselves, collapsed into groups, list the same rules
    std::vector<std::string> got;
    std::uint32_t group = UINT32_MAX;
    std::string scope;
    for (const auto& d : p.instrs) {
      if (d.group != group || d.scope != scope) {
        std::vector<std::string> flat;
        for (const auto& s : plan.scopes)
          for (const auto& g : s.groups) flat.push_back(g.rule);
        got.push_back(flat.at(d.group));
      }
      group = d.group;
      scope = d.scope;
    }
    CHECK(got == want);
  }
}

}  // namespace

TEST_CASE("host-cpu programs list the plan's fused groups in order, layer by layer") {
  check_groups_match_plan("host-cpu", {});
}

TEST_CASE("h200-sxm programs list the hopper plan's fused groups in order (wgmma prefill, gemv decode)") {
  testing::EmitSpec s;
  s.device = "h200-sxm";
  s.buckets = {128, 512};
  s.rungs = {1, 2, 8};
  s.max_ctx = 1024;
  check_groups_match_plan("h200-sxm", s);
  auto a = testing::emit_checkpoint(ckpt(), s);
  REQUIRE(a.ok());
  CHECK(a->packet.target_class == "hopper");
  CHECK(a->packet.sm_count == 132);
  const auto build = nlohmann::json::parse(a->build_json);
  CHECK(build["target"]["sm_count"] == 132);
  CHECK(build["abi"]["hash"] == emit::abi_hash());
  bool wgmma = false;
  for (const auto& d : a->packet.programs[0].instrs) wgmma |= emit::find_opcode(d.opcode)->name == "gemm_bf16_wgmma";
  CHECK(wgmma);
}

TEST_CASE("the decode digest in build.json is the one the report shows for the same device and mode") {
  auto a = testing::emit_checkpoint(ckpt(), {});
  REQUIRE(a.ok());
  auto& tl = testing::tree_lib();
  auto target = planner::resolve_target(tl.lib, "host-cpu");
  REQUIRE(target.ok());
  const auto graph = testing::graph_of(ckpt());
  estimate::Options o;
  o.mode = planner::Mode::batch;
  o.rows = 4;
  auto an = estimate::analyze(tl.lib, *target, graph, o);
  REQUIRE(an.ok());
  for (const auto& p : a->programs)
    if (p.name == "decode_4") CHECK(p.digest == an->plan.digest);
}

TEST_CASE("a plan with gaps is refused, naming the scope, the op and why") {
  auto tree = testing::tree_lib().tree;  // a copy without the cpu prefill attention rule
  auto& fusions = tree.files().at("cpu/FUSIONS.toml");
  const auto at = fusions.find("[[rule]]\nid = \"attn_prefill_cpu\"");
  REQUIRE(at != std::string::npos);
  const auto next = fusions.find("[[rule]]", at + 1);
  fusions.erase(at, next - at);
  const testing::TreeLib tl(std::move(tree));
  auto a = testing::emit_checkpoint(ckpt(), {}, tl);
  REQUIRE_FALSE(a.ok());
  const auto& m = a.error().message;
  INFO(m);
  CHECK(m.find("prefill_8") != std::string::npos);
  CHECK(m.find("gap") != std::string::npos);
  CHECK(m.find("layers:full: attention") != std::string::npos);
}

TEST_CASE("emission is deterministic: the same inputs give the same model.pkt, weights.json and build.json") {
  auto a = testing::emit_checkpoint(ckpt(), {});
  auto b = testing::emit_checkpoint(ckpt(), {});
  REQUIRE(a.ok());
  REQUIRE(b.ok());
  CHECK(emit::serialize(a->packet) == emit::serialize(b->packet));
  CHECK(emit::to_json(a->weights) == emit::to_json(b->weights));
  CHECK(a->build_json == b->build_json);
}

TEST_CASE("waits are instruction-level, point backwards, and none is implied by another (a dropped dependency is caught by verify)") {
  auto a = testing::emit_checkpoint(ckpt(), {});
  REQUIRE(a.ok());
  for (const auto& p : a->packet.programs)
    for (const auto& s : p.streams)
      for (const auto& e : s)
        for (const auto& w : e.waits) {
          CHECK(w.counter < e.instr);
          CHECK(w.value == p.instrs[w.counter].slices);
        }
  // drop every wait of one mid-program instruction: the verifier must object
  auto broken = a->packet;
  auto& prog = broken.programs.back();
  bool dropped = false;
  for (auto& s : prog.streams)
    for (auto& e : s)
      if (!e.waits.empty() && e.instr > 3) {
        e.waits.clear();
        dropped = true;
      }
  REQUIRE(dropped);
  CHECK_FALSE(emit::verify(broken, emit::opcode_table()).empty());
}

TEST_CASE("a tied lm_head reads the embedding's manifest entry instead of a second copy") {
  std::string cfg = testing::tiny_llama_config();
  cfg.replace(cfg.find("\"tie_word_embeddings\": false"), 28, "\"tie_word_embeddings\": true");
  const auto dir = testing::tiny_checkpoint("tied", cfg);
  auto a = testing::emit_checkpoint(dir, {});
  REQUIRE_MESSAGE(a.ok(), (a.ok() ? "" : a.error().message));
  int embed_entries = 0;
  for (const auto& e : a->weights.tensors) embed_entries += e.name == "model.embed_tokens.weight";
  CHECK(embed_entries == 1);
  for (const auto& e : a->weights.tensors) CHECK(e.name != "lm_head.weight");
}
