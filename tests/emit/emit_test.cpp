// The emitter: each program's instruction groups are the plan's (and the report's) fused groups in
// order, for the cpu and a GPU class; the plan digests are the report's; plans with gaps are
// refused naming the gap; every emitted file passes the verifier; emission is deterministic.
#include <doctest/doctest.h>
#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <functional>
#include <map>
#include <numeric>
#include <sstream>
#include <set>
#include <tuple>

#include "../interp/tiny_model.hpp"
#include "emit/disasm.hpp"
#include "estimate/analysis.hpp"
#include "kernels/common/interp/smem.h"
#include "model/kv_ring.hpp"

namespace {

using namespace met;

const std::filesystem::path& ckpt() {
  static const auto p = testing::tiny_checkpoint("emit", testing::tiny_llama_config(3, /*hidden=*/128));
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
    // ... and parse_build_json hands it back by program name (what a campaign records per case)
    const auto parsed = emit::parse_build_json(a->build_json, "build.json");
    REQUIRE(parsed.ok());
    CHECK(parsed->program_digests.at(p.name) == plan.digest);
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
  std::map<std::string, int> ops;  // the hopper class's own GEMM and flash prefill (kernels/hopper/), not the inherited ones
  for (const auto& p : a->packet.programs)
    for (const auto& d : p.instrs) ++ops[emit::find_opcode(d.opcode)->name];
  CHECK(ops["gemm_bf16_wgmma"] > 0);
  CHECK(ops["flash_prefill_wgmma"] > 0);
  CHECK(ops.count("gemm_bf16_mma") == 0);
  CHECK(ops.count("flash_prefill_mma") == 0);
}

TEST_CASE("mi300x and mi355x programs list the cdna3 plan's groups, with MFMA GEMM and flash prefill and the matrix-core gemv (an AMD emit refused for a gap, or binding the mma.sync kernels, fails)") {
  for (const std::string device : {"mi300x", "mi355x"}) {
    testing::EmitSpec s;
    s.device = device;
    s.buckets = {128};
    s.rungs = {1, 4};
    s.max_ctx = 512;
    check_groups_match_plan(device, s);
    auto a = testing::emit_checkpoint(ckpt(), s);
    REQUIRE(a.ok());
    CHECK(a->packet.target_class == (device == "mi300x" ? "cdna3" : "cdna4"));
    CHECK(a->packet.sm_count == (device == "mi300x" ? 304u : 256u));
    std::map<std::string, int> ops;
    for (const auto& p : a->packet.programs)
      for (const auto& d : p.instrs) ++ops[emit::find_opcode(d.opcode)->name];
    CHECK(ops["gemm_bf16_mfma"] > 0);
    CHECK(ops["flash_prefill_mfma"] > 0);
    CHECK(ops["gemv_rmsnorm_qkv_rope"] > 0);
    CHECK(ops.count("gemm_bf16_mma") == 0);
    CHECK(ops.count("flash_prefill_mma") == 0);
  }
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

TEST_CASE("a GPU prefill bucket of 16 rows runs its linears on the GEMMs (prefill_rows); the gemv rules take decode and batch") {
  testing::EmitSpec s;
  s.device = "h200-sxm";
  s.buckets = {1, 16};
  s.rungs = {1, 16};
  s.max_ctx = 256;
  auto a = testing::emit_checkpoint(ckpt(), s);
  REQUIRE_MESSAGE(a.ok(), (a.ok() ? "" : a.error().message));
  for (const auto& p : a->packet.programs) {
    std::map<std::string, int> ops;
    for (const auto& d : p.instrs) ++ops[emit::find_opcode(d.opcode)->name];
    INFO(p.name);
    const bool prefill = p.name.rfind("prefill_", 0) == 0;
    CHECK((ops["gemm_residual_bf16_wgmma"] > 0) == prefill);
    CHECK((ops["gemv_o_residual"] > 0) == !prefill);
  }
}

TEST_CASE("a gap that no rule was blocked on names the rules over its op and the cases they take, prefill rows apart") {
  auto tree = testing::tree_lib().tree;  // a copy whose GEMMs take prefill steps from 32 rows
  for (const char* file : {"common/FUSIONS.toml", "hopper/FUSIONS.toml"}) {
    auto& fusions = tree.files().at(file);
    for (auto at = fusions.find("prefill_rows = [1,"); at != std::string::npos; at = fusions.find("prefill_rows = [1,", at))
      fusions.replace(at, 18, "prefill_rows = [32,");
  }
  const testing::TreeLib tl(std::move(tree));
  testing::EmitSpec s;
  s.device = "h200-sxm";
  s.buckets = {16};
  s.rungs = {1};
  s.max_ctx = 256;
  auto a = testing::emit_checkpoint(ckpt(), s, tl);
  REQUIRE_FALSE(a.ok());
  const auto& m = a.error().message;
  INFO(m);
  CHECK(m.find("prefill_16 (prefill, 16 rows)") != std::string::npos);
  CHECK(m.find("layers:full: linear:o (no rule covers it here; rules over linear:o take other cases: ") != std::string::npos);
  CHECK(m.find("gemv_o_residual (decode, batch; 1 to 16 rows)") != std::string::npos);
  CHECK(m.find("gemm_bf16_wgmma (batch, prefill; 17 to 1048576 rows, prefill 32 to 1048576)") != std::string::npos);
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

// ---- rope scaling ----

namespace {

std::string config_with_rope(const std::string& block) {
  std::string cfg = testing::tiny_llama_config(2, /*hidden=*/128);
  cfg.replace(cfg.find("\"rope_theta\": 10000.0"), 21, "\"rope_theta\": 500000.0, \"rope_scaling\": " + block);
  return cfg;
}

// The rope_scaling block of meta-llama/Llama-3.2-1B-Instruct's config.json, as published.
const char* const kLlama32Rope =
    R"({"factor": 32.0, "high_freq_factor": 4.0, "low_freq_factor": 1.0, "original_max_position_embeddings": 8192, "rope_type": "llama3"})";

std::size_t generated_tensors(const emit::PacketFile& f) {
  std::size_t n = 0;
  for (const auto& t : f.tensors) n += t.source == MET_SOURCE_GENERATED;
  return n;
}

}  // namespace

TEST_CASE("a config with Llama-3.2-1B's llama3 rope block emits for host-cpu and h200-sxm with one inv_freq table that every rope reads (emit refusing rope_scaling, or a rope without the table, fails)") {
  const auto dir = testing::tiny_checkpoint("llama32-rope", config_with_rope(kLlama32Rope));
  for (const std::string device : {"host-cpu", "h200-sxm"}) {
    INFO(device);
    testing::EmitSpec s;
    s.device = device;
    if (std::string(device) == "h200-sxm") {
      s.buckets = {128};
      s.max_ctx = 256;
    }
    auto a = testing::emit_checkpoint(dir, s);
    REQUIRE_MESSAGE(a.ok(), (a.ok() ? "" : a.error().message));
    CHECK(emit::verify(a->packet, emit::opcode_table()).empty());
    REQUIRE(generated_tensors(a->packet) == 1);
    std::uint32_t table = 0;
    for (std::uint32_t i = 0; i < a->packet.tensors.size(); ++i)
      if (a->packet.tensors[i].source == MET_SOURCE_GENERATED) table = i;
    CHECK(a->packet.tensors[table].name == "rope.inv_freq.r32");
    CHECK(a->packet.tensors[table].shape == std::vector<std::uint64_t>{16});
    std::size_t ropes = 0;
    for (const auto& p : a->packet.programs)
      for (const auto& d : p.instrs) {
        const auto* op = emit::find_opcode(d.opcode);
        const int k = emit::tensor_index(*op, "inv_freq");
        if (k < 0) continue;
        ++ropes;
        CHECK(d.tensors[static_cast<std::size_t>(k)] == table);
      }
    CHECK(ropes > 0);
    const auto build = emit::parse_build_json(a->build_json, "build.json");
    REQUIRE_MESSAGE(build.ok(), (build.ok() ? "" : build.error().message));
    CHECK(build->rope.type == "llama3");
    CHECK(build->rope.theta == 500000.0);
    CHECK(build->rope.factor == 32.0);
    CHECK(build->rope.original_max_position_embeddings == 8192.0);
    auto bytes = emit::generated_table(a->packet.tensors[table], *build, "model.pkt");
    REQUIRE(bytes.ok());
    CHECK(bytes->size() == 64);
  }
}

TEST_CASE("a plain rope (no rope_scaling, or null) emits no generated table, so the theta path and its numerics are unchanged") {
  auto a = testing::emit_checkpoint(ckpt(), {});
  REQUIRE(a.ok());
  CHECK(generated_tensors(a->packet) == 0);
  const auto dir = testing::tiny_checkpoint("null-rope", config_with_rope("null"));
  auto b = testing::emit_checkpoint(dir, {});
  REQUIRE_MESSAGE(b.ok(), (b.ok() ? "" : b.error().message));
  CHECK(generated_tensors(b->packet) == 0);
}

TEST_CASE("rope types dynamic and longrope are refused naming the type; a llama3 block missing a key or with an unknown key is refused naming the key") {
  for (const char* type : {"dynamic", "longrope"}) {
    const auto r = emit::parse_rope(config_with_rope(std::string(R"({"rope_type": ")") + type + R"(", "factor": 4.0})"), "config.json");
    REQUIRE_FALSE(r.ok());
    CHECK(r.error().message == std::string("config.json: rope_scaling: rope type '") + type +
                                   "' is not implemented (met runs default, linear, llama3, proportional and yarn rope)");
  }
  const auto missing = emit::parse_rope(config_with_rope(R"({"rope_type": "llama3", "factor": 8.0})"), "config.json");
  REQUIRE_FALSE(missing.ok());
  CHECK(missing.error().message == "config.json: rope_scaling: rope type 'llama3' needs 'low_freq_factor'");
  const auto unknown = emit::parse_rope(config_with_rope(R"({"rope_type": "linear", "factor": 2.0, "beta_fast": 32})"), "config.json");
  REQUIRE_FALSE(unknown.ok());
  CHECK(unknown.error().message == "config.json: rope_scaling: unknown key 'beta_fast' for rope type 'linear'");
  const auto dir = testing::tiny_checkpoint("dynamic-rope", config_with_rope(R"({"rope_type": "dynamic", "factor": 4.0})"));
  auto a = testing::emit_checkpoint(dir, {});
  REQUIRE_FALSE(a.ok());
  CHECK(a.error().message.find("rope type 'dynamic' is not implemented") != std::string::npos);
}

TEST_CASE("yarn as gpt-oss states it: the factor is max_position_embeddings / original_max_position_embeddings, the attention factor 0.1 ln(factor) + 1, and the table ramps from theta's frequencies (below the beta_fast correction dim) to them over the factor (above beta_slow's), untruncated (catches the stated factor kept, a missing attention factor, or a truncated ramp)") {
  // gpt-oss-20b's block with the factor stated as 8: transformers takes 131072 / 4096 = 32.
  std::string cfg = config_with_rope(
      R"({"beta_fast": 32.0, "beta_slow": 1.0, "factor": 8.0, "original_max_position_embeddings": 4096, "rope_type": "yarn", "truncate": false})");
  cfg.replace(cfg.find("\"rope_theta\": 500000.0"), 22, "\"rope_theta\": 150000");
  cfg.replace(cfg.find("\"max_position_embeddings\": 2048"), 31, "\"max_position_embeddings\": 131072");
  const auto r = emit::parse_rope(cfg, "config.json");
  REQUIRE_MESSAGE(r.ok(), (r.ok() ? "" : r.error().message));
  CHECK(r->factor == 32.0);
  CHECK(r->attention_scale() == doctest::Approx(0.1 * std::log(32.0) + 1).epsilon(1e-7));
  const auto f = emit::rope_inv_freq(*r, 64);
  REQUIRE(f.size() == 32);
  const double pi = std::acos(-1.0);
  auto corr = [&](double rot) { return 64 * std::log(4096 / (rot * 2 * pi)) / (2 * std::log(150000.0)); };
  const double low = corr(32), high = corr(1);  // about 8.09 and 17.4: not whole numbers
  for (int i : {0, 8, 9, 12, 17, 18, 31}) {
    CAPTURE(i);
    const double base = std::pow(150000.0, -2.0 * i / 64), ramp = std::clamp((i - low) / (high - low), 0.0, 1.0);
    CHECK(f[static_cast<std::size_t>(i)] == doctest::Approx(base / 32 * ramp + base * (1 - ramp)).epsilon(1e-6).scale(0));
  }
  CHECK(f[0] == 1.0f);
  CHECK(f[31] == doctest::Approx(std::pow(150000.0, -62.0 / 64) / 32).epsilon(1e-6).scale(0));
  // truncate (transformers' default) floors and ceils the range to [8, 18]: i = 17 ramps 0.9 of the way.
  cfg.replace(cfg.find("\"truncate\": false"), 17, "\"truncate\": true");
  const auto t = emit::parse_rope(cfg, "config.json");
  REQUIRE(t.ok());
  const double b17 = std::pow(150000.0, -34.0 / 64), truncated = b17 / 32 * 0.9 + b17 * 0.1;
  CHECK(emit::rope_inv_freq(*t, 64)[17] == doctest::Approx(truncated).epsilon(1e-6).scale(0));
  CHECK(std::abs(f[17] - truncated) > 0.1 * truncated);  // untruncated: 0.957 of the way
}

TEST_CASE("rope_inv_freq: linear divides every frequency by factor; llama3 keeps short wavelengths and divides long ones by factor") {
  emit::RopeConfig lin;
  lin.theta = 10000.0;
  lin.type = "linear";
  lin.factor = 4.0;
  const auto l = emit::rope_inv_freq(lin, 16);
  REQUIRE(l.size() == 8);
  CHECK(l[0] == 0.25f);
  CHECK(l[4] == static_cast<float>(0.01 / 4.0));
  emit::RopeConfig l3;
  l3.theta = 500000.0;
  l3.type = "llama3";
  l3.factor = 32.0;
  l3.low_freq_factor = 1.0;
  l3.high_freq_factor = 4.0;
  l3.original_max_position_embeddings = 8192.0;
  const auto f = emit::rope_inv_freq(l3, 64);
  REQUIRE(f.size() == 32);
  CHECK(f[0] == 1.0f);                                                    // wavelength 2*pi: kept
  CHECK(f[31] == static_cast<float>(std::pow(500000.0, -62.0 / 64) / 32));  // longest: divided by 32
}

// ---- column split ----

TEST_CASE("decode_1 on 4 threads splits the weight-bound ops by output columns into 4 slices and leaves argmax to a met_argmax (1 thread: no split)") {
  testing::EmitSpec s;
  s.threads = 4;
  auto a = testing::emit_checkpoint(ckpt(), s);
  REQUIRE(a.ok());
  CHECK(emit::verify(a->packet, emit::opcode_table()).empty());
  const emit::ProgramDesc* d1 = nullptr;
  for (const auto& p : a->packet.programs)
    if (p.name == "decode_1") d1 = &p;
  REQUIRE(d1);
  std::map<std::string, std::uint32_t> slices;
  std::size_t argmax_after_head = 0;
  for (std::size_t i = 0; i < d1->instrs.size(); ++i) {
    const auto& d = d1->instrs[i];
    const auto& name = emit::find_opcode(d.opcode)->name;
    slices[name] = d.slices;
    if (name == "argmax" && i > 0 && emit::find_opcode(d1->instrs[i - 1].opcode)->name.find("lm_head") != std::string::npos)
      ++argmax_after_head;
    if (name.find("lm_head") != std::string::npos) CHECK(d.tensors[4] == MET_NO_TENSOR);
  }
  CHECK(slices.at("gemv_o_residual") == 4);
  CHECK(slices.at("gemv_rmsnorm_gate_up_silu") == 4);
  CHECK(slices.at("gemv_down_residual") == 4);
  CHECK(slices.at("gemv_rmsnorm_lm_head_argmax") == 4);
  CHECK(argmax_after_head == 1);
  s.threads = 1;
  auto b = testing::emit_checkpoint(ckpt(), s);
  REQUIRE(b.ok());
  for (const auto& p : b->packet.programs)
    for (const auto& d : p.instrs) {
      CHECK(d.slices == 1);
      CHECK(emit::find_opcode(d.opcode)->name != "argmax");
    }
}

// The decode qkv op of each emit, with its unit_rows and slices.
struct QkvSplit {
  std::int64_t unit_rows = 0;
  std::uint32_t slices = 0;
};
QkvSplit decode1_qkv(const std::filesystem::path& ck, const std::string& device) {
  testing::EmitSpec s;
  s.device = device;
  s.rungs = {1};
  s.buckets = {128};
  s.max_ctx = 256;
  auto a = testing::emit_checkpoint(ck, s);
  REQUIRE_MESSAGE(a.ok(), (a.ok() ? "" : a.error().message));
  CHECK(emit::verify(a->packet, emit::opcode_table()).empty());
  for (const auto& p : a->packet.programs)
    for (const auto& d : p.instrs) {
      const auto* op = emit::find_opcode(d.opcode);
      const int ur = emit::int_index(*op, "unit_rows");
      if (p.name == "decode_1" && ur >= 0) return {d.ints[static_cast<std::size_t>(ur)], d.slices};
    }
  FAIL("no qkv op in decode_1");
  return {};
}

TEST_CASE("a GPU cuts the fused qkv into units of 16-row multiples that make the largest slice smallest; the cpu keeps heads") {
  // {heads, kv heads, head_dim}: 48 heads of 128 rows on 132 SMs: 16-row units (3 per slice, 48 rows
  // against 128 for whole heads); 48 heads of 64: 32-row units (1 per slice, as few as 16-row units
  // give, 2 of them, with half the heads split); 8 heads of 32: 16-row units.
  struct Shape {
    int heads, kv, hd;
    std::int64_t unit_rows;
    std::uint32_t slices;
  };
  for (const Shape sh : {Shape{32, 8, 128, 16, 132}, Shape{32, 8, 64, 32, 96}, Shape{4, 2, 32, 16, 16}}) {
    const std::string cfg = R"({"architectures": ["LlamaForCausalLM"], "hidden_size": 128, "intermediate_size": 128,
      "num_attention_heads": )" + std::to_string(sh.heads) + R"(, "num_hidden_layers": 1, "num_key_value_heads": )" +
                            std::to_string(sh.kv) + R"(, "head_dim": )" + std::to_string(sh.hd) + R"(,
      "rms_norm_eps": 1e-05, "rope_theta": 10000.0, "tie_word_embeddings": false, "vocab_size": 256,
      "max_position_embeddings": 2048, "torch_dtype": "bfloat16"})";
    const auto ck = testing::tiny_checkpoint("qkv-units-" + std::to_string(sh.heads) + "-" + std::to_string(sh.hd), cfg);
    const QkvSplit gpu = decode1_qkv(ck, "h200-sxm");
    CAPTURE(sh.heads);
    CAPTURE(sh.hd);
    CHECK(gpu.unit_rows == sh.unit_rows);
    CHECK(gpu.slices == sh.slices);
    CHECK(decode1_qkv(ck, "host-cpu").unit_rows == sh.hd);
  }
}

namespace {

// The h200-sxm emits of the split-merge tests: decode rungs 1 and 16, a bucket of 128, ctx 4096.
testing::EmitSpec split_merge_spec() {
  testing::EmitSpec s;
  s.device = "h200-sxm";
  s.rungs = {1, 16};
  s.buckets = {128};
  s.max_ctx = 4096;
  return s;
}

// Program -> (splits, slices) of its attn_decode_split_merge instructions (they agree in a program),
// after checking the packet and that a state is carried exactly where there are splits.
std::map<std::string, std::pair<std::int64_t, std::uint32_t>> split_merge_shapes(const emit::PacketFile& f) {
  CHECK(emit::verify(f, emit::opcode_table()).empty());
  std::map<std::string, std::pair<std::int64_t, std::uint32_t>> seen;
  for (const auto& p : f.programs)
    for (const auto& d : p.instrs) {
      const auto* op = emit::find_opcode(d.opcode);
      if (op->name != "attn_decode_split_merge") continue;
      const std::int64_t splits = d.ints[static_cast<std::size_t>(emit::int_index(*op, "splits"))];
      seen[p.name] = {splits, d.slices};
      const bool state = d.tensors[static_cast<std::size_t>(emit::tensor_index(*op, "part_o"))] != MET_NO_TENSOR;
      CHECK(state == (splits > 1));
    }
  return seen;
}

}  // namespace

TEST_CASE("a GPU decode runs attention as one attn_decode_split_merge instruction of (row, KV head, split) slices: splits fill the streams, one split carries no state; the cpu keeps split + merge") {
  // 32 heads over 8 KV heads on 132 SMs: C=1 takes 16 splits per KV head (128 slices, with states),
  // C=16 one (128 slices, no state); the cpu class has no fused body and runs split then merge.
  const std::string cfg = R"({"architectures": ["LlamaForCausalLM"], "hidden_size": 256, "intermediate_size": 256,
    "num_attention_heads": 32, "num_hidden_layers": 1, "num_key_value_heads": 8, "head_dim": 64,
    "rms_norm_eps": 1e-05, "rope_theta": 10000.0, "tie_word_embeddings": false, "vocab_size": 256,
    "max_position_embeddings": 8192, "torch_dtype": "bfloat16"})";
  const auto ck = testing::tiny_checkpoint("attn-split-merge", cfg);
  auto s = split_merge_spec();
  auto a = testing::emit_checkpoint(ck, s);
  REQUIRE_MESSAGE(a.ok(), (a.ok() ? "" : a.error().message));
  const auto seen = split_merge_shapes(a->packet);
  for (const auto& p : a->packet.programs)
    for (const auto& d : p.instrs) {
      CHECK(emit::find_opcode(d.opcode)->name != "attn_decode_split");
      CHECK(emit::find_opcode(d.opcode)->name != "attn_decode_merge");
    }
  CHECK(seen.at("decode_1") == std::pair<std::int64_t, std::uint32_t>{16, 128});
  CHECK(seen.at("decode_16") == std::pair<std::int64_t, std::uint32_t>{1, 128});
  s.device = "host-cpu";
  auto c = testing::emit_checkpoint(ck, s);
  REQUIRE(c.ok());
  std::set<std::string> ops;
  for (const auto& p : c->packet.programs)
    for (const auto& d : p.instrs) ops.insert(emit::find_opcode(d.opcode)->name);
  CHECK(ops.count("attn_decode_split") == 1);
  CHECK(ops.count("attn_decode_merge") == 1);
  CHECK(ops.count("attn_decode_split_merge") == 0);
}

