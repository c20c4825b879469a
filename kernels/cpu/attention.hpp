// cpu reference bodies of attention: split-KV decode (one query row per sequence, partial
// softmax states per split, then a merge that also adds the sinks) and causal prefill over T rows
// of one sequence. Options: sliding window, per-head sinks, score softcap. Include from one TU.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "bf16.hpp"
#include "quant.hpp"
#include "../common/interp/smem.h"  // MET_ATTN_UNIT_HEADS

// Attention geometry and options. window 0 = full causal; softcap 0 = off; scale is applied to
// q.k before the softcap (usually 1/sqrt(head_dim)). kv_fp8 1: the caches hold e4m3 codes, K =
// code * k_scale, V = code * v_scale (quant.hpp kv_load); 0: bf16 caches.
struct MetAttnShape {
  std::int32_t heads;
  std::int32_t kv_heads;
  std::int32_t head_dim;
  std::int32_t v_head_dim;
  std::int32_t window;
  float softcap;
  float scale;
  std::int32_t kv_fp8 = 0;
  float k_scale = 1.0f;
  float v_scale = 1.0f;
  std::int32_t ring = 0;  // > 0: the layer's cache is a ring of `ring` rows a sequence (cache_row)
};

namespace met::cpu {

// Unnormalised softmax state over a key range: max score m, sum l of exp(s - m), o = sum exp(s - m) v.
struct SoftmaxState {
  float m = -INFINITY;
  float l = 0.0f;
};

// First key position a query at `pos` sees.
inline std::int64_t window_start(std::int64_t pos, std::int32_t window) {
  return window > 0 ? std::max<std::int64_t>(0, pos - window + 1) : 0;
}

// The cache slot of a sequence's position p: base + p, or base + p % ring in a sliding-window
// layer's ring (kernels/common/ops.def).
inline std::int64_t cache_row(std::int64_t base, std::int64_t p, const MetAttnShape& s) {
  return base + (s.ring > 0 ? p % s.ring : p);
}

// Folds keys [lo, hi) of one (query head, kv head) into state/o (o has v_head_dim floats).
// Caches are [slot][kv_heads][dim]; the sequence's position p is slot cache_row(base, p). The range is one
// block: its scores first, then the state rescaled to the block's running max m, then each
// exp(s - m) added to l in fp32 and, rounded to bf16, times v to o (as a flash kernel rounds its
// probabilities to bf16 for the P.V product).
inline void attend_range(const std::uint16_t* q, const std::uint16_t* k_cache, const std::uint16_t* v_cache,
                         std::int64_t base, std::int64_t lo, std::int64_t hi, std::int32_t kv_head,
                         const MetAttnShape& s, SoftmaxState& st, float* o) {
  if (hi <= lo) return;
  const std::int64_t kw = static_cast<std::int64_t>(s.kv_heads) * s.head_dim;
  const std::int64_t vw = static_cast<std::int64_t>(s.kv_heads) * s.v_head_dim;
  std::vector<float> scores(static_cast<std::size_t>(hi - lo));
  float m_new = st.m;
  for (std::int64_t j = lo; j < hi; ++j) {
    const std::int64_t k = cache_row(base, j, s) * kw + static_cast<std::int64_t>(kv_head) * s.head_dim;
    float dot = 0.0f;
    for (std::int32_t d = 0; d < s.head_dim; ++d) dot += bf16_to_f32(q[d]) * kv_load(k_cache, k + d, s.kv_fp8, s.k_scale);
    float score = dot * s.scale;
    if (s.softcap > 0.0f) score = s.softcap * std::tanh(score / s.softcap);
    scores[static_cast<std::size_t>(j - lo)] = score;
    m_new = std::max(m_new, score);
  }
  const float carry = std::exp(st.m - m_new);  // exp(-inf) = 0 on the first block
  st.l *= carry;
  for (std::int32_t d = 0; d < s.v_head_dim; ++d) o[d] *= carry;
  for (std::int64_t j = lo; j < hi; ++j) {
    const std::int64_t v = cache_row(base, j, s) * vw + static_cast<std::int64_t>(kv_head) * s.v_head_dim;
    const float p = std::exp(scores[static_cast<std::size_t>(j - lo)] - m_new);
    st.l += p;
    const float pb = round_bf16(p);
    for (std::int32_t d = 0; d < s.v_head_dim; ++d) o[d] += pb * kv_load(v_cache, v + d, s.kv_fp8, s.v_scale);
  }
  st.m = m_new;
}

// Merges split states (and an optional sink logit) into a normalised bf16 output row.
inline void merge_states(const float* part_o, const float* part_ml, std::int32_t splits, std::int32_t v_head_dim,
                         const std::uint16_t* sink, std::uint16_t* out) {
  float m = sink ? bf16_to_f32(*sink) : -INFINITY;
  for (std::int32_t i = 0; i < splits; ++i) m = std::max(m, part_ml[2 * i]);
  float l = sink ? std::exp(bf16_to_f32(*sink) - m) : 0.0f;
  std::vector<float> acc(static_cast<std::size_t>(v_head_dim), 0.0f);
  for (std::int32_t i = 0; i < splits; ++i) {
    if (part_ml[2 * i + 1] == 0.0f) continue;  // empty split
    const float w = std::exp(part_ml[2 * i] - m);
    l += part_ml[2 * i + 1] * w;
    for (std::int32_t d = 0; d < v_head_dim; ++d)
      acc[static_cast<std::size_t>(d)] += part_o[static_cast<std::int64_t>(i) * v_head_dim + d] * w;
  }
  const float inv = l > 0.0f ? 1.0f / l : 0.0f;
  for (std::int32_t d = 0; d < v_head_dim; ++d) out[d] = f32_to_bf16(acc[static_cast<std::size_t>(d)] * inv);
}

}  // namespace met::cpu

