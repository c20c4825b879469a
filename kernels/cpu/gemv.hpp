// cpu reference bodies of the gemv family: plain y = x W^T and the decode fusions of
// docs/arch/kernels.md (rmsnorm+qkv+rope+kv_append, o+residual, gate_up+silu/gelu, down+residual,
// lm_head+argmax). Each fused body is the unfused op sequence row by row, with the same bf16
// roundings at op boundaries, so fused == unfused bit for bit. The weight-bound bodies take an
// output column range [out0, out1) so one row can be split across workers: each output is the same
// dot product (summed in column order) whatever the range, so a split never changes a bit.
// Include from one translation unit.
#pragma once

#include <cstdint>
#include <vector>

#include "bf16.hpp"
#include "elementwise.hpp"
#include "quant.hpp"

namespace met::cpu {

// y[o] = bf16(x . W[o]) for o in [o0, o1), one activation row.
inline void gemv_cols(RowDot& dot, const std::uint16_t* x, std::uint16_t* y, std::int64_t o0, std::int64_t o1) {
  for (std::int64_t o = o0; o < o1; ++o) y[o] = f32_to_bf16(dot(x, o));
}

// y[r, 0..w.rows) = bf16(x[r] . W[o]) for one activation row.
inline void gemv_row(RowDot& dot, const std::uint16_t* x, std::uint16_t* y) { gemv_cols(dot, x, y, 0, dot.weight().rows); }

// The RMSNorm a fused body folds in: once false, Llama's (x / rms(x) rounded, then times w); once
// true, Gemma's ((offset + w) in fp32, one rounding), as met_rmsnorm_offset computes it.
struct FusedNorm {
  float eps;
  bool once;
  float offset;
};
inline void fused_norm_row(const std::uint16_t* x, const std::uint16_t* w, std::uint16_t* y, std::int64_t dim, const FusedNorm& n) {
  rmsnorm_row(x, w, y, /*count=*/1, dim, n.eps, n.offset, n.once);
}

using Buf = std::vector<std::uint16_t>;
inline Buf buf(std::int64_t n) { return Buf(static_cast<std::size_t>(n)); }

// rmsnorm -> qkv gemv -> [q/k norm] -> rope -> q out, K/V to cache, for one row, over head units
// [u0, u1): units are the q heads, then the k heads, then the v heads. Norm and rope act per head,
// so any unit range computes exactly what the whole row computes for those heads.
inline void qkv_row(const std::uint16_t* x, const std::uint16_t* norm_w, const FusedNorm& nm, RowDot& dot,
                    const std::uint16_t* q_norm_w, const std::uint16_t* k_norm_w, bool v_norm, std::int32_t pos,
                    std::int64_t slot, const MetRopeShape& s, const float* inv_freq, std::uint16_t* q_out,
                    std::uint16_t* k_cache, std::uint16_t* v_cache, std::int64_t u0, std::int64_t u1, Buf& xn, Buf& qkv) {
  const std::int64_t hidden = dot.weight().cols;
  const std::int64_t hd = s.head_dim;
  const std::int64_t kw = static_cast<std::int64_t>(s.kv_heads) * hd;
  fused_norm_row(x, norm_w, xn.data(), hidden, nm);
  gemv_cols(dot, xn.data(), qkv.data(), u0 * hd, u1 * hd);
  for (std::int64_t u = u0; u < u1; ++u) {
    std::uint16_t* head = qkv.data() + u * hd;
    if (u < s.heads) {
      if (q_norm_w) fused_norm_row(head, q_norm_w, head, hd, nm);
      rope_heads(head, 1, s.head_dim, s.rotary_dim, s.theta, inv_freq, pos);
      for (std::int64_t i = 0; i < hd; ++i) q_out[u * hd + i] = head[i];
    } else if (u < s.heads + s.kv_heads) {
      if (k_norm_w) fused_norm_row(head, k_norm_w, head, hd, nm);
      rope_heads(head, 1, s.head_dim, s.rotary_dim, s.theta, inv_freq, pos);
      const std::int64_t kh = u - s.heads;
      for (std::int64_t i = 0; i < hd; ++i) kv_store(k_cache, slot * kw + kh * hd + i, head[i], s.kv_fp8, s.k_scale);
    } else {
      const std::int64_t vh = u - s.heads - s.kv_heads;
      if (v_norm) rmsnorm_row(head, /*w=*/nullptr, head, /*count=*/1, hd, nm.eps);  // x / rms(x), rounded once
      for (std::int64_t i = 0; i < hd; ++i) kv_store(v_cache, slot * kw + vh * hd + i, head[i], s.kv_fp8, s.v_scale);
    }
  }
}

// rmsnorm -> gate_up gemv over gate and up columns [o0, o1) of inter -> act(gate) * up.
template <class Act>
void gate_up_rows(const std::uint16_t* x, const std::uint16_t* norm_w, const FusedNorm& nm, const MetHostWeight& w,
                  std::uint16_t* out, std::int64_t rows, std::int64_t o0, std::int64_t o1, Act act) {
  RowDot dot(w);
  auto xn = buf(w.cols);
  auto gu = buf(w.rows);
  const std::int64_t inter = w.rows / 2;
  for (std::int64_t r = 0; r < rows; ++r) {
    fused_norm_row(x + r * w.cols, norm_w, xn.data(), w.cols, nm);
    gemv_cols(dot, xn.data(), gu.data(), o0, o1);
    gemv_cols(dot, xn.data(), gu.data(), inter + o0, inter + o1);
    act(gu.data() + o0, gu.data() + inter + o0, out + r * inter + o0, o1 - o0);
  }
}

// y = bf16(in W^T) over columns [o0, o1), then x[.., o0..o1) += y.
inline void gemv_residual_rows(const std::uint16_t* in, const MetHostWeight& w, std::uint16_t* x, std::int64_t rows,
                               std::int64_t o0, std::int64_t o1) {
  RowDot dot(w);
  auto y = buf(w.rows);
  for (std::int64_t r = 0; r < rows; ++r) {
    gemv_cols(dot, in + r * w.cols, y.data(), o0, o1);
    residual_row(x + r * w.rows + o0, y.data() + o0, o1 - o0);
  }
}

}  // namespace met::cpu

