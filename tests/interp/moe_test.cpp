// Mixture-of-experts on the cpu backend, on the tiny Qwen3-MoE of tests/oracle/configs (8 experts,
// top 2, norm_topk_prob, layer 2 dense through mlp_only_layers): the host-cpu emit refuses
// nothing and binds the expert ops in the sparse layers only; runs agree across thread counts,
// batching, and decode against a prefill of the same tokens. Agreement with transformers is the
// oracle fixture's (tests/oracle/README.md).
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include "cpu_run.hpp"
#include "kernels/common/interp/smem.h"

namespace {

using namespace met;
using testing::must_run;

std::string moe_config() {
  std::ifstream in(std::string(MET_SOURCE_DIR) + "/tests/oracle/configs/tiny-qwen3-moe.json");
  std::ostringstream s;
  s << in.rdbuf();
  REQUIRE(!s.str().empty());
  return s.str();
}

// A tiny MoE checkpoint (seed 1) and its host-cpu assets at 4 and 1 threads.
struct MoeFixture {
  std::filesystem::path ckpt, assets4, assets1;
  MoeFixture(const std::string& name, const std::string& config) {
    ckpt = testing::tiny_checkpoint(name, config, /*seed=*/1);
    std::tie(assets4, assets1) = testing::assets_4_and_1_threads(ckpt, name + "-assets");
  }
};

MoeFixture& fx() {
  static MoeFixture f("moe", moe_config());
  return f;
}

const std::vector<std::int32_t> kPrompt = {1, 17, 42, 99, 7};

// An emit that must succeed and pass the verifier.
emit::Assets verified_emit(const std::filesystem::path& ckpt, const testing::EmitSpec& s) {
  auto a = testing::emit_checkpoint(ckpt, s);
  REQUIRE_MESSAGE(a.ok(), (a.ok() ? "" : a.error().message));
  CHECK(emit::verify(a->packet, emit::opcode_table()).empty());
  return std::move(*a);
}

// 1 and 4 threads give the same tokens and logits; of two sequences batched, the second keeps the
// tokens it has alone.
void check_threads_and_batching(const MoeFixture& f) {
  const auto one = must_run(f.assets1, {kPrompt, {5, 6, 7}}, 6, 1);
  const auto four = must_run(f.assets4, {kPrompt, {5, 6, 7}}, 6, 4);
  CHECK(four.tokens == one.tokens);
  CHECK(four.logits == one.logits);
  const auto alone = must_run(f.assets4, {{5, 6, 7}}, 6);
  CHECK(four.tokens[1] == alone.tokens[0]);
}

// Each decode step's logits equal a prefill of the same tokens within bf16 noise, and its token.
void check_decode_matches_prefill(const std::filesystem::path& assets) {
  const auto dec = must_run(assets, {kPrompt}, 5);
  REQUIRE(dec.tokens[0].size() == 5);
  std::vector<std::int32_t> prompt = kPrompt;
  for (std::size_t i = 0; i + 1 < dec.tokens[0].size(); ++i) {
    prompt.push_back(dec.tokens[0][i]);
    const auto pre = must_run(assets, {prompt}, 1);
    const auto& a = dec.logits[0][i + 1];
    const auto& b = pre.logits[0][0];
    REQUIRE(a.size() == b.size());
    double err = 0, ref = 0;
    for (std::size_t v = 0; v < a.size(); ++v) {
      err = std::max(err, static_cast<double>(std::abs(a[v] - b[v])));
      ref = std::max(ref, static_cast<double>(std::abs(b[v])));
    }
    INFO("step " << i + 1 << " max_err=" << err << " max_ref=" << ref);
    CHECK(err <= 2e-2 * ref);
    CHECK(pre.tokens[0][0] == dec.tokens[0][i + 1]);
  }
}

}  // namespace

TEST_CASE("tiny Qwen3-MoE emits for host-cpu with no refusal: every program runs router, expert gate/up and expert down in the three sparse layers and the dense MLP in layer 2 (catches an emit that refuses the experts or ignores mlp_only_layers)") {
  testing::EmitSpec s;
  s.threads = 4;
  const emit::Assets a = verified_emit(fx().ckpt, s);
  const auto number = [](const char* op) { return emit::find_opcode(op)->number; };
  for (const auto& p : a.packet.programs) {
    INFO(p.name);
    std::map<std::uint32_t, std::set<std::string>> scopes;  // opcode -> scopes ("layers:moe L0")
    for (const auto& d : p.instrs) scopes[d.opcode].insert(d.scope.substr(d.scope.rfind(' ') + 1));
    const std::set<std::string> sparse = {"L0", "L1", "L3"};
    CHECK(scopes[number("moe_router_topk")] == sparse);
    CHECK(scopes[number("moe_gate_up_silu")] == sparse);
    CHECK(scopes[number("moe_down")] == sparse);
    for (const auto& d : p.instrs) {
      if (d.opcode != number("moe_router_topk")) continue;
      CHECK(d.ints[1] == 2);  // top_k: num_experts_per_tok
      CHECK(d.ints[2] == 1);  // renormalize: norm_topk_prob
      const auto& w = a.packet.tensors[d.tensors[1]];
      CHECK(w.shape == std::vector<std::uint64_t>{8, 128});
    }
    for (const auto& d : p.instrs) {
      if (d.opcode != number("moe_gate_up_silu")) continue;
      CHECK(a.packet.tensors[d.tensors[1]].shape == std::vector<std::uint64_t>{8 * 2 * 64, 128});  // every expert's gate and up
    }
  }
}

