// emit --tp N (src/emit/tensor_parallel.cpp and its binding): each rank's packet holds its share of
// the weights and the collectives the planner places; counts that N does not divide, classes
// without collective bodies and architectures without split rules are refused by name. A GPU
// class's collectives are cut into many slices, placed alike on every rank.
#include <doctest/doctest.h>

#include <map>

#include <algorithm>
#include <filesystem>
#include <fstream>

#include "../interp/tiny_model.hpp"
#include "emit/opcodes.hpp"
#include "emit/tensor_parallel.hpp"
#include "estimate/analysis.hpp"
#include "kernels/common/interp/abi.h"

namespace met {
namespace {

std::string with(std::string config, const std::string& key, const std::string& value) {
  const auto at = config.find("\"" + key + "\"");
  REQUIRE(at != std::string::npos);
  const auto colon = config.find(':', at), end = config.find_first_of(",}", colon);
  return config.replace(colon + 1, end - colon - 1, " " + value);
}

std::int64_t count_ops(const emit::ProgramDesc& p, const std::string& name) {
  std::int64_t n = 0;
  for (const auto& d : p.instrs) n += emit::find_opcode(d.opcode)->name == name;
  return n;
}

// Weight bytes one decode step of one row reads on a rank: every checkpoint tensor of its packet,
// the embedding table replaced by the one row a token gathers, the experts' tensors at the share of
// experts one row routes to (what the planner charges at C = 1).
double decode_weight_bytes(const emit::PacketFile& f, const emit::WeightsManifest& w, double expert_share = 1.0) {
  double bytes = 0;
  for (const auto& t : f.tensors) {
    if (t.source != MET_SOURCE_CHECKPOINT) continue;
    const std::string& name = w.tensors[t.ref].name;
    const double share = name.find(".experts.") != std::string::npos ? expert_share : 1.0;
    // An embedding table (and Gemma-4's per-layer one): a gather of one row.
    const bool table = name == "model.embed_tokens.weight" || name == "model.embed_tokens_per_layer.weight";
    bytes += table ? static_cast<double>(t.bytes) / static_cast<double>(t.shape.at(0)) : static_cast<double>(t.bytes) * share;
  }
  return bytes;
}

// Every rank's packet of a TP emit, rank 0 first.
std::vector<const emit::PacketFile*> rank_packets(const emit::Assets& a) {
  std::vector<const emit::PacketFile*> ranks{&a.packet};
  for (const auto& p : a.other_ranks) ranks.push_back(&p);
  return ranks;
}

// The TP table of one decode row on h200-sxm (host-cpu has no interconnect, so no TP table): the
// row of degree tp.
estimate::CaseEstimate tp_row(const model::ModelGraph& graph, int tp) {
  auto& tl = testing::tree_lib();
  auto h200 = planner::resolve_target(tl.lib, "h200-sxm");
  REQUIRE(h200.ok());
  estimate::Options o;
  o.mode = planner::Mode::decode;
  o.rows = 1;
  auto an = estimate::analyze(tl.lib, *h200, graph, o);
  REQUIRE(an.ok());
  for (const auto& c : an->tp)
    if (c.tp == tp) return c;
  FAIL("no TP " << tp << " row in the plan");
  return {};
}

// Emits ckpt (host-cpu) at TP 2, 4 and 8 and, at each: one packet per rank, numbered; every rank's
// decode weight bytes against the plan's TP row (the experts at expert_share); every program's
// all-reduces and gathers against the planner's (`all_reduces` a step, two per layer when 0; one
// gather); then per_program(rank packet, program) and per_tp(tp, graph, assets).
template <class P, class T>
void check_tp_emits(const std::filesystem::path& ckpt, double expert_share, P&& per_program, T&& per_tp, std::int64_t all_reduces = 0) {
  const auto graph = testing::graph_of(ckpt);
  const auto layers = static_cast<std::int64_t>(graph.params.at("layers"));
  for (int tp : {2, 4, 8}) {
    CAPTURE(tp);
    testing::EmitSpec spec;
    spec.tp = tp;
    auto a = testing::emit_checkpoint(ckpt, spec);
    REQUIRE_MESSAGE(a.ok(), (a.ok() ? "" : a.error().message));
    REQUIRE(a->other_ranks.size() == static_cast<std::size_t>(tp - 1));
    const auto row = tp_row(graph, tp);
    const auto coll = estimate::tp_collectives(graph, tp);
    CHECK(coll.all_reduces == (all_reduces > 0 ? all_reduces : 2 * layers));
    CHECK(coll.gathers == 1);
    const auto ranks = rank_packets(*a);
    for (std::size_t r = 0; r < ranks.size(); ++r) {
      CAPTURE(r);
      CHECK(ranks[r]->tp_ranks == static_cast<std::uint32_t>(tp));
      CHECK(ranks[r]->tp_rank == r);
      CHECK(decode_weight_bytes(*ranks[r], a->weights, expert_share) == doctest::Approx(row.weight_bytes).epsilon(1e-12));
      for (const auto& p : ranks[r]->programs) {
        CAPTURE(p.name);
        CHECK(count_ops(p, "allreduce_residual") == coll.all_reduces);
        CHECK(count_ops(p, "allgather_cols") == coll.gathers);
        per_program(*ranks[r], p);
      }
    }
    per_tp(tp, graph, *a);
  }
}

}  // namespace

TEST_CASE("each rank's packet reads the weight bytes per device of the plan's TP table and runs the planner's collectives per step (a split that drops or repeats a weight, or a missing all-reduce, fails)") {
  // untied, and a tied head with 2 KV heads (at TP 4 and 8 each rank holds one, shared by 2 or 4 ranks)
  for (const char* cfg : {"tiny-llama3-kv8.json", "tiny-llama3.json"}) {
    CAPTURE(cfg);
    const auto ckpt = testing::tiny_checkpoint(std::string("tp-bytes-") + cfg, testing::oracle_config(cfg));
    check_tp_emits(ckpt, 1.0, [](const emit::PacketFile&, const emit::ProgramDesc&) {},
                   [](int, const model::ModelGraph&, const emit::Assets&) {});
  }
}

TEST_CASE("Gemma-3 splits like Llama around its post norms: each row-parallel o and down all-reduces its fp32 sums into y (accumulate 0) before the post norm reads it whole (with the residual add after it, or in one op with it), and each rank reads the plan's TP bytes (an all-reduce into the residual past the norm, or a norm on one rank's share, fails)") {
  // 8 heads over 8 KV heads so that 2, 4 and 8 ranks split them.
  const std::string cfg = with(with(testing::oracle_config("tiny-gemma3.json"), "num_attention_heads", "8"), "num_key_value_heads", "8");
  const auto ckpt = testing::tiny_checkpoint("tp-gemma3", cfg);
  // Each all-reduce writes y, the next instruction normalises y in place, and a residual add follows.
  auto post_norms = [](const emit::PacketFile& f, const emit::ProgramDesc& p) {
    for (std::size_t i = 0; i < p.instrs.size(); ++i) {
      const auto* op = emit::find_opcode(p.instrs[i].opcode);
      if (op->name != "allreduce_residual") continue;
      const auto& d = p.instrs[i];
      CHECK(d.ints[static_cast<std::size_t>(emit::int_index(*op, "accumulate"))] == 0);
      const std::uint32_t y = d.tensors[static_cast<std::size_t>(emit::tensor_index(*op, "x"))];
      CHECK(f.tensors.at(y).name.ends_with(".y"));
      REQUIRE(i + 2 < p.instrs.size());
      const auto* norm = emit::find_opcode(p.instrs[i + 1].opcode);
      if (norm->name == "rmsnorm_residual") {  // the post norm with its residual add after it
        CHECK(p.instrs[i + 1].tensors[static_cast<std::size_t>(emit::tensor_index(*norm, "y"))] == y);
        continue;
      }
      CHECK(norm->name.starts_with("rmsnorm"));
      CHECK(p.instrs[i + 1].tensors[static_cast<std::size_t>(emit::tensor_index(*norm, "x"))] == y);
      CHECK(emit::find_opcode(p.instrs[i + 2].opcode)->name == "residual_add");
    }
  };
  check_tp_emits(ckpt, 1.0, post_norms, [](int, const model::ModelGraph&, const emit::Assets&) {});
}

TEST_CASE("Gemma-4 E2B/E4B's per-layer inputs are whole on every rank and add no collective; its KV-sharing layers' q projection splits with the heads; Gemma-4's experts beside the dense MLP all-reduce into their own output (accumulate 0) before its post norm: one more all-reduce a MoE layer, as the planner counts (a replicated per-layer projection split, or the experts' sums added to the residual past their norm, fails)") {
  auto eight = [](std::string cfg) { return with(with(cfg, "num_attention_heads", "8"), "num_key_value_heads", "8"); };
  const auto e = testing::tiny_checkpoint("tp-gemma4-e", eight(testing::oracle_config("tiny-gemma4-e.json")));
  const auto eg = testing::graph_of(e);
  const auto e_layers = static_cast<std::int64_t>(eg.params.at("layers")), ple = static_cast<std::int64_t>(eg.params.at("ple_dim"));
  REQUIRE(ple > 0);
  // Each layer's per-layer GeGLU runs once on every rank, over the whole per-layer width.
  auto whole_ple = [&](const emit::PacketFile&, const emit::ProgramDesc& p) {
    CHECK(count_ops(p, "gelu_mul_split") == e_layers);
    for (const auto& d : p.instrs) {
      const auto* op = emit::find_opcode(d.opcode);
      if (op->name == "gelu_mul_split") CHECK(d.ints[static_cast<std::size_t>(emit::int_index(*op, "dim"))] == ple);
    }
  };
  check_tp_emits(e, 1.0, whole_ple,
                 [](int, const model::ModelGraph&, const emit::Assets& a) {
                   for (const auto& entry : a.weights.tensors)
                     if (entry.name.find("per_layer") != std::string::npos) CHECK(entry.name.find(".rank") == std::string::npos);
                 });
  const auto moe = testing::tiny_checkpoint("tp-gemma4-moe", eight(testing::oracle_config("tiny-gemma4-moe.json")));
  const auto graph = testing::graph_of(moe);
  const auto layers = static_cast<std::int64_t>(graph.params.at("layers"));
  std::int64_t moe_layers = 0;
  for (const auto& k : graph.kinds)
    if (std::any_of(k.nodes.begin(), k.nodes.end(), [](const model::Node& n) { return n.op == "moe_down"; }))
      moe_layers += static_cast<std::int64_t>(k.layers.size());
  REQUIRE(moe_layers > 0);
  // The experts' all-reduce writes their output (moe.y, accumulate 0), which post_moe_norm reads next.
  auto experts = [](const emit::PacketFile& f, const emit::ProgramDesc& p) {
    std::int64_t into_moe_y = 0;
    for (std::size_t i = 0; i < p.instrs.size(); ++i) {
      const auto* op = emit::find_opcode(p.instrs[i].opcode);
      if (op->name != "allreduce_residual") continue;
      const auto& d = p.instrs[i];
      const std::uint32_t y = d.tensors[static_cast<std::size_t>(emit::tensor_index(*op, "x"))];
      if (!f.tensors.at(y).name.ends_with("moe.y")) continue;
      ++into_moe_y;
      CHECK(d.ints[static_cast<std::size_t>(emit::int_index(*op, "accumulate"))] == 0);
      REQUIRE(i + 1 < p.instrs.size());
      const auto* norm = emit::find_opcode(p.instrs[i + 1].opcode);
      CHECK(norm->name.starts_with("rmsnorm"));
      CHECK(p.instrs[i + 1].tensors[static_cast<std::size_t>(emit::tensor_index(*norm, "x"))] == y);
    }
    CHECK(into_moe_y > 0);
  };
  check_tp_emits(moe, graph.params.at("top_k") / graph.params.at("experts"), experts,
                 [](int, const model::ModelGraph&, const emit::Assets&) {}, 2 * layers + moe_layers);
}

TEST_CASE("Gemma-4's full layers split their own KV heads: 8 sliding and 2 full KV heads give a rank 8 / N sliding heads and, from TP 4, one full KV head shared by N / 2 ranks, k_proj read twice for V in the same window (one KV split for every layer kind fails)") {
  const std::string cfg = with(with(with(testing::oracle_config("tiny-gemma4.json"), "num_attention_heads", "8"),
                                    "num_key_value_heads", "8"),
                               "num_global_key_value_heads", "2");
  const auto ckpt = testing::tiny_checkpoint("tp-gemma4", cfg);
  check_tp_emits(ckpt, 1.0, [](const emit::PacketFile&, const emit::ProgramDesc&) {},
                 [](int tp, const model::ModelGraph& graph, const emit::Assets& a) {
    const auto hidden = static_cast<std::uint64_t>(graph.params.at("hidden"));
    const auto hd = static_cast<std::uint64_t>(graph.params.at("head_dim")), ghd = static_cast<std::uint64_t>(graph.params.at("global_head_dim"));
    const auto t = static_cast<std::uint64_t>(tp);
    for (std::uint64_t r = 0; r < t; ++r) {
      CAPTURE(r);
      const emit::WeightEntry* sliding = nullptr;
      const emit::WeightEntry* full = nullptr;
      for (const auto& e : a.weights.tensors) {
        if (e.name == "model.layers.0.self_attn.qkv.rank" + std::to_string(r)) sliding = &e;
        if (e.name == "model.layers.2.self_attn.qkv.rank" + std::to_string(r)) full = &e;
      }
      REQUIRE(sliding != nullptr);
      REQUIRE(full != nullptr);
      const std::uint64_t sk = 8 / t, fk = t <= 2 ? 2 / t : 1, f0 = t <= 2 ? r * fk : r * 2 / t;  // KV heads, first head
      CHECK(sliding->parts[1].window == std::vector<std::uint64_t>{r * sk * hd, sk * hd, 0, hidden});
      CHECK(full->parts[0].window == std::vector<std::uint64_t>{r * 8 / t * ghd, 8 / t * ghd, 0, hidden});
      REQUIRE(full->parts.size() == 3);
      CHECK(full->parts[1].tensor == full->parts[2].tensor);  // attention_k_eq_v: V's rows are k_proj's
      for (std::size_t k : {1, 2}) CHECK(full->parts[k].window == std::vector<std::uint64_t>{f0 * ghd, fk * ghd, 0, hidden});
    }
  });
}

TEST_CASE("a Qwen3-MoE rank holds every expert's slice of the intermediate size and the whole router, reads the plan's TP bytes per device, and all-reduces the experts' fp32 sums at the residual (a router split, an expert cut by the wrong dimension or a missing all-reduce fails)") {
  // 8 heads over 8 KV heads so that 2, 4 and 8 ranks split them; 8 experts of 64, top 2.
  const std::string cfg = with(with(testing::oracle_config("tiny-qwen3-moe.json"), "num_attention_heads", "8"), "num_key_value_heads", "8");
  const auto ckpt = testing::tiny_checkpoint("tp-moe", cfg);
  const auto graph = testing::graph_of(ckpt);
  const double hidden = graph.params.at("hidden"), experts = graph.params.at("experts"), top_k = graph.params.at("top_k");
  const auto layers = static_cast<std::int64_t>(graph.params.at("layers"));
  std::int64_t moe_layers = 0;  // the layers of a kind with experts (mlp_only_layers are dense)
  for (const auto& k : graph.kinds)
    if (std::any_of(k.nodes.begin(), k.nodes.end(), [](const model::Node& n) { return n.op == "moe_down"; }))
      moe_layers += static_cast<std::int64_t>(k.layers.size());
  REQUIRE(moe_layers > 0);
  REQUIRE(moe_layers < layers);
  // A decode step of one row reads top_k of the experts' slices (the planner's occupancy at C = 1).
  auto experts_f32 = [&](const emit::PacketFile&, const emit::ProgramDesc& p) {
    CHECK(count_ops(p, "moe_down_f32") == moe_layers);
    CHECK(count_ops(p, "moe_down") == 0);
  };
  check_tp_emits(ckpt, top_k / experts, experts_f32, [&](int tp, const model::ModelGraph&, const emit::Assets& assets) {
    // Rank 1's windows: gate and up rows [inter / tp, 2 inter / tp) of every expert, down's columns.
    const auto w = static_cast<std::uint64_t>(graph.params.at("moe_inter")) / static_cast<std::uint64_t>(tp);
    const auto h = static_cast<std::uint64_t>(hidden), e = static_cast<std::uint64_t>(experts);
    const emit::WeightEntry* gate_up = nullptr;
    const emit::WeightEntry* down = nullptr;
    const emit::WeightEntry* router = nullptr;
    for (const auto& entry : assets.weights.tensors) {
      const bool rank1 = entry.name.starts_with("model.layers.0.") && entry.name.ends_with(".rank1");
      if (rank1 && entry.parts.size() == 2 * e) gate_up = &entry;
      if (rank1 && entry.parts.size() == e) down = &entry;
      if (entry.name.starts_with("model.layers.0.mlp.gate")) router = &entry;
    }
    REQUIRE(gate_up != nullptr);
    REQUIRE(down != nullptr);
    REQUIRE(router != nullptr);
    CHECK(router->name == "model.layers.0.mlp.gate.weight");  // one entry, shared by every rank
    CHECK(router->parts[0].window.empty());
    for (std::size_t i = 0; i < gate_up->parts.size(); ++i) {
      CAPTURE(gate_up->parts[i].tensor);
      CHECK(gate_up->parts[i].tensor.find(i % 2 == 0 ? "gate_proj" : "up_proj") != std::string::npos);
      CHECK(gate_up->parts[i].window == std::vector<std::uint64_t>{w, w, 0, h});
    }
    for (const auto& part : down->parts) CHECK(part.window == std::vector<std::uint64_t>{0, h, w, w});
    CHECK(gate_up->shape == std::vector<std::uint64_t>{e * 2 * w, h});
    CHECK(down->shape == std::vector<std::uint64_t>{e * h, w});
  });
}

TEST_CASE("with fewer KV heads than ranks a rank holds the one KV head its query heads read: 2 KV heads at TP 8 give ranks 0-3 KV head 0 and ranks 4-7 KV head 1, their q rows split 8 ways (a k or v window cut 8 ways, or the wrong head, fails)") {
  const auto ckpt = testing::tiny_checkpoint("tp-kv-shared", testing::oracle_config("tiny-llama3.json"));
  const auto graph = testing::graph_of(ckpt);
  const auto hd = static_cast<std::uint64_t>(graph.params.at("head_dim")), hidden = static_cast<std::uint64_t>(graph.params.at("hidden"));
  REQUIRE(graph.params.at("heads") == 8);
  REQUIRE(graph.params.at("kv_heads") == 2);
  testing::EmitSpec spec;
  spec.tp = 8;
  auto a = testing::emit_checkpoint(ckpt, spec);
  REQUIRE_MESSAGE(a.ok(), (a.ok() ? "" : a.error().message));
  for (int r = 0; r < 8; ++r) {
    CAPTURE(r);
    const emit::WeightEntry* qkv = nullptr;
    for (const auto& e : a->weights.tensors)
      if (e.name == "model.layers.0.self_attn.qkv.rank" + std::to_string(r)) qkv = &e;
    REQUIRE(qkv != nullptr);
    REQUIRE(qkv->parts.size() == 3);
    const std::uint64_t q0 = hd * static_cast<std::uint64_t>(r), kv0 = hd * static_cast<std::uint64_t>(r / 4);
    CHECK(qkv->parts[0].window == std::vector<std::uint64_t>{q0, hd, 0, hidden});
    CHECK(qkv->parts[1].window == std::vector<std::uint64_t>{kv0, hd, 0, hidden});
    CHECK(qkv->parts[2].window == std::vector<std::uint64_t>{kv0, hd, 0, hidden});
    CHECK(qkv->shape == std::vector<std::uint64_t>{3 * hd, hidden});
  }
  // Each rank's cache holds one KV head: every op of its packet with a kv_heads operand says 1.
  int seen = 0;
  for (const auto& ins : a->other_ranks[3].programs.front().instrs) {
    const auto* op = emit::find_opcode(ins.opcode);
    const int at = emit::int_index(*op, "kv_heads");
    if (at < 0) continue;
    ++seen;
    CHECK(ins.ints[static_cast<std::size_t>(at)] == 1);
  }
  CHECK(seen >= 8);  // 4 layers: the qkv projection that appends K and V, and attention
}

TEST_CASE("a rank holds whole heads: its qkv window is its q heads then its k and v heads, its o window their columns (a split by rows of the fused qkv, or o cut by rows, fails)") {
  const auto ckpt = testing::tiny_checkpoint("tp-windows", testing::oracle_config("tiny-llama3-kv8.json"));
  testing::EmitSpec spec;
  spec.tp = 4;
  auto a = testing::emit_checkpoint(ckpt, spec);
  REQUIRE(a.ok());
  const emit::WeightEntry* qkv = nullptr;
  const emit::WeightEntry* o = nullptr;
  for (const auto& e : a->weights.tensors) {
    if (e.name == "model.layers.0.self_attn.qkv.rank2") qkv = &e;
    if (e.name == "model.layers.0.self_attn.o_proj.weight.rank2") o = &e;
  }
  REQUIRE(qkv != nullptr);
  REQUIRE(o != nullptr);
  // 8 heads and 8 KV heads of 32 over hidden 256: rank 2 of 4 takes rows [128, 192) of q, k and v.
  REQUIRE(qkv->parts.size() == 3);
  CHECK(qkv->parts[0].window == std::vector<std::uint64_t>{128, 64, 0, 256});
  CHECK(qkv->parts[1].window == std::vector<std::uint64_t>{128, 64, 0, 256});
  CHECK(qkv->parts[2].window == std::vector<std::uint64_t>{128, 64, 0, 256});
  CHECK(qkv->shape == std::vector<std::uint64_t>{192, 256});
  REQUIRE(o->parts.size() == 1);
  CHECK(o->parts[0].window == std::vector<std::uint64_t>{0, 256, 128, 64});
  CHECK(o->shape == std::vector<std::uint64_t>{256, 64});
  // The manifest round-trips its windows.
  auto back = emit::parse_weights_manifest(emit::to_json(a->weights), "weights.json");
  REQUIRE(back.ok());
  CHECK(emit::to_json(*back) == emit::to_json(a->weights));
}

TEST_CASE("--tp that does not divide the heads, the intermediate size or the vocabulary, or the KV heads (unless it is a multiple of them), is refused with the config key (never rounded)") {
  const std::string base = testing::oracle_config("tiny-llama3-kv8.json");
  struct Case {
    std::string config;
    int tp;
    std::string want;
  };
  const Case cases[] = {
      {with(with(base, "num_attention_heads", "24"), "num_key_value_heads", "6"), 4, "num_key_value_heads = 6 is not a multiple of 4"},
      {with(with(base, "num_attention_heads", "12"), "num_key_value_heads", "3"), 4,
       "num_key_value_heads = 3 is fewer than the 4 ranks and does not divide them"},
      {with(with(base, "num_attention_heads", "4"), "num_key_value_heads", "4"), 8, "num_attention_heads = 4 is not a multiple of 8"},
      {with(base, "intermediate_size", "516"), 8, "intermediate_size = 516 is not a multiple of 8"},
      {with(base, "vocab_size", "1020"), 8, "vocab_size = 1020 is not a multiple of 8"},
      {with(with(with(testing::oracle_config("tiny-qwen3-moe.json"), "num_attention_heads", "8"), "num_key_value_heads", "8"),
            "moe_intermediate_size", "68"),
       8, "moe_intermediate_size = 68 is not a multiple of 8"},
  };
  for (const auto& c : cases) {
    CAPTURE(c.want);
    const auto ckpt = testing::tiny_checkpoint("tp-refused", c.config);
    testing::EmitSpec spec;
    spec.tp = c.tp;
    auto a = testing::emit_checkpoint(ckpt, spec);
    REQUIRE_FALSE(a.ok());
    CHECK(a.error().message.find(ckpt.string() + "/config.json: --tp " + std::to_string(c.tp) + ": " + c.want) !=
          std::string::npos);
  }
}

TEST_CASE(
    "an h200-sxm --tp 2 emit cuts each collective into slices of 16-byte-aligned column ranges up to the stream count, the same "
    "on every rank, and places them alike (one slice per collective, a column part off a vector boundary, or ranks placed "
    "differently, fails)") {
  // A vocabulary of 8192 gathers 8192 columns of one decode row: more than one slice's worth.
  const std::string cfg = with(testing::oracle_config("tiny-llama3.json"), "vocab_size", "8192");
  const auto ckpt = testing::tiny_checkpoint("tp-gpu-slices", cfg);
  testing::EmitSpec spec;
  spec.device = "h200-sxm";
  spec.tp = 2;
  spec.buckets = {32, 128};  // hopper's prefill rules start above 16 rows
  auto a = testing::emit_checkpoint(ckpt, spec);
  REQUIRE_MESSAGE(a.ok(), (a.ok() ? "" : a.error().message));
  const auto ranks = rank_packets(*a);
  REQUIRE(ranks.size() == 2);
  const std::uint32_t sm = a->packet.sm_count;
  bool row_parts = false, col_parts = false;
  for (std::size_t p = 0; p < a->packet.programs.size(); ++p) {
    const auto& prog = a->packet.programs[p];
    const auto& other = ranks[1]->programs[p];
    CAPTURE(prog.name);
    REQUIRE(other.instrs.size() == prog.instrs.size());
    for (std::size_t i = 0; i < prog.instrs.size(); ++i) {
      const auto& d = prog.instrs[i];
      const auto& op = *emit::find_opcode(d.opcode);
      if (emit::int_index(op, "ranks") < 0) continue;
      CAPTURE(op.name);
      CHECK(other.instrs[i].slices == d.slices);
      CHECK(other.instrs[i].ints == d.ints);
      CHECK(d.slices <= sm);
      const std::int64_t rows = d.ints[0], n = op.name == "allgather_cols" ? d.ints[1] * d.ints[2] : d.ints[1];
      // up to one slice per stream and per 16-byte vector of each thread of a block, and every row
      // part that allows
      const std::int64_t most = std::min<std::int64_t>(sm, std::max<std::int64_t>(1, rows * n / (MET_INTERP_THREADS * 8)));
      CHECK(d.slices <= most);
      CHECK(d.slices >= std::min(rows, most));
      const std::int64_t cols = emit::col_parts(d);
      row_parts = row_parts || d.slices / cols > 1;
      col_parts = col_parts || cols > 1;
      std::int64_t covered = 0;
      for (std::uint32_t s = 0; s < d.slices; ++s) {
        const auto rr = emit::slice_rows(d, s);
        const auto cc = emit::slice_cols(d, s, n);
        CHECK(cc.begin % 8 == 0);
        CHECK(cc.end % 8 == 0);
        covered += (rr.end - rr.begin) * (cc.end - cc.begin);
      }
      CHECK(covered == rows * n);
    }
    REQUIRE(other.streams.size() == prog.streams.size());
    for (std::size_t j = 0; j < prog.streams.size(); ++j) {
      REQUIRE(other.streams[j].size() == prog.streams[j].size());
      for (std::size_t k = 0; k < prog.streams[j].size(); ++k) {
        CHECK(other.streams[j][k].instr == prog.streams[j][k].instr);
        CHECK(other.streams[j][k].slice == prog.streams[j][k].slice);
      }
    }
  }
  CHECK(row_parts);  // prefill: row parts
  CHECK(col_parts);  // the decode row's gather: column parts
  // The same checkpoint on host-cpu: one slice per collective.
  spec.device = "host-cpu";
  auto cpu = testing::emit_checkpoint(ckpt, spec);
  REQUIRE_MESSAGE(cpu.ok(), (cpu.ok() ? "" : cpu.error().message));
  for (const auto& p : cpu->packet.programs)
    for (const auto& d : p.instrs)
      if (emit::int_index(*emit::find_opcode(d.opcode), "ranks") >= 0) CHECK(d.slices == 1);
}

TEST_CASE(
    "--tp runs the row-parallel projections as gemv_f32 / gemm_f32 on h200-sxm, a MoE's down projections as moe_down_f32 at "
    "decode rows and the grouped moe_down_wgmma with moe_combine_f32's unrounded sums at prefill rows, and is refused on a class without the collective bodies (a100-sxm-80g: "
    "ampere), by the body and the class (a vendor test, or an emit that leaves a body out, fails)") {
  const auto llama = testing::tiny_checkpoint("tp-class", testing::oracle_config("tiny-llama3-kv8.json"));
  testing::EmitSpec spec;
  spec.tp = 2;
  spec.device = "h200-sxm";
  spec.buckets = {32, 128};  // hopper's prefill rules start above 16 rows
  auto gpu = testing::emit_checkpoint(llama, spec);
  REQUIRE_MESSAGE(gpu.ok(), (gpu.ok() ? "" : gpu.error().message));
  std::int64_t gemv = 0, gemm = 0;
  for (const auto& p : gpu->packet.programs) {
    gemv += count_ops(p, "gemv_f32");
    gemm += count_ops(p, "gemm_f32");
  }
  CHECK(gemv > 0);
  CHECK(gemm > 0);
  spec.device = "a100-sxm-80g";
  auto ampere = testing::emit_checkpoint(llama, spec);
  REQUIRE_FALSE(ampere.ok());
  CHECK(ampere.error().message.find("every tensor-parallel program runs 'allreduce_residual', which class 'ampere' has no body for") != std::string::npos);
  CHECK(ampere.error().message.find("MET_HAS_NCCL_DEVICE") != std::string::npos);
  spec.device = "h200-sxm";
  const std::string moe_cfg =
      with(with(testing::oracle_config("tiny-qwen3-moe.json"), "num_attention_heads", "8"), "num_key_value_heads", "8");
  auto moe = testing::emit_checkpoint(testing::tiny_checkpoint("tp-gpu-moe", moe_cfg), spec);
  REQUIRE_MESSAGE(moe.ok(), (moe.ok() ? "" : moe.error().message));
  std::map<std::string, std::int64_t> downs;
  for (const auto& p : moe->packet.programs)
    for (const char* op : {"moe_down", "moe_down_mma", "moe_down_f32", "moe_down_mma_f32", "moe_down_wgmma", "moe_combine", "moe_combine_f32"})
      downs[op] += count_ops(p, op);
  CHECK(downs["moe_down_f32"] > 0);
  CHECK(downs["moe_down_wgmma"] > 0);  // the 32- and 128-row prefills
  CHECK(downs["moe_combine_f32"] == downs["moe_down_wgmma"]);
  CHECK(downs["moe_down"] == 0);
  CHECK(downs["moe_down_mma"] == 0);
  CHECK(downs["moe_down_mma_f32"] == 0);
  CHECK(downs["moe_combine"] == 0);
  spec = testing::EmitSpec{};
  spec.tp = 3;
  auto three = testing::emit_checkpoint(llama, spec);
  REQUIRE_FALSE(three.ok());
  CHECK(three.error().message.find("--tp 3 is not one of 1, 2, 4, 8") != std::string::npos);
  spec.tp = 2;
  // Block-scaled fp8 (128 x 128 scale blocks) splits on whole blocks: 256 q, k and v rows and 256
  // o columns a rank's 128 at TP 2, its scales the window's blocks; at TP 4 a rank's 64 would cut
  // a block, refused by name (tests/interp/tensor_parallel_test.cpp runs TP 2). modelopt's
  // per-tensor scales split at any degree.
  const auto block = testing::tiny_checkpoint("tp-fp8-block", testing::oracle_config("tiny-llama3-kv8.json"), 7, Format::fp8_e4m3);
  auto blocked = testing::emit_checkpoint(block, spec);
  REQUIRE_MESSAGE(blocked.ok(), (blocked.ok() ? "" : blocked.error().message));
  for (const auto& e : blocked->weights.tensors) {
    if (e.name != "model.layers.0.self_attn.o_proj.weight.rank1" && e.name != "model.layers.0.self_attn.qkv.rank1") continue;
    CAPTURE(e.name);
    REQUIRE(e.scale_parts.size() == e.parts.size());
    for (std::size_t k = 0; k < e.parts.size(); ++k) {
      const bool o = e.name.find("o_proj") != std::string::npos;
      CHECK(e.parts[k].window == (o ? std::vector<std::uint64_t>{0, 256, 128, 128} : std::vector<std::uint64_t>{128, 128, 0, 256}));
      CHECK(e.scale_parts[k].window == (o ? std::vector<std::uint64_t>{0, 2, 1, 1} : std::vector<std::uint64_t>{1, 1, 0, 2}));
    }
  }
  spec.tp = 4;
  auto cut = testing::emit_checkpoint(block, spec);
  REQUIRE_FALSE(cut.ok());
  CHECK(cut.error().message.find("would cut its 128x128 fp8 scale blocks") != std::string::npos);
  spec.tp = 2;
  const auto per_tensor = testing::tiny_checkpoint("tp-fp8-modelopt", testing::oracle_config("tiny-llama3-kv8.json"), 7,
                                                   Format::fp8_e4m3, model::Fp8Layout::modelopt);
  CHECK(testing::emit_checkpoint(per_tensor, spec).ok());
}

TEST_CASE("gpt-oss splits at --tp N: the q/k/v biases and the sinks with their heads, the o and experts' down biases added once (the first rank's partial sums), each expert's interleaved gate/up and its bias by the rank's slice of the intermediate size, MXFP4 blocks and scales alike; a slice that cuts a 32-column scale block is refused (a bias on every rank, a sinks vector kept whole, or a gate/up window cut by rows, fails)") {
  const std::string cfg = testing::oracle_config("tiny-gpt-oss.json");
  for (const Format fmt : {Format::bf16, Format::mxfp4}) {
    const bool mx = fmt == Format::mxfp4;
    CAPTURE(mx);
    const auto ckpt = testing::tiny_checkpoint(mx ? "tp-goss-mx" : "tp-goss-bf16", cfg, 7, fmt);
    const auto graph = testing::graph_of(ckpt);
    const auto layers = static_cast<std::int64_t>(graph.params.at("layers"));
    const auto hidden = static_cast<std::uint64_t>(graph.params.at("hidden"));
    const auto inter = static_cast<std::uint64_t>(graph.params.at("inter"));
    const auto experts = static_cast<std::uint64_t>(graph.params.at("experts"));
    const auto heads = static_cast<std::uint64_t>(graph.params.at("heads"));
    for (int tp : {2, 4}) {
      CAPTURE(tp);
      testing::EmitSpec spec;
      spec.tp = tp;
      auto a = testing::emit_checkpoint(ckpt, spec);
      if (mx && tp == 4) {  // 64 / 4 = 16 input columns of down a rank: half a scale block
        REQUIRE_FALSE(a.ok());
        CHECK(a.error().message.find("do not divide into 4 parts of whole 32-column MXFP4 scale blocks") != std::string::npos);
        continue;
      }
      REQUIRE_MESSAGE(a.ok(), (a.ok() ? "" : a.error().message));
      CHECK(estimate::tp_collectives(graph, tp).all_reduces == 2 * layers);
      const auto ranks = rank_packets(*a);
      for (std::size_t r = 0; r < ranks.size(); ++r) {
        CAPTURE(r);
        for (const auto& p : ranks[r]->programs) {
          CAPTURE(p.name);
          CHECK(count_ops(p, "allreduce_residual") == 2 * layers);
          CHECK(count_ops(p, "moe_down_bias_f32") == layers);
          CHECK(count_ops(p, "moe_down_bias") == 0);
          // o: every rank's fp32 partial sums, the bias added by rank 0 alone (the ranks run the same ops)
          CHECK(count_ops(p, "gemv_bias_f32") + count_ops(p, "gemm_bias_f32") == layers);
          CHECK(count_ops(p, "gemv_f32") + count_ops(p, "gemm_f32") == 0);
          for (const auto& d : p.instrs) {  // each bias operand: the first rank's, absent elsewhere
            const std::string& op = emit::find_opcode(d.opcode)->name;
            if (op == "moe_down_bias_f32" || op == "gemv_bias_f32" || op == "gemm_bias_f32")
              CHECK((d.tensors.at(2) != MET_NO_TENSOR) == (r == 0));
          }
        }
      }
      // Rank 1's windows of layer 0.
      const std::uint64_t w = inter / static_cast<std::uint64_t>(tp), hw = heads / static_cast<std::uint64_t>(tp);
      std::map<std::string, const emit::WeightEntry*> by_name;
      for (const auto& e : a->weights.tensors) by_name[e.name] = &e;
      const std::string l0 = "model.layers.0.";
      auto entry = [&](const std::string& n) {
        auto it = by_name.find(l0 + n);
        REQUIRE_MESSAGE(it != by_name.end(), n);
        return it->second;
      };
      const auto* sinks = entry("self_attn.sinks.rank1");
      CHECK(sinks->parts.at(0).window == std::vector<std::uint64_t>{hw, hw});
      const auto* qkv_bias = entry("self_attn.qkv_bias.rank1");
      REQUIRE(qkv_bias->parts.size() == 3);
      CHECK(qkv_bias->parts[0].window == std::vector<std::uint64_t>{hw * 32, hw * 32});  // head_dim 32
      CHECK(entry("mlp.experts.gate_up_proj_bias.rank1")->parts.at(0).window ==
            std::vector<std::uint64_t>{0, experts, 2 * w, 2 * w});
      CHECK(by_name.count(l0 + "self_attn.o_proj.bias") == 1);  // whole, rank 0's alone
      CHECK(by_name.count(l0 + "self_attn.o_proj.bias.rank1") == 0);
      CHECK(by_name.count(l0 + "mlp.experts.down_proj_bias.rank1") == 0);
      if (mx) {
        const auto* gu = entry("mlp.experts.gate_up_proj.rank1");
        CHECK(gu->parts.at(0).window == std::vector<std::uint64_t>{0, experts, 2 * w, 2 * w, 0, hidden / 32, 0, 16});
        CHECK(gu->scale_parts.at(0).window == std::vector<std::uint64_t>{0, experts, 2 * w, 2 * w, 0, hidden / 32});
        const auto* down = entry("mlp.experts.down_proj.rank1");
        CHECK(down->parts.at(0).window == std::vector<std::uint64_t>{0, experts, 0, hidden, w / 32, w / 32, 0, 16});
        CHECK(down->scale_parts.at(0).window == std::vector<std::uint64_t>{0, experts, 0, hidden, w / 32, w / 32});
      } else {  // bf16 experts [experts, in, out]
        CHECK(entry("mlp.experts.gate_up_proj.rank1")->parts.at(0).window ==
              std::vector<std::uint64_t>{0, experts, 0, hidden, 2 * w, 2 * w});
        CHECK(entry("mlp.experts.down_proj.rank1")->parts.at(0).window == std::vector<std::uint64_t>{0, experts, w, w, 0, hidden});
      }
    }
  }
}

TEST_CASE("a node the split table does not name is refused by name under --tp (never split wrong)") {
  const auto ckpt = testing::tiny_checkpoint("tp-norule", testing::oracle_config("tiny-llama3.json"));
  auto graph = testing::graph_of(ckpt);
  model::Node odd;
  odd.op = "relu2";
  odd.where = "test:1";
  odd.params["dim"] = graph.params.at("hidden");
  graph.kinds.at(0).nodes.push_back(odd);
  auto r = emit::detail::rank_graph(graph, 2, "tiny");
  REQUIRE_FALSE(r.ok());
  CHECK(r.error().message.find("1 node(s) of circuit") != std::string::npos);
  CHECK(r.error().message.find("relu2 (test:1)") != std::string::npos);
}

}  // namespace met