TEST_CASE("a group of 16 query heads per KV head runs attn_decode_split_merge in (row, head block of 8, split) units: splits fill the streams over the blocks, the verifier passes; a group of 12 is refused") {
  // 32 heads over 2 KV heads: 4 blocks of 8 query heads. C=1 takes 132 / 4 = 33 splits (132
  // slices), C=16 two (128 slices); units per KV head instead of per block would take 66 and 4.
  auto config = [](int heads) {
    return fmt::format(R"({{"architectures": ["LlamaForCausalLM"], "hidden_size": 256, "intermediate_size": 256,
      "num_attention_heads": {}, "num_hidden_layers": 1, "num_key_value_heads": 2, "head_dim": 64,
      "rms_norm_eps": 1e-05, "rope_theta": 10000.0, "tie_word_embeddings": false, "vocab_size": 256,
      "max_position_embeddings": 8192, "torch_dtype": "bfloat16"}})",
                       heads);
  };
  const auto s = split_merge_spec();
  auto a = testing::emit_checkpoint(testing::tiny_checkpoint("attn-group16", config(32)), s);
  REQUIRE_MESSAGE(a.ok(), (a.ok() ? "" : a.error().message));
  const auto seen = split_merge_shapes(a->packet);
  CHECK(seen.at("decode_1") == std::pair<std::int64_t, std::uint32_t>{33, 132});
  CHECK(seen.at("decode_16") == std::pair<std::int64_t, std::uint32_t>{2, 128});
  auto refused = testing::emit_checkpoint(testing::tiny_checkpoint("attn-group12", config(24)), s);
  REQUIRE_FALSE(refused.ok());
  CHECK(refused.error().message.find("attn_decode_split_merge") != std::string::npos);
}