TEST_CASE("tiny Qwen3-MoE emitted for h200-sxm: a prefill of 17 rows or more runs the grouped wgmma experts (moe_group, then moe_gate_up_silu_wgmma and moe_down_wgmma over its tiles, then moe_combine), with as many tile slices as the sort can cut; decode keeps moe_gate_up_silu and moe_down (catches a rule that misses prefill or takes decode, or a tile count the sort can pass)") {
  testing::EmitSpec s;
  s.device = "h200-sxm";
  s.buckets = {64};
  s.max_ctx = 256;
  const emit::Assets a = verified_emit(fx().ckpt, s);
  const auto number = [](const char* op) { return emit::find_opcode(op)->number; };
  bool grouped_seen = false;
  for (const auto& p : a.packet.programs) {
    INFO(p.name);
    const bool grouped = p.kind != MET_PROGRAM_DECODE && p.rows >= 17;
    std::map<std::uint32_t, int> count;
    for (const auto& d : p.instrs) {
      ++count[d.opcode];
      if (d.opcode == number("moe_group")) {
        const auto& tiles = a.packet.tensors[d.tensors[4]];
        // 64 rows x top 2 of 8 experts: at most 128 / 128 full tiles and one partial tile an expert.
        CHECK(tiles.shape == std::vector<std::uint64_t>{1 + MET_MOE_WGMMA_MAX_TILES(p.rows * 2, 8), 4});
        CHECK(a.packet.tensors[d.tensors[2]].shape == std::vector<std::uint64_t>{p.rows, 2 * 128});  // a place a row of xs
      }
      if (d.opcode == number("moe_down_wgmma") || d.opcode == number("moe_gate_up_silu_wgmma")) {
        CHECK(d.slices == MET_MOE_WGMMA_MAX_TILES(p.rows * 2, 8) * d.ints[2]);  // tiles x column parts
        CHECK(d.tensors[4] != MET_NO_TENSOR);
      }
    }
    for (const char* op : {"moe_group", "moe_gate_up_silu_wgmma", "moe_down_wgmma", "moe_combine"})
      CHECK(count[number(op)] == (grouped ? 3 : 0));
    CHECK(count[number("moe_gate_up_silu_mma")] == 0);
    CHECK(count[number("moe_down_mma")] == 0);
    CHECK(count[number("moe_gate_up_silu")] == (grouped ? 0 : 3));
    CHECK(count[number("moe_down")] == (grouped ? 0 : 3));
    grouped_seen = grouped_seen || grouped;
  }
  CHECK(grouped_seen);
}

TEST_CASE("tiny Qwen3-MoE on the cpu backend: 1 and 4 threads give the same tokens and logits; two sequences batched keep each one's tokens") {
  check_threads_and_batching(fx());
}

TEST_CASE("tiny Qwen3-MoE: each decode step's logits equal a prefill of the same tokens within bf16 noise (catches a decode or prefill expert path that routes or combines differently)") {
  check_decode_matches_prefill(fx().assets4);
}

// ---- gpt-oss (tests/oracle/configs/tiny-gpt-oss.json) ----

namespace {

struct GptOssFixture {
  std::filesystem::path bf16, mxfp4, bf16_4, bf16_1, mx_4, mx_1;
  GptOssFixture() {
    const std::string cfg = testing::oracle_config("tiny-gpt-oss.json");
    bf16 = testing::tiny_checkpoint("goss-bf16", cfg, /*seed=*/1);
    mxfp4 = testing::tiny_checkpoint("goss-mxfp4", cfg, /*seed=*/1, Format::mxfp4);
    std::tie(bf16_4, bf16_1) = testing::assets_4_and_1_threads(bf16, "goss-bf16-assets");
    std::tie(mx_4, mx_1) = testing::assets_4_and_1_threads(mxfp4, "goss-mxfp4-assets");
  }
};

GptOssFixture& goss() {
  static GptOssFixture f;
  return f;
}

}  // namespace

