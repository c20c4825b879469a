// Binding the attention family: the fused rmsnorm + qkv + rope projections (which also append K and
// V to the cache), split-KV decode attention and its merge, flash prefill attention, and the
// separate rope and kv_append of the unfused path. Attention reads q where its producer left it
// (Builder::q_src, q_stride).
#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "emit/bind.hpp"
#include "emit/rope.hpp"
#include "kernels/common/interp/smem.h"
#include "model/kv_ring.hpp"

namespace met::emit::detail {

Expected<void> bind_qkv_rope(const KernelSite& site) {
  Builder& b = site.b;
  const auto& c = site.c;
  const std::int64_t R = site.R;
  const auto* norm = site.node("rmsnorm", "attn_norm");
  const auto* lin = site.node("linear", "qkv");
  const auto* rope = site.node("rope");
  if (!norm || !lin || !rope) return site.where("expects rmsnorm:attn_norm, linear:qkv and rope");
  MET_TRY(auto nw, site.weight(norm));
  MET_TRY(auto wq, site.weight(lin));
  const std::int64_t heads = param(*rope, "heads"), hd = param(*rope, "head_dim");
  const auto q = b.act("q", R, heads * hd);
  const auto& kv = b.sh->kv.at(c.layer);
  std::vector<std::uint32_t> t{site.x, nw, wq};
  std::vector<const model::Node*> norms{norm};
  if (site.k == "gemv_rmsnorm_qkv_qknorm_rope") {
    const auto* qn = site.node("rmsnorm", "q_norm");
    const auto* kn = site.node("rmsnorm", "k_norm");
    if (!qn || !kn) return site.where("expects rmsnorm:q_norm and rmsnorm:k_norm");
    norms.insert(norms.end(), {qn, kn});
    MET_TRY(auto qw, site.weight(qn));
    MET_TRY(auto kw, site.weight(kn));
    t.push_back(qw);
    t.push_back(kw);
  }
  MET_TRY(const auto nk, fused_norm_kind(site, norms));
  // Gemma-4's weightless v_norm: V heads as bf16(x / rms(x)) with the input norm's eps.
  std::int64_t v_norm = 0;
  if (const auto* vn = site.node("rmsnorm", "v_norm")) {
    if (param(*vn, "weighted") != 0) return site.where("a weighted v_norm on '" + site.kname + "', whose V norm takes no weight");
    MET_TRY(const auto vk, norm_kind_of(site, *vn));
    if (vk.eps != nk.eps)
      return site.where("v_norm on '" + site.kname + "' has another eps than " + norms[0]->role + " (one eps per instruction)");
    v_norm = 1;
  }
  const std::int64_t rotary = param(*rope, "rotary_dim");
  const RopeConfig rc = node_rope(b.cfg, *rope);
  if (rc.attention_scale() != 1.0f)
    return site.where("the fused qkv + rope bodies take no YaRN attention factor (config.json's is " +
                      std::to_string(rc.attention_scale()) + "); its rope runs unfused");
  // A ring cache's writes go to the ring's slots (emit.hpp, runtime contract).
  const IoField slots = b.sh->kv_ring.at(c.layer) > 0 ? IoField::ring_slots : IoField::slots;
  // push_back, not insert of a list: gcc 12 takes the list's copy for an overflow of t's first three.
  for (const std::uint32_t h : {b.io(IoField::positions, R), b.io(slots, R), q, kv.first, kv.second, inv_freq_table(*b.sh, rc, rotary)})
    t.push_back(h);
  const std::pair<float, float> ks = b.sh->kv_scale.at(c.layer);
  // seq_slots: the cache rows a sequence owns (the verifier's extent of a decode row's writes).
  const std::int64_t seq_slots = model::kv_rows_per_seq(b.sh->kv_ring.at(c.layer), b.max_ctx);
  std::vector<std::int64_t> ints{R, /*in_row0=*/0, heads, param(*rope, "kv_heads"), hd, rotary, seq_slots, /*col_slices=*/1,
                                 /*unit_rows=*/hd, b.sh->kv_fp8, nk.once, nk.offset};
  if (site.k == "gemv_rmsnorm_qkv_qknorm_rope") ints.push_back(v_norm);
  MET_CHECK(site.add(t, std::move(ints), {nk.eps, static_cast<float>(rc.theta), ks.first, ks.second}));
  b.q_src = q;
  b.q_stride = heads * hd;
  return {};
}

// attn_decode_split and attn_decode_merge (the split state in part_o / part_ml), the two in one
// (attn_decode_split_merge), and every opcode of the attention_prefill family.
Expected<void> bind_attention(const KernelSite& site) {
  Builder& b = site.b;
  const auto& c = site.c;
  const auto& k = site.k;
  const std::int64_t R = site.R;
  const auto* at = site.node("attention");
  if (!at) return site.where("expects attention");
  const std::int64_t heads = param(*at, "heads"), kvh = param(*at, "kv_heads"), hd = param(*at, "head_dim");
  const std::int64_t vhd = param(*at, "v_head_dim") > 0 ? param(*at, "v_head_dim") : hd;
  std::uint32_t sinks = MET_NO_TENSOR;
  if (param(*at, "sinks") != 0) {
    MET_TRY(auto sw, site.weight(at));
    sinks = sw;
  }
  const float softcap = static_cast<float>(at->params.count("softcap") ? at->params.at("softcap") : 0.0);
  // The node's score scale (Gemma: query_pre_attn_scalar^-1/2), else 1/sqrt(head_dim).
  const double node_scale = at->params.count("scale") ? at->params.at("scale") : 0.0;
  const float scale = node_scale > 0 ? static_cast<float>(node_scale) : 1.0f / std::sqrt(static_cast<float>(hd));
  if (b.q_src == MET_NO_TENSOR) return site.where("attention before any q producer");
  const auto qsrc = b.q_src;
  const std::int64_t qstride = b.q_stride;
  // A layer that shares KV (Gemma-4's num_kv_shared_layers) reads the caches of its source layer.
  const int kv_layer = site.graph.kv_source.empty() ? c.layer : site.graph.kv_source[static_cast<std::size_t>(c.layer)];
  const auto& kv = b.sh->kv.at(kv_layer);
  const auto out = b.act("attn", R, heads * vhd);
  const bool fused = k == "attn_decode_split_merge";
  // The splits of a row's keys. On a GPU, enough to give every stream one slice: the split's slices
  // are (row, split) units, the fused op's (row, head block, split) ones (a block: up to 8 query
  // heads of one KV head, MET_ATTN_UNIT_HEADS), so it takes one split (and no state) where the rows'
  // blocks already fill the streams. A split takes at least b.split_keys keys: of max_ctx
  // (b.splits_max), and of the window in a sliding layer, whose rows read no more (Gemma-3 1B's
  // window of 512 takes 16 splits, not 130 of 4 keys whose states one block then merges). The cpu
  // keeps b.splits_max.
  const std::int64_t window = param(*at, "window");
  const std::int64_t group = kvh > 0 ? heads / kvh : 0;
  const std::int64_t per_row = fused && group > 0 ? MET_ATTN_UNIT_BLOCKS(heads, kvh) : 1;
  std::int64_t most = std::max<std::int64_t>(1, b.splits_max);
  if (window > 0 && b.split_keys > 0) most = std::min(most, std::max<std::int64_t>(1, window / b.split_keys));
  const std::int64_t splits =
      b.streams > 0 ? std::clamp<std::int64_t>(b.streams / std::max<std::int64_t>(1, R * per_row), 1, most) : b.splits_max;
  const std::uint64_t S = static_cast<std::uint64_t>(splits);
  const bool split_state = k == "attn_decode_split" || k == "attn_decode_merge" || (fused && splits > 1);
  const auto po =
      split_state
          ? b.buffer("part_o", MET_DTYPE_F32,
                     {static_cast<std::uint64_t>(R), static_cast<std::uint64_t>(heads), S, static_cast<std::uint64_t>(vhd)})
          : MET_NO_TENSOR;
  const auto pml =
      split_state ? b.buffer("part_ml", MET_DTYPE_F32, {static_cast<std::uint64_t>(R), static_cast<std::uint64_t>(heads), S, 2})
                  : MET_NO_TENSOR;
  const auto& ks = b.sh->kv_scale.at(kv_layer);
  const std::int64_t fp8 = b.sh->kv_fp8;
  // The cache's ring (0: linear): its sequences start at ring_base (emit.hpp, runtime contract).
  const std::int64_t ring = b.sh->kv_ring.at(kv_layer);
  // A prefill launch appends up to R positions of one sequence before reading them; a decode row one.
  const std::int64_t appended = k == "attn_decode_split" || fused || k == "attn_decode_merge" ? 1 : R;
  if (ring > 0 && (window <= 0 || window + appended - 1 > ring))
    return site.where(fmt::format("attention of window {} after {} appended positions cannot read a KV ring of {} rows",
                                  window, appended, ring));
  const auto base = b.io(ring > 0 ? IoField::ring_base : IoField::seq_base, R);
  if (k == "attn_decode_split") {
    MET_CHECK(site.add({qsrc, kv.first, kv.second, base, b.io(IoField::seq_len, R), po, pml},
                       {R, heads, kvh, hd, vhd, window, splits, qstride, /*col_slices=*/1, fp8, ring},
                       {softcap, scale, ks.first, ks.second}));
  } else if (fused) {
    MET_CHECK(site.add({qsrc, kv.first, kv.second, base, b.io(IoField::seq_len, R), sinks, po, pml, out},
                       {R, heads, kvh, hd, vhd, window, splits, qstride, /*col_slices=*/1, fp8, ring},
                       {softcap, scale, ks.first, ks.second}));
  } else if (k == "attn_decode_merge") {
    MET_CHECK(site.add({po, pml, sinks, out}, {R, heads, kvh, hd, vhd, window, splits, /*col_slices=*/1}, {softcap, scale}));
  } else {
    MET_CHECK(site.add({qsrc, kv.first, kv.second, b.io(IoField::positions, R), base, sinks, out},
                       {R, heads, kvh, hd, vhd, window, qstride, /*col_slices=*/1, fp8, ring}, {softcap, scale, ks.first, ks.second}));
  }
  return {};
}

Expected<void> bind_rope(const KernelSite& site) {
  Builder& b = site.b;
  const std::int64_t R = site.R;
  const auto* n = site.node("rope");
  MET_TRY(const auto qkv, site.qkv("rope without a qkv buffer"));
  const std::int64_t heads = param(*n, "heads"), hd = param(*n, "head_dim");
  const std::int64_t rotary = param(*n, "rotary_dim");
  const RopeConfig rc = node_rope(b.cfg, *n);
  MET_CHECK(site.add({qkv.handle, b.io(IoField::positions, R), inv_freq_table(*b.sh, rc, rotary)},
                     {R, qkv.stride, heads, param(*n, "kv_heads"), hd, rotary, heads * hd},
                     {static_cast<float>(rc.theta), rc.attention_scale()}));
  return {};
}

Expected<void> bind_kv_append(const KernelSite& site) {
  Builder& b = site.b;
  const std::int64_t R = site.R;
  const auto* n = site.node("kv_append");
  MET_TRY(const auto qkv, site.qkv("kv_append without a qkv buffer"));
  const std::int64_t kvh = param(*n, "kv_heads"), hd = param(*n, "head_dim");
  const std::int64_t vhd = param(*n, "v_head_dim") > 0 ? param(*n, "v_head_dim") : hd;
  const std::int64_t kcol = qkv.stride - kvh * (hd + vhd);
  const auto& kv = b.sh->kv.at(site.c.layer);
  const auto& ks = b.sh->kv_scale.at(site.c.layer);
  const IoField slots = b.sh->kv_ring.at(site.c.layer) > 0 ? IoField::ring_slots : IoField::slots;
  MET_CHECK(site.add({qkv.handle, b.io(slots, R), kv.first, kv.second},
                     {R, qkv.stride, kcol, kcol + kvh * hd, kvh, hd, vhd, b.sh->kv_fp8}, {ks.first, ks.second}));
  return {};
}

}  // namespace met::emit::detail