TEST_CASE("prefill kv_append splits its rows across the streams (by-slot writes) and verify still orders the cache's readers after it") {
  for (const std::string device : {"host-cpu", "h200-sxm"}) {
    INFO(device);
    testing::EmitSpec s;
    s.device = device;
    if (device == "host-cpu") {
      s.threads = 4;
    } else {
      s.buckets = {128, 512};
      s.max_ctx = 1024;
    }
    auto a = testing::emit_checkpoint(ckpt(), s);
    REQUIRE_MESSAGE(a.ok(), (a.ok() ? "" : a.error().message));
    CHECK(emit::verify(a->packet, emit::opcode_table()).empty());
    std::size_t seen = 0;
    for (const auto& p : a->packet.programs) {
      if (p.kind != MET_PROGRAM_PREFILL) continue;
      for (std::size_t i = 0; i < p.instrs.size(); ++i) {
        if (emit::find_opcode(p.instrs[i].opcode)->name != "kv_append") continue;
        ++seen;
        CHECK(p.instrs[i].slices == std::min<std::uint32_t>(p.rows, a->packet.sm_count));
        // The attention after it waits for every slice; dropping that wait is caught.
        emit::PacketFile broken = a->packet;
        std::size_t dropped = 0;
        for (auto& q : broken.programs) {
          if (q.name != p.name) continue;
          for (auto& st : q.streams)
            for (auto& e : st) {
              if (e.instr != i + 1) continue;
              const auto n = e.waits.size();
              std::erase_if(e.waits, [&](const emit::WaitDesc& w) { return w.counter == i; });
              dropped += n - e.waits.size();
            }
        }
        CHECK(dropped > 0);
        CHECK_FALSE(emit::verify(broken, emit::opcode_table()).empty());
      }
    }
    CHECK(seen > 0);
  }
}

TEST_CASE("a GPU prefill places its causal attention slices by cost: every stream reads about the mean of the instruction's keys, where dealing them round-robin left one 18% above (each slice once, verify passes)") {
  // 8 heads (4 column parts of 2 heads) x 1024 rows (16 row parts of 64) = 64 slices on 16 streams;
  // dealt round-robin, streams 3, 7, 11 and 15 would get row parts 0, 4, 8, 12 or 3, 7, 11, 15.
  const std::string cfg = R"({"architectures": ["LlamaForCausalLM"], "hidden_size": 512, "intermediate_size": 1024,
    "num_attention_heads": 8, "num_hidden_layers": 1, "num_key_value_heads": 4, "head_dim": 64, "rms_norm_eps": 1e-05,
    "rope_theta": 10000.0, "tie_word_embeddings": false, "vocab_size": 256, "max_position_embeddings": 2048,
    "torch_dtype": "bfloat16"})";
  testing::EmitSpec spec;
  spec.device = "h200-sxm";
  spec.threads = 16;
  spec.rungs = {1};
  spec.buckets = {1024};
  spec.max_ctx = 1024;
  auto a = testing::emit_checkpoint(testing::tiny_checkpoint("flash-place", cfg), spec);
  REQUIRE_MESSAGE(a.ok(), (a.ok() ? "" : a.error().message));
  CHECK(emit::verify(a->packet, emit::opcode_table()).empty());
  int seen = 0;
  for (const auto& p : a->packet.programs) {
    if (p.kind != MET_PROGRAM_PREFILL) continue;
    for (std::size_t i = 0; i < p.instrs.size(); ++i) {
      if (emit::find_opcode(p.instrs[i].opcode)->family != "attention_prefill") continue;
      ++seen;
      REQUIRE(p.instrs[i].slices == 64);
      std::vector<std::int64_t> keys(p.streams.size(), 0);  // rows x keys a causal slice reads, per stream
      std::vector<int> placed(p.instrs[i].slices, 0);
      for (std::size_t st = 0; st < p.streams.size(); ++st)
        for (const auto& e : p.streams[st]) {
          if (e.instr != i) continue;
          ++placed[e.slice];
          const auto rr = emit::slice_rows(p.instrs[i], e.slice);
          keys[st] += (rr.end - rr.begin) * rr.end;
        }
      CHECK(std::all_of(placed.begin(), placed.end(), [](int n) { return n == 1; }));
      const double mean = static_cast<double>(std::accumulate(keys.begin(), keys.end(), std::int64_t{0})) / static_cast<double>(keys.size());
      const double most = static_cast<double>(*std::max_element(keys.begin(), keys.end()));
      CAPTURE(most / mean);
      CHECK(most / mean < 1.02);
    }
  }
  CHECK(seen == 1);
}

