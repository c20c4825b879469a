// The op table: every documented op is present, defaults fill as documented, and the derived
// weight, KV and state sizes follow the formulas of docs/arch/kernel-tree.md.
#include <doctest/doctest.h>

#include "model/ops.hpp"

using namespace met::model;

namespace {
Node node(const std::string& op, Params params) {
  Node n;
  n.op = op;
  n.params = std::move(params);
  fill_defaults(*find_op(op), n.params);
  return n;
}
}  // namespace

TEST_CASE("every op of the documented vocabulary is in the table, and an unknown one is not") {
  for (const char* op : {"embed", "rmsnorm", "linear", "rope", "kv_append", "attention", "kv_append_mla",
                         "attention_mla", "residual", "silu_mul", "gelu_mul", "gelu_mul_split", "swiglu_clamp", "bias", "relu2", "scale", "softcap",
                         "moe_router", "expert_scale", "moe_gate_up", "moe_down", "conv1d", "ssm_scan", "gated_delta", "argmax"}) {
    CHECK_MESSAGE(find_op(op) != nullptr, op);
  }
  CHECK(find_op("rope2") == nullptr);
  CHECK(op_names().size() == 25);
}

TEST_CASE("optional params default to another param (v_head_dim = head_dim) or a constant (count = 1)") {
  auto kv = node("kv_append", {{"kv_heads", 8}, {"head_dim", 128}});
  CHECK(kv.params.at("v_head_dim") == 128);
  CHECK(kv_elems_per_token(kv) == 8 * (128 + 128));
  auto norm = node("rmsnorm", {{"dim", 128}});
  CHECK(norm.params.at("count") == 1);
  CHECK(weight_elems(norm) == 128);
}

TEST_CASE("a linear weight is [out, in]; MoE experts multiply it") {
  auto lin = node("linear", {{"in", 4096}, {"out", 6144}});
  CHECK(weight_shape(lin) == std::vector<double>{6144, 4096});
  CHECK(weight_elems(lin) == 6144.0 * 4096);
  auto gu = node("moe_gate_up", {{"hidden", 2048}, {"inter", 768}, {"experts", 128}, {"top_k", 8}});
  CHECK(weight_elems(gu) == 128.0 * 2 * 768 * 2048);
}

TEST_CASE("attention has a weight only when it has sinks") {
  auto plain = node("attention", {{"heads", 64}, {"kv_heads", 8}, {"head_dim", 64}});
  CHECK_FALSE(has_weight(plain));
  auto sinks = node("attention", {{"heads", 64}, {"kv_heads", 8}, {"head_dim", 64}, {"sinks", 1}});
  CHECK(weight_elems(sinks) == 64);
}

TEST_CASE("KV and recurrent state sizes: MLA latent row, conv state, SSM and delta-rule states") {
  CHECK(kv_elems_per_token(node("kv_append_mla", {{"kv_lora", 512}, {"rope_dim", 64}})) == 576);
  CHECK(state_elems_per_seq(node("conv1d", {{"channels", 100}, {"kernel", 4}})) == 300);
  CHECK(state_elems_per_seq(node("ssm_scan", {{"heads", 8}, {"head_dim", 64}, {"state", 128}, {"groups", 1}})) == 8 * 64 * 128);
  CHECK(state_elems_per_seq(node("gated_delta", {{"k_heads", 16}, {"v_heads", 32}, {"k_dim", 128}, {"v_dim", 128}})) ==
        32 * 128 * 128);
  CHECK(kv_elems_per_token(node("linear", {{"in", 1}, {"out", 1}})) == 0);
  CHECK(state_elems_per_seq(node("attention", {{"heads", 1}, {"kv_heads", 1}, {"head_dim", 1}})) == 0);
}
