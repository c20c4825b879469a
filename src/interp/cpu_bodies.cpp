// CPU bodies over named operands: the registry generates one argument struct per op (tensors,
// ints and imms by name) and its loader; the bodies below take a slice of it and call kernels/cpu.
// The kernels/cpu definitions are included here, in this one TU.
#include "interp/cpu_bodies.hpp"

#include <array>

#include "emit/opcodes.hpp"
#include "kernels/cpu/attention.hpp"
#include "kernels/cpu/collective.hpp"
#include "kernels/cpu/embed.hpp"
#include "kernels/cpu/gemm.hpp"
#include "kernels/cpu/gemv.hpp"
#include "kernels/cpu/moe.hpp"
#include "kernels/cpu/moe_grouped.hpp"
#include "kernels/cpu/sample.hpp"

namespace met::interp {
namespace {

using emit::InstrDesc;
using emit::RowRange;
using u16 = std::uint16_t;

// Operand kinds of the registry as host types.
using T_act = u16*;
using T_weight = const MetHostWeight*;
using T_vec = const u16*;  // a bf16 vector weight: the data of its checkpoint tensor
using T_i32 = std::int32_t*;
using T_i64 = std::int64_t*;
using T_f32 = float*;
using T_table = const float*;
using T_peers = const MetPeers*;  // every rank's copy (the backend builds it: cpu_backend.cpp)

template <class T>
T operand(void* p) {
  return static_cast<T>(p);
}
template <>
T_weight operand<T_weight>(void* p) {
  return static_cast<const MetHostWeight*>(p);
}
template <>
T_peers operand<T_peers>(void* p) {
  return static_cast<const MetPeers*>(p);
}
template <>
T_vec operand<T_vec>(void* p) {
  return p ? static_cast<const u16*>(static_cast<const MetHostWeight*>(p)->data) : nullptr;
}

// MetArgs_<op>: its tensors, ints and imms by name (kernels/common/ops_args.h).
#define MET_ARGS_HEAD
#include "kernels/common/ops_args.h"

// load_<op>: the instruction's operands, ints and imms into the op's struct, in registry order.
#define MET_OP(name, family, cpu)                                              \
  [[maybe_unused]] MetArgs_##name load_##name(const InstrDesc& d, void* const* o) { \
    MetArgs_##name a;                                                          \
    [[maybe_unused]] std::size_t t = 0, i = 0, f = 0;
#define MET_T(n, kind, dir, span) a.n = operand<T_##kind>(o[t++]);
#define MET_I(n)                                 \
  a.n = i < d.ints.size() ? d.ints[i] : 0;       \
  ++i;
#define MET_F(n)                                 \
  a.n = f < d.imms.size() ? d.imms[f] : 0.0f;    \
  ++f;
#define MET_END(name) \
  return a;           \
  }
#include "kernels/common/ops.def"

std::int32_t i32(std::int64_t v) { return static_cast<std::int32_t>(v); }

// An op that touches the KV caches names their format (kv_fp8) and scales; the others leave the
// shapes' bf16 defaults.
template <class A>
concept TouchesKv = requires(const A& a) {
  a.kv_fp8;
  a.k_scale;
  a.v_scale;
};

template <class A, class S>
void kv_format(const A& a, S& s) {
  if constexpr (TouchesKv<A>) {
    s.kv_fp8 = i32(a.kv_fp8);
    s.k_scale = a.k_scale;
    s.v_scale = a.v_scale;
  }
}

template <class A>
MetRopeShape rope_shape(const A& a, float theta) {
  MetRopeShape s{i32(a.heads), i32(a.kv_heads), i32(a.head_dim), i32(a.rotary_dim), theta};
  kv_format(a, s);
  return s;
}
template <class A>
MetAttnShape attn_shape(const A& a) {
  MetAttnShape s{i32(a.heads), i32(a.kv_heads), i32(a.head_dim), i32(a.v_head_dim), i32(a.window), a.softcap, a.scale};
  kv_format(a, s);
  if constexpr (requires { a.ring; }) s.ring = i32(a.ring);  // the ops that read the caches
  return s;
}

// The heads a slice of a fused qkv op computes. Its units are rows [u0, u1) * unit_rows of the
// fused output; the CPU computes whole heads, each in the slice that holds its last row (the GPU
// splits a head over slices and lets the last to arrive finish it: the same values).
template <class A>
RowRange qkv_heads(const A& a, const InstrDesc& d, std::uint32_t s) {
  const std::int64_t per_head = a.head_dim / a.unit_rows;  // the verifier holds unit_rows | head_dim
  const RowRange u = emit::slice_cols(d, s, (a.heads + 2 * a.kv_heads) * per_head);
  return {u.begin / per_head, u.end / per_head};
}

// ---- bodies: one slice of one instruction ----
void body_embed(const MetArgs_embed& a, const InstrDesc& d, std::uint32_t s) {
  const RowRange r = emit::slice_rows(d, s);
  met_embed(a.tokens + a.in_row0 + r.begin, a.table, r.end - r.begin, a.out + r.begin * a.table->cols);
}

void body_gather_rows(const MetArgs_gather_rows& a, const InstrDesc& d, std::uint32_t s) {
  const RowRange r = emit::slice_rows(d, s);
  met_gather_rows(a.x, a.index + r.begin, r.end - r.begin, a.src_rows, a.width, a.out + r.begin * a.width);
}

void body_gemv_rmsnorm_qkv_rope(const MetArgs_gemv_rmsnorm_qkv_rope& a, const InstrDesc& d, std::uint32_t s) {
  const RowRange r = emit::slice_rows(d, s);
  const MetRopeShape sh = rope_shape(a, a.theta);
  const std::int64_t qw = a.heads * a.head_dim;
  const RowRange u = qkv_heads(a, d, s);
  met_gemv_rmsnorm_qkv_rope(a.x + (a.in_row0 + r.begin) * a.w_qkv->cols, a.norm_w, a.eps, i32(a.norm_once), static_cast<float>(a.norm_offset), a.w_qkv, a.positions + r.begin,
                            a.slots + r.begin, r.end - r.begin, &sh, a.inv_freq, a.q_out + r.begin * qw, a.k_cache,
                            a.v_cache, u.begin, u.end);
}

void body_gemv_rmsnorm_qkv_qknorm_rope(const MetArgs_gemv_rmsnorm_qkv_qknorm_rope& a, const InstrDesc& d, std::uint32_t s) {
  const RowRange r = emit::slice_rows(d, s);
  const MetRopeShape sh = rope_shape(a, a.theta);
  const std::int64_t qw = a.heads * a.head_dim;
  const RowRange u = qkv_heads(a, d, s);
  met_gemv_rmsnorm_qkv_qknorm_rope(a.x + (a.in_row0 + r.begin) * a.w_qkv->cols, a.norm_w, a.eps, i32(a.norm_once), static_cast<float>(a.norm_offset), a.w_qkv, a.q_norm_w,
                                   a.k_norm_w, i32(a.v_norm), a.positions + r.begin, a.slots + r.begin, r.end - r.begin, &sh, a.inv_freq,
                                   a.q_out + r.begin * qw, a.k_cache, a.v_cache, u.begin, u.end);
}

// One row at a time so q may be a strided view (the q columns of a qkv buffer).
void body_attn_decode_split(const MetArgs_attn_decode_split& a, const InstrDesc& d, std::uint32_t s) {
  const RowRange r = emit::slice_rows(d, s);
  const MetAttnShape sh = attn_shape(a);
  const std::int64_t per_row = a.heads * a.splits;
  const RowRange part = emit::slice_cols(d, s, a.splits);
  for (std::int64_t row = r.begin; row < r.end; ++row)
    met_attn_decode_split(a.q + row * a.q_stride, a.k_cache, a.v_cache, a.seq_base + row, a.seq_len + row, 1, &sh,
                          i32(a.splits), i32(part.begin), i32(part.end), a.part_o + row * per_row * a.v_head_dim,
                          a.part_ml + row * per_row * 2);
}

void body_attn_decode_merge(const MetArgs_attn_decode_merge& a, const InstrDesc& d, std::uint32_t s) {
  const RowRange r = emit::slice_rows(d, s);
  const MetAttnShape sh = attn_shape(a);
  const std::int64_t per_row = a.heads * a.splits;
  const RowRange h = emit::slice_cols(d, s, a.heads);
  met_attn_decode_merge(a.part_o + r.begin * per_row * a.v_head_dim, a.part_ml + r.begin * per_row * 2, a.sinks,
                        r.end - r.begin, &sh, i32(a.splits), i32(h.begin), i32(h.end),
                        a.out + r.begin * a.heads * a.v_head_dim);
}

// Row by row, as the split: q may be a strided view.
void body_attn_decode_split_merge(const MetArgs_attn_decode_split_merge& a, const InstrDesc& d, std::uint32_t s) {
  const RowRange r = emit::slice_rows(d, s);
  const MetAttnShape sh = attn_shape(a);
  const std::int64_t per_row = a.heads * a.splits;
  const RowRange u = emit::slice_cols(d, s, MET_ATTN_UNIT_BLOCKS(a.heads, a.kv_heads) * a.splits);
  for (std::int64_t row = r.begin; row < r.end; ++row)
    met_attn_decode_split_merge(a.q + row * a.q_stride, a.k_cache, a.v_cache, a.seq_base[row], a.seq_len[row], &sh,
                                i32(a.splits), u.begin, u.end, a.sinks, a.part_o ? a.part_o + row * per_row * a.v_head_dim : nullptr,
                                a.part_ml ? a.part_ml + row * per_row * 2 : nullptr, a.out + row * a.heads * a.v_head_dim);
}

// Row by row: each row reads its own (sequence base, position), so padding rows may point anywhere
// harmless and one slice may hold rows of different chunks.
void body_attn_prefill(const MetArgs_attn_prefill& a, const InstrDesc& d, std::uint32_t s) {
  const RowRange r = emit::slice_rows(d, s);
  const MetAttnShape sh = attn_shape(a);
  const std::int64_t out_w = a.heads * a.v_head_dim;
  const RowRange h = emit::slice_cols(d, s, a.heads);
  for (std::int64_t row = r.begin; row < r.end; ++row)
    met_attn_prefill(a.q + row * a.q_stride, a.k_cache, a.v_cache, a.seq_base[row], a.positions[row], 1, &sh, i32(h.begin),
                     i32(h.end), a.sinks, a.out + row * out_w);
}

// The weight-bound bodies take the slice's output column range as well as its rows.
void body_gemv_o_residual(const MetArgs_gemv_o_residual& a, const InstrDesc& d, std::uint32_t s) {
  const RowRange r = emit::slice_rows(d, s), c = emit::slice_cols(d, s, a.w_o->rows);
  met_gemv_o_residual(a.attn + (a.in_row0 + r.begin) * a.w_o->cols, a.w_o, a.x + r.begin * a.w_o->rows, r.end - r.begin,
                      c.begin, c.end);
}

void body_gemv_rmsnorm_gate_up_silu(const MetArgs_gemv_rmsnorm_gate_up_silu& a, const InstrDesc& d, std::uint32_t s) {
  const std::int64_t n = a.w_gate_up->rows / 2;
  const RowRange r = emit::slice_rows(d, s), c = emit::slice_cols(d, s, n);
  met_gemv_rmsnorm_gate_up_silu(a.x + (a.in_row0 + r.begin) * a.w_gate_up->cols, a.norm_w, a.eps, i32(a.norm_once), static_cast<float>(a.norm_offset), a.w_gate_up,
                                a.out + r.begin * n, r.end - r.begin, c.begin, c.end);
}

void body_gemv_rmsnorm_gate_up_gelu(const MetArgs_gemv_rmsnorm_gate_up_gelu& a, const InstrDesc& d, std::uint32_t s) {
  const std::int64_t n = a.w_gate_up->rows / 2;
  const RowRange r = emit::slice_rows(d, s), c = emit::slice_cols(d, s, n);
  met_gemv_rmsnorm_gate_up_gelu(a.x + (a.in_row0 + r.begin) * a.w_gate_up->cols, a.norm_w, a.eps, i32(a.norm_once), static_cast<float>(a.norm_offset), a.w_gate_up,
                                a.out + r.begin * n, r.end - r.begin, c.begin, c.end);
}

void body_gemv_down_residual(const MetArgs_gemv_down_residual& a, const InstrDesc& d, std::uint32_t s) {
  const RowRange r = emit::slice_rows(d, s), c = emit::slice_cols(d, s, a.w_down->rows);
  met_gemv_down_residual(a.h + (a.in_row0 + r.begin) * a.w_down->cols, a.w_down, a.x + r.begin * a.w_down->rows,
                         r.end - r.begin, c.begin, c.end);
}

void body_gemv_rmsnorm_lm_head_argmax(const MetArgs_gemv_rmsnorm_lm_head_argmax& a, const InstrDesc& d, std::uint32_t s) {
  const auto* w = a.w_lm_head;
  const RowRange r = emit::slice_rows(d, s), c = emit::slice_cols(d, s, w->rows);
  met_gemv_rmsnorm_lm_head_argmax(a.x + (a.in_row0 + r.begin) * w->cols, a.norm_w, a.eps, i32(a.norm_once), static_cast<float>(a.norm_offset), w,
                                  a.logits ? a.logits + r.begin * w->rows : nullptr, a.tokens ? a.tokens + r.begin : nullptr,
                                  r.end - r.begin, c.begin, c.end);
}

void body_gemv_rmsnorm_lm_head_softcap_argmax(const MetArgs_gemv_rmsnorm_lm_head_softcap_argmax& a, const InstrDesc& d,
                                              std::uint32_t s) {
  const auto* w = a.w_lm_head;
  const RowRange r = emit::slice_rows(d, s), c = emit::slice_cols(d, s, w->rows);
  met_gemv_rmsnorm_lm_head_softcap_argmax(a.x + (a.in_row0 + r.begin) * w->cols, a.norm_w, a.eps, i32(a.norm_once), static_cast<float>(a.norm_offset), w, a.cap,
                                          a.logits ? a.logits + r.begin * w->rows : nullptr,
                                          a.tokens ? a.tokens + r.begin : nullptr, r.end - r.begin, c.begin, c.end);
}

// A projection's slice (gemv, gemm and their fp32-output variants): its rows, its output columns.
template <class A, class Kernel>
void linear_slice(const A& a, const InstrDesc& d, std::uint32_t s, Kernel kernel) {
  const RowRange r = emit::slice_rows(d, s), c = emit::slice_cols(d, s, a.w->rows);
  kernel(a.x + (a.in_row0 + r.begin) * a.w->cols, a.w, a.y + r.begin * a.w->rows, r.end - r.begin, c.begin, c.end);
}

void body_gemv(const MetArgs_gemv& a, const InstrDesc& d, std::uint32_t s) { linear_slice(a, d, s, met_gemv); }
void body_gemm(const MetArgs_gemm& a, const InstrDesc& d, std::uint32_t s) { linear_slice(a, d, s, met_gemm); }
void body_gemv_f32(const MetArgs_gemv_f32& a, const InstrDesc& d, std::uint32_t s) { linear_slice(a, d, s, met_gemv_f32); }
void body_gemm_f32(const MetArgs_gemm_f32& a, const InstrDesc& d, std::uint32_t s) { linear_slice(a, d, s, met_gemm_f32); }

// A gated GEMM's slice: its output has half the weight's rows.
template <class A, class Kernel>
void gated_gemm_slice(const A& a, const InstrDesc& d, std::uint32_t s, Kernel kernel) {
  const std::int64_t dim = a.w->rows / 2;
  const RowRange r = emit::slice_rows(d, s), c = emit::slice_cols(d, s, dim);
  kernel(a.x + (a.in_row0 + r.begin) * a.w->cols, a.w, a.y + r.begin * dim, r.end - r.begin, c.begin, c.end);
}

void body_gemm_silu(const MetArgs_gemm_silu& a, const InstrDesc& d, std::uint32_t s) { gated_gemm_slice(a, d, s, met_gemm_silu); }

void body_gemm_gelu(const MetArgs_gemm_gelu& a, const InstrDesc& d, std::uint32_t s) { gated_gemm_slice(a, d, s, met_gemm_gelu); }

void body_gemm_residual(const MetArgs_gemm_residual& a, const InstrDesc& d, std::uint32_t s) {
  const RowRange r = emit::slice_rows(d, s), c = emit::slice_cols(d, s, a.w->rows);
  met_gemm_residual(a.x + (a.in_row0 + r.begin) * a.w->cols, a.w, a.y + r.begin * a.w->rows, r.end - r.begin, c.begin, c.end);
}

void body_rmsnorm(const MetArgs_rmsnorm& a, const InstrDesc& d, std::uint32_t s) {
  const RowRange r = emit::slice_rows(d, s);
  for (std::int64_t row = r.begin; row < r.end; ++row)
    met_rmsnorm(a.x + (a.in_row0 + row) * a.x_stride + a.x_col0, a.w, a.y + row * a.y_stride + a.y_col0, /*rows=*/1, a.count,
                a.dim, a.eps);
}

void body_rmsnorm_offset(const MetArgs_rmsnorm_offset& a, const InstrDesc& d, std::uint32_t s) {
  const RowRange r = emit::slice_rows(d, s);
  for (std::int64_t row = r.begin; row < r.end; ++row)
    met_rmsnorm_offset(a.x + (a.in_row0 + row) * a.x_stride + a.x_col0, a.w, a.y + row * a.y_stride + a.y_col0,
                       /*rows=*/1, a.count, a.dim, a.eps, a.offset);
}

void body_rope(const MetArgs_rope& a, const InstrDesc& d, std::uint32_t s) {
  const RowRange r = emit::slice_rows(d, s);
  MetRopeShape sh = rope_shape(a, a.theta);
  sh.attn_scale = a.attn_scale;
  u16* base = a.qkv + r.begin * a.stride;
  met_rope(base, a.stride, base + a.k_col0, a.stride, a.positions + r.begin, r.end - r.begin, &sh, a.inv_freq);
}

void body_kv_append(const MetArgs_kv_append& a, const InstrDesc& d, std::uint32_t s) {
  const RowRange r = emit::slice_rows(d, s);
  const u16* base = a.qkv + r.begin * a.stride;
  met_kv_append(base + a.k_col0, a.stride, base + a.v_col0, a.stride, a.k_cache, a.v_cache, a.slots + r.begin,
                r.end - r.begin, i32(a.kv_heads), i32(a.head_dim), i32(a.v_head_dim), i32(a.kv_fp8), a.k_scale, a.v_scale);
}

void body_residual_add(const MetArgs_residual_add& a, const InstrDesc& d, std::uint32_t s) {
  const RowRange r = emit::slice_rows(d, s);
  met_residual_add(a.x + r.begin * a.width, a.y + r.begin * a.width, (r.end - r.begin) * a.width);
}

void body_silu_mul(const MetArgs_silu_mul& a, const InstrDesc& d, std::uint32_t s) {
  const RowRange r = emit::slice_rows(d, s);
  met_silu_mul(a.gate_up + r.begin * 2 * a.dim, a.out + r.begin * a.dim, r.end - r.begin, a.dim);
}

void body_gelu_mul(const MetArgs_gelu_mul& a, const InstrDesc& d, std::uint32_t s) {
  const RowRange r = emit::slice_rows(d, s);
  met_gelu_mul(a.gate_up + r.begin * 2 * a.dim, a.out + r.begin * a.dim, r.end - r.begin, a.dim);
}

void body_gelu_mul_split(const MetArgs_gelu_mul_split& a, const InstrDesc& d, std::uint32_t s) {
  const RowRange r = emit::slice_rows(d, s);
  met_gelu_mul_split(a.gate + r.begin * a.dim, a.up + r.begin * a.up_stride + a.up_col0, a.up_stride, a.out + r.begin * a.dim,
                     r.end - r.begin, a.dim);
}

void body_scale(const MetArgs_scale& a, const InstrDesc& d, std::uint32_t s) {
  const RowRange r = emit::slice_rows(d, s);
  met_scale(a.x + r.begin * a.width, (r.end - r.begin) * a.width, a.scale);
}

void body_scale_tensor(const MetArgs_scale_tensor& a, const InstrDesc& d, std::uint32_t s) {
  const RowRange r = emit::slice_rows(d, s);
  met_scale_tensor(a.x + r.begin * a.width, (r.end - r.begin) * a.width, a.s);
}

void body_rmsnorm_residual(const MetArgs_rmsnorm_residual& a, const InstrDesc& d, std::uint32_t s) {
  const RowRange r = emit::slice_rows(d, s);
  met_rmsnorm_residual(a.x + r.begin * a.dim, a.y + r.begin * a.dim, a.w, a.s, r.end - r.begin, a.dim, i32(a.norm_once),
                       static_cast<float>(a.norm_offset), a.eps);
}

void body_softcap(const MetArgs_softcap& a, const InstrDesc& d, std::uint32_t s) {
  const RowRange r = emit::slice_rows(d, s);
  met_softcap(a.x + r.begin * a.width, (r.end - r.begin) * a.width, a.cap);
}

void body_argmax(const MetArgs_argmax& a, const InstrDesc& d, std::uint32_t s) {
  const RowRange r = emit::slice_rows(d, s);
  met_argmax(a.logits + (a.in_row0 + r.begin) * a.vocab, a.tokens + r.begin, r.end - r.begin, a.vocab);
}

void body_sample(const MetArgs_sample& a, const InstrDesc& d, std::uint32_t s) {
  const RowRange r = emit::slice_rows(d, s);
  met_sample(a.logits + (a.in_row0 + r.begin) * a.vocab, a.params + r.begin * 4, a.tokens + r.begin, r.end - r.begin, a.vocab);
}

// A router split by experts (a GPU emit's decode rows, src/emit/slice.cpp): the GPU's parts each
// score their experts and the last to arrive chooses; here the slice that holds the last part
// scores and chooses its rows whole, and the others leave the logits workspace alone.
bool router_chooses(const InstrDesc& d, std::uint32_t s) {
  const std::int64_t parts = emit::col_parts(d);
  return static_cast<std::int64_t>(s % parts) == parts - 1;
}

void body_moe_router_topk(const MetArgs_moe_router_topk& a, const InstrDesc& d, std::uint32_t s) {
  if (!router_chooses(d, s)) return;
  const RowRange r = emit::slice_rows(d, s);
  met_moe_router_topk(a.x + r.begin * a.w_router->cols, a.w_router, r.end - r.begin, i32(a.top_k), i32(a.renormalize),
                      a.ids + r.begin * a.top_k, a.weights + r.begin * a.top_k);
}

// A routed gate/up's slice (silu or gelu): its rows, its intermediate columns.
template <class A, class Kernel>
void moe_gate_up_slice(const A& a, const InstrDesc& d, std::uint32_t s, Kernel kernel) {
  const RowRange r = emit::slice_rows(d, s), c = emit::slice_cols(d, s, a.inter);
  kernel(a.x + r.begin * a.w_gate_up->cols, a.w_gate_up, a.ids + r.begin * a.top_k, r.end - r.begin, i32(a.top_k), i32(a.inter),
         a.h + r.begin * a.top_k * a.inter, c.begin, c.end);
}

void body_moe_gate_up_silu(const MetArgs_moe_gate_up_silu& a, const InstrDesc& d, std::uint32_t s) {
  moe_gate_up_slice(a, d, s, met_moe_gate_up_silu);
}

void body_moe_gate_up_gelu(const MetArgs_moe_gate_up_gelu& a, const InstrDesc& d, std::uint32_t s) {
  moe_gate_up_slice(a, d, s, met_moe_gate_up_gelu);
}

void body_moe_router_scaled(const MetArgs_moe_router_scaled& a, const InstrDesc& d, std::uint32_t s) {
  if (!router_chooses(d, s)) return;
  const RowRange r = emit::slice_rows(d, s);
  met_moe_router_scaled(a.x + r.begin * a.w_router->cols, a.w_router, a.scale, a.expert_scale, r.end - r.begin, i32(a.top_k), a.eps,
                        a.root, a.ids + r.begin * a.top_k, a.weights + r.begin * a.top_k);
}

void body_moe_down(const MetArgs_moe_down& a, const InstrDesc& d, std::uint32_t s) {
  const RowRange r = emit::slice_rows(d, s), c = emit::slice_cols(d, s, a.hidden);
  met_moe_down(a.h + r.begin * a.top_k * a.w_down->cols, a.w_down, a.ids + r.begin * a.top_k, a.weights + r.begin * a.top_k,
               r.end - r.begin, i32(a.top_k), i32(a.hidden), a.y + r.begin * a.hidden, c.begin, c.end);
}

void body_moe_down_f32(const MetArgs_moe_down_f32& a, const InstrDesc& d, std::uint32_t s) {
  const RowRange r = emit::slice_rows(d, s), c = emit::slice_cols(d, s, a.hidden);
  met_moe_down_f32(a.h + r.begin * a.top_k * a.w_down->cols, a.w_down, a.ids + r.begin * a.top_k, a.weights + r.begin * a.top_k,
                   r.end - r.begin, i32(a.top_k), i32(a.hidden), a.y + r.begin * a.hidden, c.begin, c.end);
}

template <class A, class Kernel>
void biased_linear_slice(const A& a, const InstrDesc& d, std::uint32_t s, Kernel kernel) {
  const RowRange r = emit::slice_rows(d, s), c = emit::slice_cols(d, s, a.w->rows);
  kernel(a.x + (a.in_row0 + r.begin) * a.w->cols, a.w, a.b, a.y + r.begin * a.w->rows, r.end - r.begin, c.begin, c.end);
}
void body_gemv_bias(const MetArgs_gemv_bias& a, const InstrDesc& d, std::uint32_t s) { biased_linear_slice(a, d, s, met_gemv_bias); }
void body_gemm_bias(const MetArgs_gemm_bias& a, const InstrDesc& d, std::uint32_t s) { biased_linear_slice(a, d, s, met_gemm_bias); }
void body_gemv_bias_f32(const MetArgs_gemv_bias_f32& a, const InstrDesc& d, std::uint32_t s) {
  biased_linear_slice(a, d, s, met_gemv_bias_f32);
}
void body_gemm_bias_f32(const MetArgs_gemm_bias_f32& a, const InstrDesc& d, std::uint32_t s) {
  biased_linear_slice(a, d, s, met_gemm_bias_f32);
}

void body_moe_router_topk_bias(const MetArgs_moe_router_topk_bias& a, const InstrDesc& d, std::uint32_t s) {
  if (!router_chooses(d, s)) return;
  const RowRange r = emit::slice_rows(d, s);
  met_moe_router_topk_bias(a.x + r.begin * a.w_router->cols, a.w_router, a.bias, r.end - r.begin, i32(a.top_k),
                           a.ids + r.begin * a.top_k, a.weights + r.begin * a.top_k);
}

void body_moe_gate_up_swiglu(const MetArgs_moe_gate_up_swiglu& a, const InstrDesc& d, std::uint32_t s) {
  const RowRange r = emit::slice_rows(d, s), c = emit::slice_cols(d, s, a.inter);
  met_moe_gate_up_swiglu(a.x + r.begin * a.hidden, a.w_gate_up, a.bias, a.ids + r.begin * a.top_k, r.end - r.begin, i32(a.top_k),
                         i32(a.inter), i32(a.hidden), i32(a.experts), a.limit, a.alpha, a.h + r.begin * a.top_k * a.inter, c.begin,
                         c.end);
}

void body_moe_down_bias(const MetArgs_moe_down_bias& a, const InstrDesc& d, std::uint32_t s) {
  const RowRange r = emit::slice_rows(d, s), c = emit::slice_cols(d, s, a.hidden);
  met_moe_down_bias(a.h + r.begin * a.top_k * a.inter, a.w_down, a.bias, a.ids + r.begin * a.top_k, a.weights + r.begin * a.top_k,
                    r.end - r.begin, i32(a.top_k), i32(a.hidden), i32(a.inter), i32(a.experts), a.y + r.begin * a.hidden, c.begin,
                    c.end);
}

void body_moe_down_bias_f32(const MetArgs_moe_down_bias_f32& a, const InstrDesc& d, std::uint32_t s) {
  const RowRange r = emit::slice_rows(d, s), c = emit::slice_cols(d, s, a.hidden);
  met_moe_down_bias_f32(a.h + r.begin * a.top_k * a.inter, a.w_down, a.bias, a.ids + r.begin * a.top_k, a.weights + r.begin * a.top_k,
                        r.end - r.begin, i32(a.top_k), i32(a.hidden), i32(a.inter), i32(a.experts), a.y + r.begin * a.hidden, c.begin,
                        c.end);
}

void body_moe_down_mma(const MetArgs_moe_down_mma& a, const InstrDesc& d, std::uint32_t s) {
  const RowRange r = emit::slice_rows(d, s), c = emit::slice_cols(d, s, a.hidden);
  met_moe_down_mma(a.h + r.begin * a.top_k * a.w_down->cols, a.w_down, a.ids + r.begin * a.top_k, a.weights + r.begin * a.top_k,
                   r.end - r.begin, i32(a.top_k), i32(a.hidden), a.acc + r.begin * a.hidden, a.y + r.begin * a.hidden, c.begin, c.end);
}

void body_moe_group(const MetArgs_moe_group& a, const InstrDesc& d, std::uint32_t s) {
  const RowRange r = emit::slice_rows(d, s);
  if (r.begin < r.end) met::cpu::moe_group_rows(a.x, a.ids, a.rows, a.top_k, a.experts, a.hidden, r.begin, r.end, a.xs, a.pos, a.tiles);
}

template <class A>
void moe_grouped_gemm(const A& a, const InstrDesc& d, std::uint32_t s, bool gated) {
  met::cpu::moe_grouped_slice(a.tiles, a.rows * a.top_k, a.experts, s, d.slices, emit::col_parts(d), a.cols,
                              [&](std::int64_t e, std::int64_t p0, std::int64_t n, std::int64_t c0, std::int64_t c1) {
                                met::cpu::moe_grouped_tile(a.x, a.w, a.y, e, p0, n, a.cols, c0, c1, gated);
                              });
}
void body_moe_gate_up_silu_wgmma(const MetArgs_moe_gate_up_silu_wgmma& a, const InstrDesc& d, std::uint32_t s) {
  moe_grouped_gemm(a, d, s, true);
}
void body_moe_down_wgmma(const MetArgs_moe_down_wgmma& a, const InstrDesc& d, std::uint32_t s) { moe_grouped_gemm(a, d, s, false); }

template <class A, class Store>
void moe_combine_slice(const A& a, const InstrDesc& d, std::uint32_t s, bool rounded, Store store) {
  const RowRange r = emit::slice_rows(d, s), c = emit::slice_cols(d, s, a.hidden);
  met::cpu::moe_combine_rows(a.ys, a.pos, a.ids, a.weights, a.rows * a.top_k, a.top_k, a.hidden, r.begin, r.end, c.begin, c.end, rounded,
                             store);
}
void body_moe_combine(const MetArgs_moe_combine& a, const InstrDesc& d, std::uint32_t s) {
  moe_combine_slice(a, d, s, true, [&](std::int64_t r, std::int64_t c, float v) { a.y[r * a.hidden + c] = met::cpu::f32_to_bf16(v); });
}
void body_moe_combine_f32(const MetArgs_moe_combine_f32& a, const InstrDesc& d, std::uint32_t s) {
  moe_combine_slice(a, d, s, false, [&](std::int64_t r, std::int64_t c, float v) { a.y[r * a.hidden + c] = v; });
}

void body_allreduce_residual(const MetArgs_allreduce_residual& a, const InstrDesc& d, std::uint32_t s) {
  const RowRange r = emit::slice_rows(d, s), c = emit::slice_cols(d, s, a.width);
  met_allreduce_residual(a.x, a.part, a.width, r.begin, r.end, c.begin, c.end, static_cast<std::int32_t>(a.accumulate));
}

void body_allgather_cols(const MetArgs_allgather_cols& a, const InstrDesc& d, std::uint32_t s) {
  const RowRange r = emit::slice_rows(d, s), c = emit::slice_cols(d, s, a.width * a.part->ranks);
  met_allgather_cols(a.part, a.out, a.width, r.begin, r.end, c.begin, c.end);
}

// opcode number - 1 -> the body of the op's CPU reference, over the reference's operand struct
// (a test holds every op's operands, ints and imms equal to its reference's).
#define MET_OP(name, family, cpu) \
  +[](const InstrDesc& d, std::uint32_t s, void* const* o) { body_##cpu(load_##cpu(d, o), d, s); },
const CpuBody kBodies[] = {
#include "kernels/common/ops.def"
};

}  // namespace

CpuBody cpu_body(std::uint32_t opcode) {
  constexpr std::uint32_t n = sizeof(kBodies) / sizeof(kBodies[0]);
  return opcode >= 1 && opcode <= n ? kBodies[opcode - 1] : nullptr;
}

}  // namespace met::interp