namespace {

// google/gemma-3-1b-it's config.json shrunk, every Gemma-3 feature on: sliding and global layers
// (layer_types), a window of 16, a linear rope scaling for the global layers, both soft caps (the
// score cap is one transformers' Gemma-3 leaves unused, so the attention must not bind it),
// query_pre_attn_scalar 96 (not head_dim), hidden 320 (sqrt is 17.89, 17.875 in bf16).
const std::string kTinyGemma3 = R"({"architectures": ["Gemma3ForCausalLM"], "model_type": "gemma3_text",
    "hidden_size": 320, "intermediate_size": 512, "num_hidden_layers": 3, "num_attention_heads": 4,
    "num_key_value_heads": 2, "head_dim": 64, "vocab_size": 1024, "sliding_window": 16,
    "layer_types": ["sliding_attention", "full_attention", "sliding_attention"],
    "rms_norm_eps": 1e-06, "rope_theta": 1000000, "rope_local_base_freq": 10000,
    "rope_scaling": {"rope_type": "linear", "factor": 8.0}, "query_pre_attn_scalar": 96,
    "hidden_activation": "gelu_pytorch_tanh", "attn_logit_softcapping": 4.0, "final_logit_softcapping": 3.0,
    "max_position_embeddings": 32768, "torch_dtype": "bfloat16"})";

}  // namespace

namespace {

// The norms an instruction computes: 1 for rmsnorm and rmsnorm_offset, the folded ones of a fused
// gemv op (a qkv op with q/k norms folds three), 0 for the rest.
int norms_of(const std::string& op) {
  if (op == "rmsnorm" || op == "rmsnorm_offset" || op == "rmsnorm_residual") return 1;
  if (op == "gemv_rmsnorm_qkv_qknorm_rope") return 3;
  return op.starts_with("gemv_rmsnorm_") ? 1 : 0;
}

// A fused gemv op's norm kind (ops.def norm_once, norm_offset) and eps.
void check_fused_norm(const emit::InstrDesc& d, std::int64_t once, std::int64_t offset, float eps) {
  const auto* info = emit::find_opcode(d.opcode);
  CHECK(d.ints[static_cast<std::size_t>(emit::int_index(*info, "norm_once"))] == once);
  CHECK(d.ints[static_cast<std::size_t>(emit::int_index(*info, "norm_offset"))] == offset);
  CHECK(d.imms[0] == eps);
}

}  // namespace

TEST_CASE("Gemma-3 on host-cpu binds every step from config.json: embedding scale in bf16, (1 + w) norms, window and rope per layer kind, query_pre_attn_scalar, the final soft cap and no score soft cap (a step bound from a default fails)") {
  const auto dir = testing::tiny_checkpoint("gemma3-cpu", kTinyGemma3);
  testing::EmitSpec s;
  s.max_ctx = 256;
  auto a = testing::emit_checkpoint(dir, s);
  REQUIRE_MESSAGE(a.ok(), (a.ok() ? "" : a.error().message));
  CHECK(emit::verify(a->packet, emit::opcode_table()).empty());
  const auto& tensors = a->packet.tensors;
  for (const auto& p : a->packet.programs) {
    INFO(p.name);
    std::map<std::string, int> count;
    int norms = 0;
    for (const auto& d : p.instrs) {
      const std::string op = emit::find_opcode(d.opcode)->name;
      INFO(op << " in " << d.scope);
      ++count[op];
      const bool sliding = d.scope.find("sliding") != std::string::npos;
      if (op == "scale") {
        CHECK(d.imms == std::vector<float>{17.875f});
        CHECK(d.ints[1] == 320);
      } else if (op == "rmsnorm_offset") {
        REQUIRE(d.imms.size() == 2);
        CHECK(d.imms[0] == 1e-6f);
        CHECK(d.imms[1] == 1.0f);
      } else if (op.starts_with("gemv_rmsnorm_") || op == "rmsnorm_residual") {
        check_fused_norm(d, 1, 1, 1e-6f);  // (1 + w), rounded once, as rmsnorm_offset
      }
      if (op == "rope" || op == "gemv_rmsnorm_qkv_qknorm_rope") {
        // Local layers: a plain rope of base rope_local_base_freq; global: rope_theta, scaled by
        // the generated table of the linear rope.
        const auto* info = emit::find_opcode(d.opcode);
        const auto inv_freq = d.tensors[static_cast<std::size_t>(emit::tensor_index(*info, "inv_freq"))];
        CHECK(d.imms[op == "rope" ? 0 : 1] == (sliding ? 10000.0f : 1000000.0f));
        if (op == "rope") CHECK(d.imms[1] == 1.0f);  // attn_scale
        CHECK((inv_freq == MET_NO_TENSOR) == sliding);
        if (!sliding) CHECK(tensors[inv_freq].source == MET_SOURCE_GENERATED);
      } else if (op == "attn_prefill" || op == "attn_decode_split" || op == "attn_decode_merge") {
        const auto* info = emit::find_opcode(d.opcode);
        CHECK(d.ints[static_cast<std::size_t>(emit::int_index(*info, "window"))] == (sliding ? 16 : 0));
        // attn_logit_softcapping 4 in the config, yet no cap: transformers' Gemma-3 never applies it.
        CHECK(d.imms[0] == 0.0f);
        CHECK(d.imms[1] == static_cast<float>(1 / std::sqrt(96.0)));
      } else if (op == "softcap") {
        CHECK(d.imms == std::vector<float>{3.0f});
      } else if (op == "gemv_rmsnorm_lm_head_softcap_argmax") {
        CHECK(d.imms[1] == 3.0f);
      }
      norms += norms_of(op);
    }
    // Six norms a layer and the final one, all with the offset (alone or folded into a gemv op);
    // none without it. Decode folds the qkv, q/k norms, rope and append, the MLP's norm and GeGLU,
    // and the final norm, head and cap.
    CHECK(norms == 6 * 3 + 1);
    CHECK(count["rmsnorm"] == 0);
    CHECK(count["scale"] == 1);
    CHECK(count["rope"] + count["gemv_rmsnorm_qkv_qknorm_rope"] == 3);
    CHECK(count["softcap"] + count["gemv_rmsnorm_lm_head_softcap_argmax"] == 1);
    CHECK(count["gelu_mul"] + count["gemm_gelu"] + count["gemv_rmsnorm_gate_up_gelu"] == 3);
    // The post norms, each with the residual add after it.
    CHECK(count["rmsnorm_residual"] == 2 * 3);
    CHECK(count["residual_add"] == 0);
  }
  // build.json carries the global layers' rope (the loader computes the table from it).
  const auto b = nlohmann::json::parse(a->build_json);
  INFO(b.dump());
  CHECK(b.dump().find("\"factor\":8.0") != std::string::npos);
  CHECK(b.dump().find("1000000") != std::string::npos);
}

TEST_CASE("a sliding-window layer's KV cache is a ring: window + largest bucket - 1 rows rounded up to 64, plus a spare row, a sequence; its writers take ring_slots, its attention ring_base and ring = R; full layers keep max_ctx rows a sequence (a linear sliding cache, a ring read as linear, or a ring too short for a bucket, fails)") {
  const auto dir = testing::tiny_checkpoint("gemma3-ring", kTinyGemma3);
  for (const auto& c : std::vector<std::tuple<std::vector<std::int64_t>, std::int64_t, std::int64_t>>{
           {{8, 32}, 256, 64}, {{16, 64}, 512, 128}, {{8, 32}, 65, 0}, {{8, 32}, 66, 64}}) {
    // Plain locals (clang refuses doctest's INFO of a structured binding).
    const std::vector<std::int64_t> buckets = std::get<0>(c);
    const std::int64_t max_ctx = std::get<1>(c), ring = std::get<2>(c);
    testing::EmitSpec s;
    s.buckets = buckets;
    s.max_ctx = max_ctx;
    INFO("buckets up to " << buckets.back() << ", max_ctx " << max_ctx);
    auto a = testing::emit_checkpoint(dir, s);
    REQUIRE_MESSAGE(a.ok(), (a.ok() ? "" : a.error().message));
    CHECK(emit::verify(a->packet, emit::opcode_table()).empty());
    CHECK(a->kv_ring == ring);
    CHECK(a->kv_ring == model::kv_ring(16, buckets.back(), max_ctx));
    const auto b = emit::parse_build_json(a->build_json, "build.json");
    REQUIRE(b.ok());
    CHECK(b->kv_ring == ring);
    // kTinyGemma3: layers 0 and 2 slide (window 16), layer 1 is global.
    const std::int64_t seqs = a->max_seqs, pad = a->pad_slots;
    for (const auto& t : a->packet.tensors) {
      if (t.source != MET_SOURCE_KV) continue;
      INFO(t.name);
      const bool sliding = t.name.starts_with("kv.L0.") || t.name.starts_with("kv.L2.");
      const std::int64_t per_seq = sliding && ring > 0 ? ring + 1 : max_ctx;
      CHECK(t.shape[0] == static_cast<std::uint64_t>(seqs * per_seq + pad));
    }
    for (const auto& p : a->packet.programs)
      for (const auto& d : p.instrs) {
        const auto* info = emit::find_opcode(d.opcode);
        const std::string op = info->name;
        const bool sliding = d.scope.find("sliding") != std::string::npos;
        const bool ringed = sliding && ring > 0;
        INFO(p.name << ": " << op << " in " << d.scope);
        auto io_of = [&](const char* field) {
          const auto h = d.tensors[static_cast<std::size_t>(emit::tensor_index(*info, field))];
          REQUIRE(a->packet.tensors[h].source == MET_SOURCE_IO);
          return static_cast<emit::IoField>(a->packet.tensors[h].ref);
        };
        if (op == "kv_append" || op.starts_with("gemv_rmsnorm_qkv")) {
          CHECK(io_of("slots") == (ringed ? emit::IoField::ring_slots : emit::IoField::slots));
        } else if (op == "attn_prefill" || op == "attn_decode_split") {
          CHECK(io_of("seq_base") == (ringed ? emit::IoField::ring_base : emit::IoField::seq_base));
          CHECK(d.ints[static_cast<std::size_t>(emit::int_index(*info, "ring"))] == (ringed ? ring : 0));
        }
      }
  }
}