// Decode, split-KV. q: [rows, heads*head_dim] (one query per sequence, already roped); sequence r
// holds seq_len[r] keys (its own included) at cache slots seq_base[r] + p. Keys in the window are
// cut into `splits` equal ranges; part_o: [rows][heads][splits][v_head_dim] (unnormalised),
// part_ml: [rows][heads][splits][2] = (max score, sum of exp). An empty split has (-inf, 0).
// Only splits [split0, split1) are computed (a slice may own a range of them).
extern "C" void met_attn_decode_split(const std::uint16_t* q, const std::uint16_t* k_cache, const std::uint16_t* v_cache, const std::int64_t* seq_base, const std::int32_t* seq_len, std::int64_t rows, const MetAttnShape* shape, std::int32_t splits, std::int32_t split0, std::int32_t split1, float* part_o, float* part_ml) {
  const MetAttnShape& s = *shape;
  const std::int32_t group = s.heads / s.kv_heads;
  for (std::int64_t r = 0; r < rows; ++r) {
    const std::int64_t len = seq_len[r];
    const std::int64_t lo = met::cpu::window_start(len - 1, s.window);
    const std::int64_t chunk = (len - lo + splits - 1) / splits;
    for (std::int32_t h = 0; h < s.heads; ++h) {
      const std::uint16_t* qh = q + (r * s.heads + h) * s.head_dim;
      for (std::int32_t i = split0; i < split1; ++i) {
        const std::int64_t idx = (r * s.heads + h) * splits + i;
        float* o = part_o + idx * s.v_head_dim;
        std::fill(o, o + s.v_head_dim, 0.0f);
        met::cpu::SoftmaxState st;
        const std::int64_t a = std::min(len, lo + i * chunk);
        const std::int64_t b = std::min(len, a + chunk);
        met::cpu::attend_range(qh, k_cache, v_cache, seq_base[r], a, b, h / group, s, st, o);
        part_ml[2 * idx] = st.m;
        part_ml[2 * idx + 1] = st.l;
      }
    }
  }
}

// Decode merge: out [rows, heads*v_head_dim] bf16 from the split states; sinks ([heads] bf16
// logits, may be null) join the softmax denominator only. Heads [head0, head1) are merged.
extern "C" void met_attn_decode_merge(const float* part_o, const float* part_ml, const std::uint16_t* sinks, std::int64_t rows, const MetAttnShape* shape, std::int32_t splits, std::int32_t head0, std::int32_t head1, std::uint16_t* out) {
  const MetAttnShape& s = *shape;
  for (std::int64_t r = 0; r < rows; ++r)
    for (std::int32_t h = head0; h < head1; ++h) {
      const std::int64_t idx = (r * s.heads + h) * splits;
      met::cpu::merge_states(part_o + idx * s.v_head_dim, part_ml + idx * 2, splits, s.v_head_dim,
                             sinks ? sinks + h : nullptr, out + (r * s.heads + h) * s.v_head_dim);
    }
}