// x: [rows, w->cols]; y: [rows, w->rows], columns [out0, out1) written.
extern "C" void met_gemv(const std::uint16_t* x, const MetHostWeight* w, std::uint16_t* y, std::int64_t rows, std::int64_t out0, std::int64_t out1) {
  met::cpu::RowDot dot(*w);
  for (std::int64_t r = 0; r < rows; ++r) met::cpu::gemv_cols(dot, x + r * w->cols, y + r * w->rows, out0, out1);
}

// As met_gemv with the sums kept in fp32 (y: float [rows, w->rows]): a row-parallel projection's
// partial sums, rounded only after the ranks' partials are added (met_allreduce_residual).
extern "C" void met_gemv_f32(const std::uint16_t* x, const MetHostWeight* w, float* y, std::int64_t rows, std::int64_t out0,
                             std::int64_t out1) {
  met::cpu::RowDot dot(*w);
  for (std::int64_t r = 0; r < rows; ++r)
    for (std::int64_t o = out0; o < out1; ++o) y[r * w->rows + o] = dot(x + r * w->cols, o);
}

// As met_gemv with a bias b [w->rows] added to the fp32 sum before its one rounding.
extern "C" void met_gemv_bias(const std::uint16_t* x, const MetHostWeight* w, const std::uint16_t* b, std::uint16_t* y, std::int64_t rows,
                              std::int64_t out0, std::int64_t out1) {
  met::cpu::RowDot dot(*w);
  for (std::int64_t r = 0; r < rows; ++r)
    for (std::int64_t o = out0; o < out1; ++o)
      y[r * w->rows + o] = met::cpu::f32_to_bf16(dot(x + r * w->cols, o) + met::cpu::bf16_to_f32(b[o]));
}

// As met_gemv_bias with the sums kept in fp32 (y: float [rows, w->rows]), the bias added unrounded:
// a rank's partial sums of a biased row-parallel projection (gpt-oss's o under tensor parallelism;
// b null on every rank but the first).
extern "C" void met_gemv_bias_f32(const std::uint16_t* x, const MetHostWeight* w, const std::uint16_t* b, float* y, std::int64_t rows,
                                  std::int64_t out0, std::int64_t out1) {
  met::cpu::RowDot dot(*w);
  for (std::int64_t r = 0; r < rows; ++r)
    for (std::int64_t o = out0; o < out1; ++o) y[r * w->rows + o] = dot(x + r * w->cols, o) + (b ? met::cpu::bf16_to_f32(b[o]) : 0.0f);
}