TEST_CASE("on h200-sxm a sliding layer's cache is a ring too (hopper's kv_ring), and only the attention ops whose hopper bodies read rings carry ring != 0: attn_decode_split_merge, flash_prefill_wgmma, flash_prefill_mma (the cuda backend refuses the others)") {
  const auto dir = testing::tiny_checkpoint("gemma3-h200-ring", kTinyGemma3);
  testing::EmitSpec s;
  s.device = "h200-sxm";
  s.max_ctx = 256;
  s.rungs = {1, 2, 4};
  s.buckets = {32, 48};
  auto a = testing::emit_checkpoint(dir, s);
  REQUIRE_MESSAGE(a.ok(), (a.ok() ? "" : a.error().message));
  CHECK(emit::verify(a->packet, emit::opcode_table()).empty());
  CHECK(a->kv_ring == 64);  // window 16 + bucket 48 - 1 = 63, rounded up to 64
  std::set<std::string> ringed;
  for (const auto& p : a->packet.programs)
    for (const auto& d : p.instrs) {
      const auto* info = emit::find_opcode(d.opcode);
      const int r = emit::int_index(*info, "ring");
      if (r < 0) continue;
      const std::int64_t ring = d.ints[static_cast<std::size_t>(r)];
      INFO(p.name << ": " << info->name << " in " << d.scope);
      CHECK(ring == (d.scope.find("sliding") != std::string::npos ? 64 : 0));
      if (ring != 0) ringed.insert(info->name);
    }
  // Decode and both prefill routes: tiny-gemma3's head dim 64 takes the wgmma flash.
  CHECK(ringed == std::set<std::string>{"attn_decode_split_merge", "flash_prefill_wgmma"});
}

TEST_CASE("KvRing::map: a sequence's row at position p goes to s(R+1) + p % R, an idle decode row to its sequence's spare row s(R+1) + R, a padding row into the pad region after max_seqs(R+1); no ring leaves the linear rows") {
  const emit::KvRing r{/*max_ctx=*/256, /*max_seqs=*/4, /*ring=*/64};
  auto same = [](emit::KvRing::Rows x, std::int64_t slot, std::int64_t base) {
    CHECK(x.slot == slot);
    CHECK(x.base == base);
  };
  same(r.map(2 * 256 + 70, 2 * 256, 70), 2 * 65 + 6, 2 * 65);     // sequence 2, position 70
  same(r.map(3 * 256 + 63, 3 * 256, 63), 3 * 65 + 63, 3 * 65);    // the ring's last row
  same(r.map(1 * 256 + 255, 1 * 256, 0), 1 * 65 + 64, 1 * 65);    // idle decode row: the spare
  same(r.map(4 * 256 + 5, 4 * 256, 0), 4 * 65 + 5, 4 * 65);       // padding row 5
  same(emit::KvRing{256, 4, 0}.map(300, 256, 44), 300, 256);     // no ring
}

TEST_CASE("Gemma-3 on h200-sxm runs its (1 + w) norms as rmsnorm_offset or folded into the gemv ops with their offset, never as plain norms, a batch of 16 on the gemv family, and every wgmma GEMM in tiles the body takes (a norm bound without its offset, a GEMM planned at 16 rows, or a GEMM cut into one part per stream, fails)") {
  const auto dir = testing::tiny_checkpoint("gemma3-h200", kTinyGemma3);
  testing::EmitSpec s;
  s.device = "h200-sxm";
  s.max_ctx = 256;
  s.rungs = {1, 16};
  s.buckets = {128};
  auto a = testing::emit_checkpoint(dir, s);
  REQUIRE_MESSAGE(a.ok(), (a.ok() ? "" : a.error().message));
  CHECK(emit::verify(a->packet, emit::opcode_table()).empty());
  int wgmma = 0;
  for (const auto& p : a->packet.programs) {
    INFO(p.name);
    std::map<std::string, int> count;
    int norms = 0;
    for (const auto& d : p.instrs) {
      const auto* op = emit::find_opcode(d.opcode);
      INFO(op->name << " in " << d.scope);
      ++count[op->name];
      norms += norms_of(op->name);
      if (op->name == "rmsnorm_offset") CHECK(d.imms == std::vector<float>{1e-6f, 1.0f});
      if (op->name.starts_with("gemv_rmsnorm_") || op->name == "rmsnorm_residual") check_fused_norm(d, 1, 1, 1e-6f);
      if (p.kind != MET_PROGRAM_PREFILL) CHECK(op->family != "gemm");
      if (op->family != "gemm" || !op->name.ends_with("_wgmma")) continue;
      ++wgmma;
      const auto& w = a->packet.tensors[d.tensors[static_cast<std::size_t>(emit::tensor_index(*op, "w"))]];
      const bool gated = emit::gated_gemm(*op);
      const auto n_out = static_cast<std::int64_t>(w.shape[0]) / (gated ? 2 : 1);
      const auto parts = std::max<std::int64_t>(1, d.ints[static_cast<std::size_t>(emit::int_index(*op, "col_slices"))]);
      // Tiles of 128 columns (a gated GEMM's gate and up halves), or 256 where that still fills the streams.
      const bool tiles = parts == (n_out + 127) / 128 || (!gated && parts == (n_out + 255) / 256);
      CHECK(tiles);
    }
    CHECK(norms == 6 * 3 + 1);
    CHECK(count["rmsnorm"] == 0);
    CHECK(count["rmsnorm_residual"] == 2 * 3);  // the post norms and their residual adds, in every program
    if (p.kind != MET_PROGRAM_PREFILL) {  // decode folds the other norms, at 1 row and at 16
      CHECK(count["rmsnorm_offset"] == 0);
      CHECK(count["gemv_rmsnorm_qkv_qknorm_rope"] == 3);
      CHECK(count["gemv_rmsnorm_gate_up_gelu"] == 3);
    }
  }
  CHECK(wgmma > 0);
}

TEST_CASE("a Gemma-3 config whose global and local layers ask for scaled ropes of two bases is refused: build.json carries one scaled rope") {
  const std::string config = kTinyGemma3;
  const auto dir = testing::tiny_checkpoint("gemma3-rope", config);
  auto graph = testing::graph_of(dir);
  // Both kinds' ropes scaled, with their own bases.
  for (auto& kind : graph.kinds)
    for (auto& n : kind.nodes)
      if (n.op == "rope") n.params["scaled"] = 1;
  auto target = planner::resolve_target(testing::tree_lib().lib, "host-cpu");
  REQUIRE(target.ok());
  DiskCheckpoint src(dir.string());
  auto layout = emit::read_checkpoint_layout(src);
  REQUIRE(layout.ok());
  emit::EmitOptions o;
  o.max_ctx = 128;
  o.decode_rungs = {1};
  o.prefill_buckets = {8};
  o.config_json = config;
  auto a = emit::emit(testing::tree_lib().lib, *target, graph, *layout, o);
  REQUIRE_FALSE(a.ok());
  CHECK(a.error().message.find("met carries one scaled rope per emit") != std::string::npos);
}

TEST_CASE("build.json programs without a name or digest are refused, with the file named") {
  auto a = testing::emit_checkpoint(ckpt(), {});
  REQUIRE(a.ok());
  auto j = nlohmann::json::parse(a->build_json);
  j["programs"][0].erase("digest");
  const auto bad = emit::parse_build_json(j.dump(), "x/build.json");
  REQUIRE_FALSE(bad.ok());
  CHECK(bad.error().message == "x/build.json: programs: each entry needs a string name and digest");
  j["programs"] = "decode_1";
  const auto bad2 = emit::parse_build_json(j.dump(), "x/build.json");
  REQUIRE_FALSE(bad2.ok());
  CHECK(bad2.error().message == "x/build.json: programs: not an array");
}

