// Binding: each kernel of a plan group becomes one instruction whose operands come from the group's
// nodes (weights, shapes), the program's named buffers (x, xn, qkv, q, attn, y, gu, h) and the
// shared tensors (KV caches, generated tables). One binder per op family, chosen by opcode name
// (bind.cpp has the table). Internal to src/emit.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/expected.hpp"
#include "emit/builder.hpp"
#include "emit/opcodes.hpp"
#include "model/graph.hpp"

namespace met::emit::detail {

// One kernel of a group being bound.
struct KernelSite {
  Builder& b;
  const ScopeCtx& c;
  const model::ModelGraph& graph;
  const std::string& kname;  // as the rule names it ("met_gemv")
  const std::string& k;      // the opcode name ("gemv")
  const OpcodeInfo& op;
  std::int64_t R = 0;       // rows of the scope
  std::int64_t hidden = 0;  // the model's hidden width
  std::uint32_t x = 0;      // the residual stream (the prefill head: its gathered rows)
  std::string pre;          // buffer prefix: "head." in the head scope

  // The group's node of op `op` (and role `role`), null when absent.
  const model::Node* node(const std::string& op, const std::string& role = "") const;
  Expected<std::uint32_t> weight(const model::Node* n) const;
  // The program's qkv buffer and its row stride in elements; refused with `missing` before any
  // qkv projection wrote it.
  struct Qkv {
    std::uint32_t handle = 0;
    std::int64_t stride = 0;
  };
  Expected<Qkv> qkv(const std::string& missing) const;
  // A refusal located at the scope and group.
  Error where(const std::string& what) const;
  // Appends this kernel's instruction.
  Expected<void> add(std::vector<std::uint32_t> tensors, std::vector<std::int64_t> ints, std::vector<float> imms) const;
};

using Binder = Expected<void> (*)(const KernelSite& site);

// bind_attention.cpp: the fused qkv + rope projections, decode and prefill attention, rope, kv_append.
Expected<void> bind_qkv_rope(const KernelSite& site);
Expected<void> bind_attention(const KernelSite& site);
Expected<void> bind_rope(const KernelSite& site);
Expected<void> bind_kv_append(const KernelSite& site);
// bind_linear.cpp: plain projections (gemv, the gemm family), the fused gemv ops and the GEMMs with
// a fused epilogue.
Expected<void> bind_linear(const KernelSite& site);
Expected<void> bind_residual_gemv(const KernelSite& site);
Expected<void> bind_gemm_gated(const KernelSite& site);
Expected<void> bind_gemm_residual(const KernelSite& site);
Expected<void> bind_gate_up(const KernelSite& site);
Expected<void> bind_lm_head(const KernelSite& site);
// bind_pointwise.cpp: embedding, norms (rmsnorm, rmsnorm_offset), residual add, gated activations, argmax, softcap.
Expected<void> bind_embed(const KernelSite& site);
Expected<void> bind_rmsnorm(const KernelSite& site);
Expected<void> bind_rmsnorm_residual(const KernelSite& site);
Expected<void> bind_residual_add(const KernelSite& site);
Expected<void> bind_gated_act(const KernelSite& site);
Expected<void> bind_argmax(const KernelSite& site);
Expected<void> bind_softcap(const KernelSite& site);
Expected<void> bind_scale(const KernelSite& site);
Expected<void> bind_gelu_mul_split(const KernelSite& site);
// The group's softcap node's cap; refused unless positive.
Expected<float> softcap_of(const KernelSite& site);
// The RMSNorm a fused gemv op folds in (kernels/common/ops.def: norm_once, norm_offset), from its
// norm nodes (a qkv op's attn_norm, then its q and k norms): their eps (the node's, else
// config.json's) and kind, which must be one for all of them, with a weight and an integral offset.
struct FusedNormKind {
  float eps = 0;
  std::int64_t once = 0, offset = 0;
};
// A norm node's kind (its eps, else config.json's; its offset, a whole number; one rounding), and
// the one kind of a fused op's weighted norms.
Expected<FusedNormKind> norm_kind_of(const KernelSite& site, const model::Node& n);
Expected<FusedNormKind> fused_norm_kind(const KernelSite& site, const std::vector<const model::Node*>& norms);

// Gemma-4's expert branch runs beside the dense MLP (the layer has a moe_norm node): its experts
// read kMoeXn (moe_norm of the residual) and write kMoeY, which post_moe_norm normalises in place
// and the moe_sum residual adds to the dense branch's y. Elsewhere the experts read xn and write y.
inline constexpr const char* kMoeXn = "moe.xn";
inline constexpr const char* kMoeY = "moe.y";
bool beside_dense_mlp(const KernelSite& site);

// bind_moe.cpp: the mixture-of-experts routers, expert gate/up + SiLU or GELU and expert down +
// weighted sum.
Expected<void> bind_moe_router(const KernelSite& site);
Expected<void> bind_moe_router_scaled(const KernelSite& site);
Expected<void> bind_moe_gate_up(const KernelSite& site);
Expected<void> bind_moe_down(const KernelSite& site);
Expected<void> bind_moe_router_bias(const KernelSite& site);
Expected<void> bind_moe_gate_up_swiglu(const KernelSite& site);
Expected<void> bind_moe_down_bias(const KernelSite& site);

// Every kernel of the group's rule, in rule order; refuses a kernel without an opcode or a binder.
Expected<void> emit_group(Builder& b, const ScopeCtx& c, const model::ModelGraph& graph);

}  // namespace met::emit::detail
