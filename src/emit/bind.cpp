// The binder of each opcode: a table by opcode name, then by family for the families whose members
// share one operand layout (every GEMM, every flash prefill), so a GPU class's variant binds like
// its cpu counterpart. A kernel with neither is refused by name.
#include "emit/bind.hpp"

#include <map>
#include <string_view>

namespace met::emit::detail {
namespace {

const std::map<std::string_view, Binder> kByOpcode = {
    {"embed", bind_embed},
    {"gemv_rmsnorm_qkv_rope", bind_qkv_rope},
    {"gemv_rmsnorm_qkv_qknorm_rope", bind_qkv_rope},
    {"attn_decode_split", bind_attention},
    {"attn_decode_merge", bind_attention},
    {"attn_decode_split_merge", bind_attention},
    {"gemv_o_residual", bind_residual_gemv},
    {"gemv_down_residual", bind_residual_gemv},
    {"gemm_silu", bind_gemm_gated},
    {"gemm_gelu", bind_gemm_gated},
    {"gemm_residual", bind_gemm_residual},
    {"gemm_silu_bf16_wgmma", bind_gemm_gated},
    {"gemm_gelu_bf16_wgmma", bind_gemm_gated},
    {"gemm_residual_bf16_wgmma", bind_gemm_residual},
    {"gemv_rmsnorm_gate_up_silu", bind_gate_up},
    {"gemv_rmsnorm_gate_up_gelu", bind_gate_up},
    {"gemv_rmsnorm_lm_head_argmax", bind_lm_head},
    {"gemv_rmsnorm_lm_head_softcap_argmax", bind_lm_head},
    {"rmsnorm", bind_rmsnorm},
    {"rmsnorm_offset", bind_rmsnorm},
    {"rmsnorm_residual", bind_rmsnorm_residual},
    {"gemv", bind_linear},
    {"rope", bind_rope},
    {"kv_append", bind_kv_append},
    {"residual_add", bind_residual_add},
    {"silu_mul", bind_gated_act},
    {"gelu_mul", bind_gated_act},
    {"gelu_mul_split", bind_gelu_mul_split},
    {"argmax", bind_argmax},
    {"softcap", bind_softcap},
    {"scale", bind_scale},
    {"scale_tensor", bind_scale},
    {"moe_router_topk", bind_moe_router},
    {"moe_gate_up_silu", bind_moe_gate_up},
    {"moe_down", bind_moe_down},
    {"gemv_bias", bind_linear},
    {"moe_router_topk_bias", bind_moe_router_bias},
    {"moe_gate_up_swiglu", bind_moe_gate_up_swiglu},
    {"moe_down_bias", bind_moe_down_bias},
    {"moe_gate_up_silu_mma", bind_moe_gate_up},
    {"moe_router_scaled", bind_moe_router_scaled},
    {"moe_gate_up_gelu", bind_moe_gate_up},
    {"moe_down_mma", bind_moe_down},
    {"moe_gate_up_silu_wgmma", bind_moe_gate_up},
    {"moe_down_wgmma", bind_moe_down},
};

const std::map<std::string_view, Binder> kByFamily = {
    {"attention_prefill", bind_attention},
    {"gemm", bind_linear},
};

Binder binder_of(const OpcodeInfo& op) {
  if (auto it = kByOpcode.find(op.name); it != kByOpcode.end()) return it->second;
  if (auto it = kByFamily.find(op.family); it != kByFamily.end()) return it->second;
  return nullptr;
}

Error refuse(const ScopeCtx& c, const std::string& what) {
  return fail("emit: " + c.label + " group '" + c.group->rule + "': " + what);
}

}  // namespace

const model::Node* KernelSite::node(const std::string& op_name, const std::string& role) const {
  return find_node(*c.scope, *c.group, op_name, role);
}

Expected<std::uint32_t> KernelSite::weight(const model::Node* n) const {
  return detail::weight(*b.sh, *n, c.first_layer, c.layer);
}

Expected<KernelSite::Qkv> KernelSite::qkv(const std::string& missing) const {
  if (b.qkv == MET_NO_TENSOR) return where(missing);
  return Qkv{b.qkv, static_cast<std::int64_t>(b.sh->file->tensors[b.qkv].shape[1])};
}

Error KernelSite::where(const std::string& what) const { return refuse(c, what); }

Expected<void> KernelSite::add(std::vector<std::uint32_t> tensors, std::vector<std::int64_t> ints,
                               std::vector<float> imms) const {
  return b.add(k, c.group_index, c.label, std::move(tensors), std::move(ints), std::move(imms));
}

Expected<void> emit_group(Builder& b, const ScopeCtx& c, const model::ModelGraph& graph) {
  const std::int64_t hidden = static_cast<std::int64_t>(graph.params.at("hidden"));
  const std::uint32_t x = c.x != MET_NO_TENSOR ? c.x : b.act("x", b.rows, hidden);
  for (const auto& kname : c.group->kernels) {
    const std::string k = kname.rfind("met_", 0) == 0 ? kname.substr(4) : kname;
    const OpcodeInfo* op = find_opcode(k);
    if (!op) return refuse(c, "kernel '" + kname + "' is not in the opcode table");
    const Binder bind = binder_of(*op);
    if (!bind) return refuse(c, "kernel '" + kname + "' has no emitter yet");
    MET_CHECK(bind(KernelSite{b, c, graph, kname, k, *op, c.rows, hidden, x, c.head ? "head." : ""}));
  }
  return {};
}

}  // namespace met::emit::detail