TEST_CASE("--kv-dtype fp8: the caches are F8_E4M3 at half the bytes, and every op that writes or reads them says kv_fp8 with scale 1 (catches a bf16 allocation under an fp8 flag)") {
  testing::EmitSpec bf, f8;
  f8.kv = Format::fp8_e4m3;
  auto a = testing::emit_checkpoint(ckpt(), bf), b = testing::emit_checkpoint(ckpt(), f8);
  REQUIRE_MESSAGE(a.ok(), (a.ok() ? "" : a.error().message));
  REQUIRE_MESSAGE(b.ok(), (b.ok() ? "" : b.error().message));
  CHECK(emit::verify(b->packet, emit::opcode_table()).empty());
  auto kv_bytes = [](const emit::PacketFile& f, std::uint32_t dtype) {
    std::uint64_t n = 0;
    for (const auto& t : f.tensors) {
      if (t.source != MET_SOURCE_KV) continue;
      CHECK(t.dtype == dtype);
      n += t.bytes;
    }
    return n;
  };
  const std::uint64_t kb = kv_bytes(a->packet, MET_DTYPE_BF16), k8 = kv_bytes(b->packet, MET_DTYPE_FP8_E4M3);
  CHECK(kb > 0);
  CHECK(k8 * 2 == kb);
  std::size_t touching = 0;
  for (const auto& p : b->packet.programs)
    for (const auto& d : p.instrs) {
      const auto* op = emit::find_opcode(d.opcode);
      const int k = emit::int_index(*op, "kv_fp8");
      if (k < 0) continue;
      ++touching;
      CHECK(d.ints[static_cast<std::size_t>(k)] == 1);
      CHECK(d.imms[d.imms.size() - 2] == 1.0f);  // k_scale, v_scale: the last two imms
      CHECK(d.imms[d.imms.size() - 1] == 1.0f);
    }
  CHECK(touching > 0);
  // The planner reads the same format: KV bytes per token and the memory fit's KV halve.
  auto& tl = testing::tree_lib();
  auto target = planner::resolve_target(tl.lib, "host-cpu");
  REQUIRE(target.ok());
  auto graph = testing::graph_of(ckpt());
  estimate::Options o;
  auto bf_an = estimate::analyze(tl.lib, *target, graph, o);
  graph.kv = Format::fp8_e4m3;
  auto f8_an = estimate::analyze(tl.lib, *target, graph, o);
  REQUIRE(bf_an.ok());
  REQUIRE(f8_an.ok());
  CHECK(bf_an->key.kv_bytes_per_token > 0);
  CHECK(f8_an->key.kv_bytes_per_token * 2 == bf_an->key.kv_bytes_per_token);
  CHECK(f8_an->fit.kv * 2 == bf_an->fit.kv);
}

TEST_CASE("an fp8 KV cache on a checkpoint that carries calibrated KV scales (modelopt k_proj.k_scale) encodes each layer's caches with that layer's scales, never 1, and weights.json records them (catches scale 1 or another layer's scale)") {
  const auto dir = testing::tiny_checkpoint("kv-scales", testing::tiny_llama_config(2, 128), 7, Format::fp8_e4m3,
                                            model::Fp8Layout::modelopt);
  DiskCheckpoint src(dir.string());
  auto layout = emit::read_checkpoint_layout(src);
  REQUIRE(layout.ok());
  auto g = model::instantiate_checkpoint(testing::tree_lib().tree, testing::tree_lib().lib.circuits, src);
  REQUIRE(g.ok());
  CHECK(g->kv == Format::fp8_e4m3);  // hf_quant_config.json: kv_cache_quant_algo FP8
  testing::EmitSpec spec;
  spec.kv = Format::fp8_e4m3;
  auto a = testing::emit_checkpoint(dir, spec);
  REQUIRE_MESSAGE(a.ok(), (a.ok() ? "" : a.error().message));
  CHECK(emit::verify(a->packet, emit::opcode_table()).empty());
  std::map<int, std::pair<float, float>> want;
  for (int l = 0; l < 2; ++l) {
    const std::string attn = "model.layers." + std::to_string(l);
    want[l] = {layout->kv_scale_values.at(attn + emit::kKScaleSuffix), layout->kv_scale_values.at(attn + emit::kVScaleSuffix)};
  }
  CHECK(want[0].first != want[1].first);
  REQUIRE(a->weights.kv_scales.size() == 2);
  for (const auto& k : a->weights.kv_scales) CHECK(std::pair{k.k_scale, k.v_scale} == want.at(k.layer));
  std::size_t touching = 0;
  for (const auto& p : a->packet.programs)
    for (const auto& d : p.instrs) {
      const auto* op = emit::find_opcode(d.opcode);
      const int k = emit::int_index(*op, "kv_fp8"), kc = emit::tensor_index(*op, "k_cache");
      if (k < 0) continue;
      REQUIRE(kc >= 0);
      const std::string cache = a->packet.tensors.at(d.tensors.at(static_cast<std::size_t>(kc))).name;  // "kv.L<l>.k"
      const int layer = std::stoi(cache.substr(4, cache.size() - 6));
      CAPTURE(cache);
      ++touching;
      CHECK(d.ints[static_cast<std::size_t>(k)] == 1);
      CHECK(d.imms[d.imms.size() - 2] == want.at(layer).first);
      CHECK(d.imms[d.imms.size() - 1] == want.at(layer).second);
    }
  CHECK(touching > 0);
  // With a bf16 cache the scales are unused: nothing recorded.
  testing::EmitSpec bf;
  auto b = testing::emit_checkpoint(dir, bf);
  REQUIRE(b.ok());
  CHECK(b->weights.kv_scales.empty());
}

TEST_CASE("a modelopt FP8 checkpoint (static fp8 activations) emits W8A8 for host-cpu and is refused for h200-sxm, whose class has no W8A8 body: never run weight-only (a W8A16 substitute fails)") {
  const auto dir = testing::tiny_checkpoint("modelopt-paths", testing::tiny_llama_config(2, 128), 7, Format::fp8_e4m3,
                                            model::Fp8Layout::modelopt);
  testing::EmitSpec cpu;  // bf16 KV: the checkpoint's KV scales stay unused
  auto a = testing::emit_checkpoint(dir, cpu);
  REQUIRE_MESSAGE(a.ok(), (a.ok() ? "" : a.error().message));
  auto target = planner::resolve_target(testing::tree_lib().lib, "host-cpu");
  REQUIRE(target.ok());
  const auto graph = testing::graph_of(dir);
  const auto plan = plan_for(*target, graph, planner::Mode::decode, 1);
  int w8a8 = 0;
  for (const auto& sc : plan.scopes)
    for (const auto& g : sc.groups) {
      if (!g.exec || g.exec->weight != "fp8-e4m3") continue;
      CHECK(g.exec->act_math == "fp8-e4m3");
      ++w8a8;
    }
  CHECK(w8a8 > 0);
  testing::EmitSpec gpu;
  gpu.device = "h200-sxm";
  gpu.buckets = {128};
  gpu.max_ctx = 256;
  auto h = testing::emit_checkpoint(dir, gpu);
  REQUIRE_FALSE(h.ok());
  CHECK(h.error().message.find("fp8-e4m3 x fp8-e4m3") != std::string::npos);
}

TEST_CASE("--kv-dtype fp8 for a class whose bodies read bf16 caches (h200-sxm) is refused, naming every cache op and the class's KV formats; host-cpu emits it (a GPU emit that allocates e4m3 caches its bodies read as bf16 fails)") {
  testing::EmitSpec gpu;
  gpu.device = "h200-sxm";
  gpu.buckets = {128};
  gpu.max_ctx = 256;
  gpu.kv = Format::fp8_e4m3;
  auto h = testing::emit_checkpoint(ckpt(), gpu);
  REQUIRE_FALSE(h.ok());
  const std::string& m = h.error().message;
  CHECK(m.find("kv_append (kv_append: no path for the fp8-e4m3 KV cache (class 'hopper' reads bf16 caches))") != std::string::npos);
  CHECK(m.find("attention (flash_prefill_wgmma: no path for the fp8-e4m3 KV cache") != std::string::npos);
  gpu.kv = Format::bf16;
  CHECK(testing::emit_checkpoint(ckpt(), gpu).ok());
  testing::EmitSpec cpu;
  cpu.kv = Format::fp8_e4m3;
  CHECK(testing::emit_checkpoint(ckpt(), cpu).ok());
}

namespace {

std::string tiny_gemma4(const std::function<void(nlohmann::json&)>& edit = {}) {
  std::ifstream in(std::string(MET_SOURCE_DIR) + "/tests/oracle/configs/tiny-gemma4.json");
  std::stringstream ss;
  ss << in.rdbuf();
  auto j = nlohmann::json::parse(ss.str());
  if (edit) edit(j);
  return j.dump();
}

}  // namespace

TEST_CASE("a GPU decode splits a sliding layer's keys by its window, not by max_ctx: at least 32 keys a split (a window of 512 takes 16 splits where its blocks would fill 66 streams; the full layers keep theirs)") {
  const auto dir = testing::tiny_checkpoint("gemma4-window-splits", tiny_gemma4([](nlohmann::json& j) { j["sliding_window"] = 512; }));
  auto s = split_merge_spec();
  s.rungs = {1};
  auto a = testing::emit_checkpoint(dir, s);
  REQUIRE_MESSAGE(a.ok(), (a.ok() ? "" : a.error().message));
  int sliding = 0, full = 0;
  for (const auto& p : a->packet.programs)
    for (const auto& d : p.instrs) {
      const auto* op = emit::find_opcode(d.opcode);
      if (op->name != "attn_decode_split_merge") continue;
      const auto at = [&](const char* n) { return d.ints[static_cast<std::size_t>(emit::int_index(*op, n))]; };
      if (at("window") > 0) {
        CHECK(at("window") == 512);
        CHECK(at("splits") == 512 / 32);
        ++sliding;
      } else {
        CHECK(at("splits") > 512 / 32);
        ++full;
      }
    }
  CHECK(sliding > 0);
  CHECK(full > 0);
}