// Decode, split-KV with the merge folded in, for one row: units [unit0, unit1) of blocks x splits,
// a block being MET_ATTN_UNIT_HEADS(group) query heads of one KV head (unit u: block u / splits,
// split u % splits). With splits > 1 each unit writes the states of its block's query heads at its
// split (part_o / part_ml laid out as met_attn_decode_split's, for this row); a unit that is its
// block's last split writes those heads' out, from their whole key range (the GPU body merges the
// splits' states there instead: the same values, to rounding).
extern "C" void met_attn_decode_split_merge(const std::uint16_t* q, const std::uint16_t* k_cache, const std::uint16_t* v_cache, std::int64_t seq_base, std::int32_t seq_len, const MetAttnShape* shape, std::int32_t splits, std::int64_t unit0, std::int64_t unit1, const std::uint16_t* sinks, float* part_o, float* part_ml, std::uint16_t* out) {
  const MetAttnShape& s = *shape;
  const std::int32_t group = s.heads / s.kv_heads, uh = MET_ATTN_UNIT_HEADS(group);
  const std::int64_t len = seq_len, lo = met::cpu::window_start(len - 1, s.window);
  const std::int64_t chunk = (len - lo + splits - 1) / splits;
  std::vector<float> o(static_cast<std::size_t>(s.v_head_dim));
  for (std::int64_t u = unit0; u < unit1; ++u) {
    const std::int32_t h0 = static_cast<std::int32_t>(u / splits) * uh, i = static_cast<std::int32_t>(u % splits);
    const std::int32_t kv = h0 / group;
    for (std::int32_t h = h0; h < h0 + uh; ++h) {
      const std::uint16_t* qh = q + static_cast<std::int64_t>(h) * s.head_dim;
      if (splits > 1) {
        const std::int64_t idx = static_cast<std::int64_t>(h) * splits + i;
        float* po = part_o + idx * s.v_head_dim;
        std::fill(po, po + s.v_head_dim, 0.0f);
        met::cpu::SoftmaxState st;
        const std::int64_t a = std::min(len, lo + i * chunk), b = std::min(len, a + chunk);
        met::cpu::attend_range(qh, k_cache, v_cache, seq_base, a, b, kv, s, st, po);
        part_ml[2 * idx] = st.m;
        part_ml[2 * idx + 1] = st.l;
      }
      if (i != splits - 1) continue;
      std::fill(o.begin(), o.end(), 0.0f);
      met::cpu::SoftmaxState st;
      met::cpu::attend_range(qh, k_cache, v_cache, seq_base, lo, len, kv, s, st, o.data());
      const float ml[2] = {st.m, st.l};
      met::cpu::merge_states(o.data(), ml, /*splits=*/1, s.v_head_dim, sinks ? sinks + h : nullptr,
                             out + static_cast<std::int64_t>(h) * s.v_head_dim);
    }
  }
}

// Prefill: q [tokens, heads*head_dim] at positions start_pos + t of one sequence whose keys
// 0 .. start_pos+tokens-1 are already in the cache at seq_base + p; causal, windowed, sinks.
// out: [tokens, heads*v_head_dim]. Heads [head0, head1) are computed (a slice may own a range).
extern "C" void met_attn_prefill(const std::uint16_t* q, const std::uint16_t* k_cache, const std::uint16_t* v_cache, std::int64_t seq_base, std::int32_t start_pos, std::int64_t tokens, const MetAttnShape* shape, std::int32_t head0, std::int32_t head1, const std::uint16_t* sinks, std::uint16_t* out) {
  const MetAttnShape& s = *shape;
  const std::int32_t group = s.heads / s.kv_heads;
  std::vector<float> o(static_cast<std::size_t>(s.v_head_dim));
  for (std::int64_t t = 0; t < tokens; ++t) {
    const std::int64_t pos = start_pos + t;
    for (std::int32_t h = head0; h < head1; ++h) {
      std::fill(o.begin(), o.end(), 0.0f);
      met::cpu::SoftmaxState st;
      met::cpu::attend_range(q + (t * s.heads + h) * s.head_dim, k_cache, v_cache, seq_base,
                             met::cpu::window_start(pos, s.window), pos + 1, h / group, s, st, o.data());
      const float ml[2] = {st.m, st.l};
      met::cpu::merge_states(o.data(), ml, /*splits=*/1, s.v_head_dim, sinks ? sinks + h : nullptr,
                             out + (t * s.heads + h) * s.v_head_dim);
    }
  }
}