TEST_CASE("tiny gpt-oss emits for host-cpu binding every step from config.json: q/k/v and o with their biases, the biased router, the layout-1 experts with limit 7 and alpha 1.702, the MXFP4 experts as u8 blocks, rope with YaRN's attention factor; h200-sxm emits the MXFP4 one, its 8-row prefill on the biased GEMM, and refuses bf16 experts naming the gap (catches a bias or clamp bound from a default, or a GPU emit that runs what it has no body for)") {
  const auto number = [](const char* op) { return emit::find_opcode(op)->number; };
  for (const bool mx : {false, true}) {
    CAPTURE(mx);
    testing::EmitSpec s;
    s.threads = 4;
    const emit::Assets a = verified_emit(mx ? goss().mxfp4 : goss().bf16, s);
    std::map<std::uint32_t, int> count;
    for (const auto& p : a.packet.programs)
      for (const auto& d : p.instrs) {
        ++count[d.opcode];
        if (d.opcode == number("moe_gate_up_swiglu")) {
          CHECK(d.imms[0] == 7.0f);
          CHECK(d.imms[1] == 1.702f);
          const auto& w = a.packet.tensors[d.tensors[1]];
          CHECK(w.shape == (mx ? std::vector<std::uint64_t>{8, 128, 4, 16} : std::vector<std::uint64_t>{8, 128, 128}));
          CHECK(a.packet.tensors[d.tensors[2]].shape == std::vector<std::uint64_t>{8, 128});  // the per-expert bias
        }
        if (d.opcode == number("rope")) CHECK(d.imms[1] == doctest::Approx(0.1 * std::log(32.0) + 1).epsilon(1e-6));
        if (d.opcode == number("gemv_bias") || d.opcode == number("gemm_bias")) {
          const auto& b = a.packet.tensors[d.tensors[2]];
          CHECK(b.name.ends_with("bias"));  // qkv_bias, or o_proj.bias
          CHECK(b.name != a.packet.tensors[d.tensors[1]].name);
        }
      }
    for (const char* op : {"gemv_bias", "gemm_bias", "moe_router_topk_bias", "moe_gate_up_swiglu", "moe_down_bias"}) {
      CAPTURE(op);
      CHECK(count[number(op)] > 0);
    }
    CHECK(count[number("moe_router_topk")] == 0);
    testing::EmitSpec h;
    h.device = "h200-sxm";
    auto gpu = testing::emit_checkpoint(mx ? goss().mxfp4 : goss().bf16, h);
    if (!mx) {  // the clamped SwiGLU experts' GPU body reads MXFP4 weights only
      REQUIRE_FALSE(gpu.ok());
      CHECK(gpu.error().message.find("moe_gate_up (moe_gate_up_swiglu: no path for bf16 x bf16") != std::string::npos);
      continue;
    }
    REQUIRE_MESSAGE(gpu.ok(), (gpu.ok() ? "" : gpu.error().message));
    std::map<std::uint32_t, int> on_gpu;
    for (const auto& p : gpu->packet.programs)
      if (p.name == "prefill_8")
        for (const auto& d : p.instrs) ++on_gpu[d.opcode];
    CHECK(on_gpu[number("gemm_bias")] > 0);
  }
}

TEST_CASE("tiny gpt-oss on the cpu backend, bf16 and MXFP4: 1 and 4 threads give the same tokens and logits (the expert, router and biased bodies sliced by rows and by columns); two sequences batched keep each one's tokens") {
  for (const bool mx : {false, true}) {
    CAPTURE(mx);
    const auto& a1 = mx ? goss().mx_1 : goss().bf16_1;
    const auto& a4 = mx ? goss().mx_4 : goss().bf16_4;
    const auto one = must_run(a1, {kPrompt, {5, 6, 7}}, 6, 1);
    const auto four = must_run(a4, {kPrompt, {5, 6, 7}}, 6, 4);
    CHECK(four.tokens == one.tokens);
    CHECK(four.logits == one.logits);
    const auto alone = must_run(a4, {{5, 6, 7}}, 6);
    CHECK(four.tokens[1] == alone.tokens[0]);
  }
}

// ---- Gemma-4's MoE block (tests/oracle/configs/tiny-gemma4-moe.json) ----

namespace {

MoeFixture& g4moe() {
  static MoeFixture f("g4moe", testing::oracle_config("tiny-gemma4-moe.json"));
  return f;
}

}  // namespace