TEST_CASE("--split-keys sets the fewest keys a GPU decode split takes: 128 gives a window of 512 four splits and a full layer of max_ctx 1024 eight, where 32 gave 16 and more (a knob the emit ignores, or one that also cuts the window's splits below the keys, fails)") {
  const auto dir = testing::tiny_checkpoint("gemma4-split-keys", tiny_gemma4([](nlohmann::json& j) { j["sliding_window"] = 512; }));
  auto s = split_merge_spec();
  s.rungs = {1};
  s.max_ctx = 1024;
  const auto splits_of = [&](std::int64_t keys) {
    s.split_keys = keys;
    auto a = testing::emit_checkpoint(dir, s);
    REQUIRE_MESSAGE(a.ok(), (a.ok() ? "" : a.error().message));
    CHECK(emit::verify(a->packet, emit::opcode_table()).empty());
    std::set<std::pair<bool, std::int64_t>> seen;  // (sliding, splits)
    for (const auto& p : a->packet.programs)
      for (const auto& d : p.instrs) {
        const auto* op = emit::find_opcode(d.opcode);
        if (op->name != "attn_decode_split_merge") continue;
        const auto at = [&](const char* n) { return d.ints[static_cast<std::size_t>(emit::int_index(*op, n))]; };
        seen.insert({at("window") > 0, at("splits")});
      }
    return seen;
  };
  const auto fine = splits_of(32);
  CHECK(fine.count({true, 16}) == 1);
  for (const auto& [sliding, n] : fine)
    if (!sliding) CHECK(n > 8);
  CHECK(splits_of(128) == std::set<std::pair<bool, std::int64_t>>{{true, 4}, {false, 8}});
}

TEST_CASE("Gemma-4 on host-cpu binds every step from config.json: norms of w rounded once, a weightless v_norm, V from k_proj on full layers, global head size and KV heads, the sliding rope plain and the full one proportional, unscaled scores, the layer scalar from its tensor (a step bound from a default fails)") {
  const auto dir = testing::tiny_checkpoint("gemma4-cpu", tiny_gemma4());
  testing::EmitSpec s;
  s.max_ctx = 256;
  auto a = testing::emit_checkpoint(dir, s);
  REQUIRE_MESSAGE(a.ok(), (a.ok() ? "" : a.error().message));
  CHECK(emit::verify(a->packet, emit::opcode_table()).empty());
  const auto& tensors = a->packet.tensors;
  for (const auto& p : a->packet.programs) {
    INFO(p.name);
    std::map<std::string, int> count;
    int weightless = 0, norms = 0, scaled = 0;
    for (const auto& d : p.instrs) {
      const std::string op = emit::find_opcode(d.opcode)->name;
      INFO(op << " in " << d.scope);
      ++count[op];
      const bool sliding = d.scope.find("sliding") != std::string::npos;
      norms += norms_of(op);
      if (op == "rmsnorm_offset") {
        CHECK(d.imms == std::vector<float>{1e-6f, 0.0f});
        if (d.tensors[1] == MET_NO_TENSOR) ++weightless;
      } else if (op.starts_with("gemv_rmsnorm_") || op == "rmsnorm_residual") {
        check_fused_norm(d, 1, 0, 1e-6f);  // w rounded once, as rmsnorm_offset
        const auto* info = emit::find_opcode(d.opcode);
        if (op == "gemv_rmsnorm_qkv_qknorm_rope") {  // the v_norm folded in: a fourth norm, weightless
          const auto vn = d.ints[static_cast<std::size_t>(emit::int_index(*info, "v_norm"))];
          CHECK(vn == 1);
          weightless += static_cast<int>(vn);
          norms += static_cast<int>(vn);
        }
        if (op == "rmsnorm_residual" && d.tensors[static_cast<std::size_t>(emit::tensor_index(*info, "s"))] != MET_NO_TENSOR) {
          ++scaled;  // the post-MLP norm, its residual add and the layer scalar
          CHECK(tensors[d.tensors[static_cast<std::size_t>(emit::tensor_index(*info, "s"))]].name.find("layer_scalar") != std::string::npos);
        }
      } else if (op == "rope") {
        CHECK(d.imms == std::vector<float>{sliding ? 10000.0f : 1000000.0f, /*attn_scale=*/1.0f});
        CHECK(d.ints[4] == (sliding ? 64 : 128));  // head_dim
        CHECK(d.ints[5] == (sliding ? 64 : 128));  // rotary_dim: the whole head
        CHECK((d.tensors[2] == MET_NO_TENSOR) == sliding);
        if (!sliding) CHECK(tensors[d.tensors[2]].source == MET_SOURCE_GENERATED);
      } else if (op == "kv_append") {
        CHECK(d.ints[4] == (sliding ? 2 : 1));  // kv_heads: num_global_key_value_heads on full layers
      } else if (op == "attn_prefill" || op == "attn_decode_split") {
        const auto* info = emit::find_opcode(d.opcode);
        CHECK(d.ints[static_cast<std::size_t>(emit::int_index(*info, "window"))] == (sliding ? 16 : 0));
        CHECK(d.ints[static_cast<std::size_t>(emit::int_index(*info, "head_dim"))] == (sliding ? 64 : 128));
        CHECK(d.imms[1] == 1.0f);
      } else if (op == "scale_tensor") {
        CHECK(tensors[d.tensors[1]].name.find("layer_scalar") != std::string::npos);
      } else if (op == "softcap") {
        CHECK(d.imms == std::vector<float>{30.0f});
      }
    }
    // Seven norms a layer (four on the residual stream, three per head) and the final one; one
    // v_norm a layer.
    CHECK(norms == 7 * 6 + 1);
    CHECK(weightless == 6);
    CHECK(count["rmsnorm"] == 0);
    CHECK(count["scale"] == 1);
    CHECK(count["scale_tensor"] + scaled == 6);
    CHECK(scaled == 6);
    CHECK(count["residual_add"] == 0);  // every residual add follows a post norm
    CHECK(count["rope"] + count["gemv_rmsnorm_qkv_qknorm_rope"] == 6);
    if (p.kind != MET_PROGRAM_PREFILL) CHECK(count["gemv_rmsnorm_qkv_qknorm_rope"] == 6);
  }
  // The full layers' qkv reads k_proj twice (V = k_proj's output), and no v_proj.
  bool kkv = false;
  for (const auto& w : a->weights.tensors) {
    if (w.name.find("layers.2.self_attn.qkv") == std::string::npos) continue;
    kkv = true;
    CHECK(w.shape == std::vector<std::uint64_t>{(4 + 2) * 128, 320});
  }
  CHECK(kkv);
  const auto b = nlohmann::json::parse(a->build_json);
  INFO(b.dump());
  CHECK(b["rope"]["type"] == "proportional");
  CHECK(b["rope"]["partial_rotary_factor"] == 0.25);
}

TEST_CASE("the proportional rope's table: the first partial_rotary_factor * rotary_dim / 2 frequencies theta^(-2i/rotary_dim), the rest 0") {
  emit::RopeConfig r;
  r.type = "proportional";
  r.theta = 1e6;
  r.partial_rotary_factor = 0.25;
  const auto f = emit::rope_inv_freq(r, 512);
  REQUIRE(f.size() == 256);
  for (std::size_t i = 0; i < f.size(); ++i) {
    INFO(i);
    CHECK(f[i] == (i < 64 ? static_cast<float>(std::pow(1e6, -2.0 * static_cast<double>(i) / 512)) : 0.0f));
  }
}

TEST_CASE("Gemma-4 with KV sharing: the shared layers append nothing and have no caches, their attention reads the caches of the last layer of their type before them; more shared layers than a source allows is refused naming the layer") {
  const auto dir = testing::tiny_checkpoint("gemma4-kv-shared", tiny_gemma4([](nlohmann::json& j) { j["num_kv_shared_layers"] = 2; }));
  auto a = testing::emit_checkpoint(dir, {});
  REQUIRE_MESSAGE(a.ok(), (a.ok() ? "" : a.error().message));
  CHECK(emit::verify(a->packet, emit::opcode_table()).empty());
  std::set<std::string> caches;
  for (const auto& t : a->packet.tensors)
    if (t.source == MET_SOURCE_KV) caches.insert(t.name);
  CHECK(caches == std::set<std::string>{"kv.L0.k", "kv.L0.v", "kv.L1.k", "kv.L1.v", "kv.L2.k", "kv.L2.v", "kv.L3.k", "kv.L3.v"});
  for (const auto& p : a->packet.programs)
    for (const auto& d : p.instrs) {
      const std::string op = emit::find_opcode(d.opcode)->name;
      const bool l4 = d.scope.find(" L4") != std::string::npos, l5 = d.scope.find(" L5") != std::string::npos;
      if (!l4 && !l5) continue;
      INFO(op << " in " << d.scope);
      CHECK(op != "kv_append");
      if (op == "attn_prefill" || op == "attn_decode_split")
        CHECK(a->packet.tensors[d.tensors[1]].name == (l4 ? "kv.L3.k" : "kv.L2.k"));
    }
  // Five shared layers leave layer 0 the only one before them: no full layer to share from.
  const auto b = model::plan_synth(testing::tree_lib().lib.circuits, tiny_gemma4([](nlohmann::json& j) { j["num_kv_shared_layers"] = 5; }),
                                   "config.json", model::SynthOptions{});
  REQUIRE_FALSE(b.ok());
  CHECK(b.error().message.ends_with("config.json: layer 2 shares the KV of the last 'full' layer before layer 1, and there is none"));
}