// x: [rows, hidden]; w_qkv: [(heads + 2*kv_heads)*head_dim, hidden] (q, k, v stacked);
// q_out: [rows, heads*head_dim]; K and V land in cache slots[r] (layout of met_kv_append);
// inv_freq: fp32 [rotary_dim/2] or null (theta-based rope); norm_once, norm_offset: the norm's kind
// (FusedNorm, kernels/common/ops.def). Only head units [unit0, unit1) (q heads,
// then k heads, then v heads) are computed and written.
extern "C" void met_gemv_rmsnorm_qkv_rope(const std::uint16_t* x, const std::uint16_t* norm_w, float eps, std::int32_t norm_once, float norm_offset, const MetHostWeight* w_qkv, const std::int32_t* positions, const std::int64_t* slots, std::int64_t rows, const MetRopeShape* shape, const float* inv_freq, std::uint16_t* q_out, std::uint16_t* k_cache, std::uint16_t* v_cache, std::int64_t unit0, std::int64_t unit1) {
  met::cpu::RowDot dot(*w_qkv);
  auto xn = met::cpu::buf(w_qkv->cols);
  auto qkv = met::cpu::buf(w_qkv->rows);
  const std::int64_t qw = static_cast<std::int64_t>(shape->heads) * shape->head_dim;
  for (std::int64_t r = 0; r < rows; ++r)
    met::cpu::qkv_row(x + r * w_qkv->cols, norm_w, {eps, norm_once != 0, norm_offset}, dot, nullptr, nullptr, false, positions[r], slots[r], *shape, inv_freq,
                      q_out + r * qw, k_cache, v_cache, unit0, unit1, xn, qkv);
}

// As met_gemv_rmsnorm_qkv_rope with per-head RMSNorm of q and k (weights [head_dim], the same kind of
// norm as x's) before rope; v_norm 1: each V head x / rms(x) (weightless, eps), rounded once.
extern "C" void met_gemv_rmsnorm_qkv_qknorm_rope(const std::uint16_t* x, const std::uint16_t* norm_w, float eps, std::int32_t norm_once, float norm_offset, const MetHostWeight* w_qkv, const std::uint16_t* q_norm_w, const std::uint16_t* k_norm_w, std::int32_t v_norm, const std::int32_t* positions, const std::int64_t* slots, std::int64_t rows, const MetRopeShape* shape, const float* inv_freq, std::uint16_t* q_out, std::uint16_t* k_cache, std::uint16_t* v_cache, std::int64_t unit0, std::int64_t unit1) {
  met::cpu::RowDot dot(*w_qkv);
  auto xn = met::cpu::buf(w_qkv->cols);
  auto qkv = met::cpu::buf(w_qkv->rows);
  const std::int64_t qw = static_cast<std::int64_t>(shape->heads) * shape->head_dim;
  for (std::int64_t r = 0; r < rows; ++r)
    met::cpu::qkv_row(x + r * w_qkv->cols, norm_w, {eps, norm_once != 0, norm_offset}, dot, q_norm_w, k_norm_w, v_norm != 0, positions[r], slots[r], *shape, inv_freq,
                      q_out + r * qw, k_cache, v_cache, unit0, unit1, xn, qkv);
}

// x[rows, hidden] += bf16(attn[rows, heads*v_head_dim] W_o^T), hidden columns [out0, out1).
extern "C" void met_gemv_o_residual(const std::uint16_t* attn, const MetHostWeight* w_o, std::uint16_t* x, std::int64_t rows, std::int64_t out0, std::int64_t out1) {
  met::cpu::gemv_residual_rows(attn, *w_o, x, rows, out0, out1);
}