TEST_CASE("tiny Gemma-4 MoE emits for host-cpu with the experts beside the dense MLP on buffers of their own: the scaled router reads the residual x with eps and hidden^-1/2 unrounded, the GELU experts read moe.xn, their down projection writes moe.y, which its post norm takes in place and the moe_sum adds to y; h200-sxm emits the same three ops on its bodies (a prefill's down projection grouped, moe_down_mma), the experts split by columns (catches the router on the normed input, the experts writing over the dense output, or a GPU plan that leaves the scaled router, the GELU experts or layout 2's down projection a gap)") {
  const auto number = [](const char* op) { return emit::find_opcode(op)->number; };
  testing::EmitSpec s;
  s.threads = 4;
  const emit::Assets a = verified_emit(g4moe().ckpt, s);
  const auto name = [&](std::uint32_t h) { return a.packet.tensors[h].name; };
  std::map<std::uint32_t, int> count;
  int moe_sums = 0, moe_post = 0;
  for (const auto& p : a.packet.programs)
    for (const auto& d : p.instrs) {
      ++count[d.opcode];
      if (d.opcode == number("moe_router_scaled")) {
        CHECK(name(d.tensors[0]) == p.name + ".x");
        CHECK(a.packet.tensors[d.tensors[2]].shape == std::vector<std::uint64_t>{256});  // router.scale
        CHECK(a.packet.tensors[d.tensors[3]].shape == std::vector<std::uint64_t>{8});    // per_expert_scale
        CHECK(d.imms[0] == 1e-6f);
        CHECK(d.imms[1] == 1.0f / 16);  // 256^-1/2
      }
      if (d.opcode == number("moe_gate_up_gelu")) {
        CHECK(name(d.tensors[0]) == p.name + ".moe.xn");
        CHECK(a.packet.tensors[d.tensors[1]].shape == std::vector<std::uint64_t>{8, 256, 256});
      }
      if (d.opcode == number("moe_down")) {
        CHECK(name(d.tensors.back()) == p.name + ".moe.y");
        CHECK(a.packet.tensors[d.tensors[1]].shape == std::vector<std::uint64_t>{8, 256, 128});
      }
      if (d.opcode == number("residual_add") && name(d.tensors[1]) == p.name + ".moe.y") {
        CHECK(name(d.tensors[0]) == p.name + ".y");
        ++moe_sums;
      }
      if (d.opcode == number("rmsnorm_offset") && name(d.tensors[0]) == p.name + ".moe.y") ++moe_post;
    }
  for (const char* op : {"moe_router_scaled", "moe_gate_up_gelu", "moe_down"}) {
    CAPTURE(op);
    CHECK(count[number(op)] == 4 * static_cast<int>(a.packet.programs.size()));  // every layer of every program
  }
  CHECK(moe_sums == 4 * static_cast<int>(a.packet.programs.size()));
  CHECK(moe_post == moe_sums);
  CHECK(count[number("moe_router_topk")] == 0);
  testing::EmitSpec h;
  h.device = "h200-sxm";
  h.buckets = {64};  // the GPU GEMM rules take prefill from 17 rows
  const emit::Assets gpu = verified_emit(g4moe().ckpt, h);
  for (const auto& p : gpu.packet.programs) {
    INFO(p.name);
    const char* down = p.kind != MET_PROGRAM_DECODE && p.rows >= 17 ? "moe_down_mma" : "moe_down";  // layout 2 grouped too
    std::map<std::uint32_t, int> on_gpu;
    for (const auto& d : p.instrs) {
      ++on_gpu[d.opcode];
      if (d.opcode == number("moe_gate_up_gelu") || d.opcode == number(down)) CHECK(emit::col_parts(d) > 1);
    }
    for (const char* op : {"moe_router_scaled", "moe_gate_up_gelu", down}) {
      CAPTURE(op);
      CHECK(on_gpu[number(op)] == 4);  // every layer
    }
  }
}

TEST_CASE("tiny Gemma-4 MoE on the cpu backend: 1 and 4 threads give the same tokens and logits (the router, expert and norm bodies sliced by rows and by columns); two sequences batched keep each one's tokens; each decode step's logits equal a prefill of the same tokens within bf16 noise (catches a decode or prefill path that routes or sums the branches differently)") {
  check_threads_and_batching(g4moe());
  check_decode_matches_prefill(g4moe().assets4);
}

TEST_CASE("a Gemma-4 MoE config with top_k_experts past num_experts is refused at emit, naming the layer's router group and both numbers (catches a router bound with more slots than experts)") {
  std::string cfg = testing::oracle_config("tiny-gemma4-moe.json");
  const std::string from = "\"top_k_experts\": 2";
  REQUIRE(cfg.find(from) != std::string::npos);
  cfg.replace(cfg.find(from), from.size(), "\"top_k_experts\": 9");
  const auto ckpt = testing::tiny_checkpoint("g4moe-topk", cfg, /*seed=*/1);
  testing::EmitSpec s;
  auto a = testing::emit_checkpoint(ckpt, s);
  REQUIRE_FALSE(a.ok());
  CHECK(a.error().message.find("group 'moe_router_scaled'") != std::string::npos);
  CHECK(a.error().message.find("top_k 9 is not between 1 and the 8 experts") != std::string::npos);
}