TEST_CASE("a proportional rope without partial_rotary_factor is refused naming it; a scaled sliding_attention rope is refused (the sliding layers run theirs unscaled)") {
  const auto s = emit::parse_rope(tiny_gemma4([](nlohmann::json& j) {
                                    j["rope_parameters"]["sliding_attention"] = {{"rope_type", "linear"}, {"factor", 2.0}, {"rope_theta", 10000.0}};
                                  }),
                                  "config.json");
  REQUIRE_FALSE(s.ok());
  CHECK(s.error().message ==
        "config.json: rope_parameters.sliding_attention: rope type 'linear' on the sliding layers is not emitted (their rope runs unscaled)");
  const auto r = emit::parse_rope(tiny_gemma4([](nlohmann::json& j) { j["rope_parameters"]["full_attention"].erase("partial_rotary_factor"); }),
                                  "config.json");
  REQUIRE_FALSE(r.ok());
  CHECK(r.error().message == "config.json: rope_parameters.full_attention: rope type 'proportional' needs 'partial_rotary_factor'");
}

TEST_CASE("Gemma-4 with per-layer inputs (tests/oracle/configs/tiny-gemma4-e.json): the pre scope builds them once ([rows, layers * width]), each layer's gelu_mul_split reads its own columns of them, and the scales of the projection and of the sum apply unrounded (2^-1/2, hidden^-1/2) while the table's sqrt(width) rounds to bf16") {
  std::ifstream in(std::string(MET_SOURCE_DIR) + "/tests/oracle/configs/tiny-gemma4-e.json");
  std::stringstream ss;
  ss << in.rdbuf();
  const auto dir = testing::tiny_checkpoint("gemma4-e", ss.str());
  auto a = testing::emit_checkpoint(dir, {});
  REQUIRE_MESSAGE(a.ok(), (a.ok() ? "" : a.error().message));
  CHECK(emit::verify(a->packet, emit::opcode_table()).empty());
  for (const auto& p : a->packet.programs) {
    INFO(p.name);
    std::vector<float> pre_scales;
    int splits = 0;
    for (const auto& d : p.instrs) {
      const std::string op = emit::find_opcode(d.opcode)->name;
      if (op == "scale" && d.scope == "pre") pre_scales.push_back(d.imms[0]);
      if (op != "gelu_mul_split") continue;
      const int layer = std::stoi(d.scope.substr(d.scope.rfind('L') + 1));
      CHECK(d.ints[1] == 32);                // dim: the per-layer width
      CHECK(d.ints[2] == 6 * 32);            // up_stride: every layer's inputs
      CHECK(d.ints[3] == layer * 32);        // up_col0: this layer's
      ++splits;
    }
    CHECK(splits == 6);
    // sqrt(320) and sqrt(32) rounded to bf16: 17.875 and 5.65625.
    CHECK(pre_scales == std::vector<float>{17.875f, 5.65625f, static_cast<float>(1 / std::sqrt(320.0)),
                                           static_cast<float>(std::sqrt(0.5))});
  }
}

TEST_CASE("a prefill program's head reads prefill_head_rows rows gathered by head_rows, and a decode program has no gather") {
  for (const std::string device : {"host-cpu", "h200-sxm"}) {
    INFO(device);
    testing::EmitSpec s;
    s.device = device;
    s.rungs = {1, 2, 8};
    s.buckets = device == "host-cpu" ? std::vector<std::int64_t>{4, 32} : std::vector<std::int64_t>{128, 512};
    s.max_ctx = 1024;
    auto a = testing::emit_checkpoint(ckpt(), s);
    REQUIRE_MESSAGE(a.ok(), (a.ok() ? "" : a.error().message));
    CHECK(emit::verify(a->packet, emit::opcode_table()).empty());
    for (const auto& p : a->packet.programs) {
      INFO(p.name);
      const bool prefill = p.kind == MET_PROGRAM_PREFILL;
      const std::int64_t heads = prefill ? planner::prefill_head_rows(p.rows) : p.rows;
      std::size_t gathers = 0, gather_at = 0, first_head = 0;
      for (std::size_t i = 0; i < p.instrs.size(); ++i) {
        const auto& d = p.instrs[i];
        const auto* op = emit::find_opcode(d.opcode);
        if (op->name == "gather_rows") {
          ++gathers;
          gather_at = i;
          const auto& x = a->packet.tensors[d.tensors[0]];
          const auto& index = a->packet.tensors[d.tensors[1]];
          const auto& out = a->packet.tensors[d.tensors[2]];
          CHECK(x.name == p.name + ".x");
          CHECK(x.shape[0] == p.rows);
          CHECK(index.source == MET_SOURCE_IO);
          CHECK(index.ref == static_cast<std::uint64_t>(emit::IoField::head_rows));
          CHECK(index.shape[0] == static_cast<std::uint64_t>(heads));
          CHECK(out.shape[0] == static_cast<std::uint64_t>(heads));
          CHECK(d.ints[0] == heads);
          CHECK(d.ints[1] == p.rows);
        }
        if (first_head == 0 && d.scope == "post" && op->name != "gather_rows") first_head = i;
      }
      // the logits (what the head writes and sample reads) have one row per head row
      for (const auto& t : a->packet.tensors)
        if (t.name == p.name + ".io.logits") CHECK(t.shape[0] == static_cast<std::uint64_t>(heads));
      CHECK(gathers == (prefill ? 1u : 0u));
      if (prefill) CHECK(gather_at + 1 == first_head);
    }
  }
}

TEST_CASE("a GPU decode of one row splits the router's experts over the streams, an expert a part: the row in each slice, ids and weights counted against the last part, the logits workspace in expert ranges; more rows, prefill and the cpu keep a slice per row part (a router of a slice per row at one row, or parts whose writes overlap, fails)") {
  std::ifstream in(std::string(MET_SOURCE_DIR) + "/tests/oracle/configs/tiny-qwen3-moe.json");
  std::stringstream cfg;
  cfg << in.rdbuf();
  auto j = nlohmann::json::parse(cfg.str());
  j["num_experts"] = 64;
  const auto ck = testing::tiny_checkpoint("router-parts", j.dump());
  testing::EmitSpec s;
  s.device = "h200-sxm";
  s.rungs = {1, 16};
  s.buckets = {128};
  s.max_ctx = 256;
  auto a = testing::emit_checkpoint(ck, s);
  REQUIRE_MESSAGE(a.ok(), (a.ok() ? "" : a.error().message));
  CHECK(emit::verify(a->packet, emit::opcode_table()).empty());
  const std::int64_t sm = a->packet.sm_count;
  std::vector<int> routers;  // per program
  for (const auto& p : a->packet.programs) {
    routers.push_back(0);
    for (const auto& d : p.instrs) {
      const auto* op = emit::find_opcode(d.opcode);
      if (!op->name.starts_with("moe_router")) continue;
      ++routers.back();
      INFO(p.name);
      const auto experts = static_cast<std::int64_t>(a->packet.tensors[d.tensors[1]].shape[0]);
      const auto parts = emit::col_parts(d);
      if (p.rows > 1) {
        CHECK(parts == 1);
        CHECK(d.slices == static_cast<std::uint32_t>(std::min<std::int64_t>(p.rows, sm)));
        continue;
      }
      // 64 experts on 132 streams: an expert a part (a part scores at most MET_MOE_ROUTER_PART_EXPERTS)
      REQUIRE(experts <= sm);
      CHECK(parts == experts);
      CHECK(d.slices == static_cast<std::uint32_t>(parts));
      const auto ids = static_cast<std::size_t>(emit::tensor_index(*op, "ids"));
      const auto logits = static_cast<std::size_t>(emit::tensor_index(*op, "logits"));
      for (std::uint32_t sl = 0; sl < d.slices; ++sl) {
        CHECK(emit::slice_rows(d, sl).end - emit::slice_rows(d, sl).begin == p.rows);
        const auto e = op->extent(d, a->packet, ids, sl);
        CHECK((e.end > e.begin) == (sl + 1 == d.slices));
        CHECK(op->extent(d, a->packet, logits, sl).end > op->extent(d, a->packet, logits, sl).begin);
      }
    }
  }
  // every program routes in the same MoE layers
  REQUIRE(routers.size() == 3);
  CHECK(routers[0] > 0);
  CHECK(routers[1] == routers[0]);
  CHECK(routers[2] == routers[0]);
  s.device = "host-cpu";
  s.threads = 4;
  auto c = testing::emit_checkpoint(ck, s);
  REQUIRE(c.ok());
  for (const auto& p : c->packet.programs)
    for (const auto& d : p.instrs)
      if (emit::find_opcode(d.opcode)->name.starts_with("moe_router")) CHECK(emit::col_parts(d) == 1);
}