// out[rows, inter] = silu(gate) * up of rmsnorm(x) W_gate_up^T; w_gate_up: [2*inter, hidden];
// out columns [out0, out1) of inter (gate rows out0.. and up rows inter+out0.. of the weight).
extern "C" void met_gemv_rmsnorm_gate_up_silu(const std::uint16_t* x, const std::uint16_t* norm_w, float eps, std::int32_t norm_once, float norm_offset, const MetHostWeight* w_gate_up, std::uint16_t* out, std::int64_t rows, std::int64_t out0, std::int64_t out1) {
  met::cpu::gate_up_rows(x, norm_w, {eps, norm_once != 0, norm_offset}, *w_gate_up, out, rows, out0, out1, met::cpu::silu_mul_span);
}

// As met_gemv_rmsnorm_gate_up_silu with gelu_tanh(gate) * up.
extern "C" void met_gemv_rmsnorm_gate_up_gelu(const std::uint16_t* x, const std::uint16_t* norm_w, float eps, std::int32_t norm_once, float norm_offset, const MetHostWeight* w_gate_up, std::uint16_t* out, std::int64_t rows, std::int64_t out0, std::int64_t out1) {
  met::cpu::gate_up_rows(x, norm_w, {eps, norm_once != 0, norm_offset}, *w_gate_up, out, rows, out0, out1, met::cpu::gelu_mul_span);
}

// x[rows, hidden] += bf16(h[rows, inter] W_down^T), hidden columns [out0, out1).
extern "C" void met_gemv_down_residual(const std::uint16_t* h, const MetHostWeight* w_down, std::uint16_t* x, std::int64_t rows, std::int64_t out0, std::int64_t out1) {
  met::cpu::gemv_residual_rows(h, *w_down, x, rows, out0, out1);
}

namespace met::cpu {

// rmsnorm -> lm_head gemv over vocab columns [o0, o1) -> [softcap] -> argmax. logits (bf16,
// [rows, vocab]) kept when non-null; tokens written when non-null, which needs the whole vocab
// (a column-split lm_head leaves tokens to a separate met_argmax over the logits).
inline void lm_head_rows(const std::uint16_t* x, const std::uint16_t* norm_w, const FusedNorm& nm, const MetHostWeight& w,
                         float softcap, std::uint16_t* logits, std::int32_t* tokens, std::int64_t rows, std::int64_t o0,
                         std::int64_t o1) {
  RowDot dot(w);
  auto xn = buf(w.cols);
  auto lg = buf(w.rows);
  for (std::int64_t r = 0; r < rows; ++r) {
    fused_norm_row(x + r * w.cols, norm_w, xn.data(), w.cols, nm);
    gemv_cols(dot, xn.data(), lg.data(), o0, o1);
    if (softcap > 0.0f) softcap_row(lg.data() + o0, o1 - o0, softcap);
    if (tokens) tokens[r] = static_cast<std::int32_t>(o0) + argmax_row(lg.data() + o0, o1 - o0);
    if (logits)
      for (std::int64_t i = o0; i < o1; ++i) logits[r * w.rows + i] = lg[static_cast<std::size_t>(i)];
  }
}

}  // namespace met::cpu

// tokens[r] = argmax(rmsnorm(x[r]) W_lm_head^T) over vocab columns [out0, out1); logits and tokens
// may be null (tokens are the whole row's argmax only when [out0, out1) is the whole vocab).
extern "C" void met_gemv_rmsnorm_lm_head_argmax(const std::uint16_t* x, const std::uint16_t* norm_w, float eps, std::int32_t norm_once, float norm_offset, const MetHostWeight* w_lm_head, std::uint16_t* logits, std::int32_t* tokens, std::int64_t rows, std::int64_t out0, std::int64_t out1) {
  met::cpu::lm_head_rows(x, norm_w, {eps, norm_once != 0, norm_offset}, *w_lm_head, /*softcap=*/0.0f, logits, tokens, rows, out0, out1);
}

// As met_gemv_rmsnorm_lm_head_argmax with the final logit softcap (cap > 0) before argmax.
extern "C" void met_gemv_rmsnorm_lm_head_softcap_argmax(const std::uint16_t* x, const std::uint16_t* norm_w, float eps, std::int32_t norm_once, float norm_offset, const MetHostWeight* w_lm_head, float cap, std::uint16_t* logits, std::int32_t* tokens, std::int64_t rows, std::int64_t out0, std::int64_t out1) {
  met::cpu::lm_head_rows(x, norm_w, {eps, norm_once != 0, norm_offset}, *w_lm_head, cap, logits, tokens, rows, out0, out1);
}
