// Binding the projections: a plain linear (gemv, or any opcode of the gemm family) reads and writes
// the buffers its role names (qkv, or q alone: xn -> qkv, o: attn -> y, gate_up: xn -> gu, down: h -> y,
// lm_head: xn -> logits); the fused gemv ops add the residual, the norm, the gated activation or the
// head's argmax around it.
#include "emit/bind.hpp"

namespace met::emit::detail {
namespace {

// The fused ops' rmsnorm and linear:role nodes, with their weights (the norm's first).
struct NormLinear {
  const model::Node* lin = nullptr;
  std::uint32_t norm_w = 0, w = 0;
  FusedNormKind norm;
};
Expected<NormLinear> norm_linear(const KernelSite& site, const std::string& role) {
  const auto* norm = site.node("rmsnorm");
  const auto* lin = site.node("linear", role);
  if (!norm || !lin) return site.where("expects rmsnorm and linear:" + role);
  MET_TRY(auto nw, site.weight(norm));
  MET_TRY(auto w, site.weight(lin));
  MET_TRY(auto kind, fused_norm_kind(site, {norm}));
  return NormLinear{lin, nw, w, kind};
}

// gpt-oss: the bias node of a linear's role, over the projection's out_w columns.
Expected<std::uint32_t> projection_bias(const KernelSite& site, const std::string& role, std::int64_t out_w) {
  const auto* bn = site.node("bias", role);
  if (!bn) return site.where("expects bias:" + role + " after linear:" + role);
  if (param(*bn, "dim") != out_w)
    return site.where("bias:" + role + " over " + std::to_string(param(*bn, "dim")) + " columns, the projection has " +
                      std::to_string(out_w));
  return site.weight(bn);
}

// Tensor parallelism (--tp): a row-parallel projection (`plain`: gemv_f32 or gemm_f32) writes this
// rank's fp32 partial sums, and the all-reduce adds every rank's to the residual stream.
Expected<void> row_parallel_residual(const KernelSite& site, const char* plain, std::uint32_t in, std::uint32_t w) {
  Builder& b = site.b;
  const auto y = b.buffer("y.partial", MET_DTYPE_F32, {static_cast<std::uint64_t>(site.R), static_cast<std::uint64_t>(site.hidden)});
  MET_CHECK(b.add(plain, site.c.group_index, site.c.label, {in, w, y}, {site.R, /*in_row0=*/0, /*col_slices=*/1}, {}));
  return b.add("allreduce_residual", site.c.group_index, site.c.label, {site.x, y},
               {site.R, site.hidden, b.sh->tp, /*col_slices=*/1, /*accumulate=*/1}, {});
}

// Tensor parallelism: the rank's vocabulary slice of the logits, gathered from every rank into the
// logits IO tensor (then, when `tokens`, the argmax over the whole vocabulary).
Expected<void> gather_logits(const KernelSite& site, std::uint32_t local, std::int64_t local_vocab, bool tokens) {
  Builder& b = site.b;
  const std::int64_t vocab = local_vocab * b.sh->tp;
  const auto logits = b.io(IoField::logits, site.R, vocab);
  MET_CHECK(b.add("allgather_cols", site.c.group_index, site.c.label, {local, logits},
                  {site.R, local_vocab, b.sh->tp, /*col_slices=*/1}, {}));
  if (!tokens) return {};
  return b.add("argmax", site.c.group_index, site.c.label, {logits, b.io(IoField::out_tokens, site.R)}, {site.R, /*in_row0=*/0, vocab},
               {});
}

}  // namespace

Expected<void> bind_linear(const KernelSite& site) {
  Builder& b = site.b;
  const std::int64_t R = site.R;
  const auto* lin = site.node("linear");
  if (!lin) return site.where("expects linear");
  MET_TRY(auto w, site.weight(lin));
  const std::int64_t in = param(*lin, "in"), out_w = param(*lin, "out");
  const std::string& role = lin->role;
  std::uint32_t src = 0, dst = 0;
  if (role == "qkv" || role == "q") {  // q alone: a layer that reads another layer's KV
    src = b.act("xn", R, in);
    dst = b.act("qkv", R, out_w);
    b.q_src = dst;
    b.q_stride = out_w;
    b.qkv = dst;
    // q's columns: the layer's attention heads times its head size (Gemma-4's global layers have
    // a head size of their own).
    const model::Node* at = nullptr;
    for (const auto& n : site.c.scope->nodes)
      if (n.op == "attention") at = &n;
    if (!at) return site.where("a qkv projection in a layer without an attention node");
    b.q_width = param(*at, "heads") * param(*at, "head_dim");
  } else if (b.sh->tp > 1 && (role == "o" || role == "down")) {
    // A row-parallel projection apart from its residual (a step between them, as Gemma's post
    // norms): this rank's fp32 partial sums, all-reduced into y, rounded once as the unsplit
    // projection rounds, for the steps after it to read as they would read its output.
    const bool gemv = site.op.family == "gemv";
    if (!gemv && site.op.family != "gemm")
      return site.where("linear:" + role + " on '" + site.kname + "' (family " + site.op.family +
                        ") has no tensor-parallel form: a row-parallel projection runs as gemv_f32 or gemm_f32");
    const auto y = b.buffer("y.partial", MET_DTYPE_F32, {static_cast<std::uint64_t>(R), static_cast<std::uint64_t>(out_w)});
    const auto x = b.act(role == "o" ? "attn" : "h", R, in);
    if (site.k == "gemv_bias" || site.k == "gemm_bias") {
      // gpt-oss: the bias is added once, by the first rank, to its partial sums (unrounded); every
      // rank runs the same op (the ranks' programs pair instruction by instruction), the others
      // without the bias.
      std::uint32_t bias = MET_NO_TENSOR;
      if (b.sh->rank == 0) {
        MET_TRY(bias, projection_bias(site, role, out_w));
      }
      MET_CHECK(b.add(gemv ? "gemv_bias_f32" : "gemm_bias_f32", site.c.group_index, site.c.label, {x, w, bias, y},
                      {R, /*in_row0=*/0, /*col_slices=*/1}, {}));
    } else {
      MET_CHECK(b.add(gemv ? "gemv_f32" : "gemm_f32", site.c.group_index, site.c.label, {x, w, y}, {R, /*in_row0=*/0, /*col_slices=*/1},
                      {}));
    }
    return b.add("allreduce_residual", site.c.group_index, site.c.label, {b.act("y", R, out_w), y},
                 {R, out_w, b.sh->tp, /*col_slices=*/1, /*accumulate=*/0}, {});
  } else if (role == "o") {
    src = b.act("attn", R, in);
    dst = b.act("y", R, out_w);
  } else if (role == "per_layer_model_proj") {  // Gemma-4: the scaled embedding -> the per-layer inputs
    src = site.x;
    dst = b.act("ple_in", R, out_w);
  } else if (role == "per_layer_gate") {  // Gemma-4: the layer's output -> its per-layer gate
    src = site.x;
    dst = b.act("ple_g", R, out_w);
  } else if (role == "per_layer_proj") {
    src = b.act("ple_h", R, in);
    dst = b.act("y", R, out_w);
  } else if (role == "gate_up") {
    src = b.act("xn", R, in);
    dst = b.act("gu", R, out_w);
  } else if (role == "down") {
    src = b.act("h", R, in);
    dst = b.act("y", R, out_w);
  } else if (role == "lm_head") {
    src = b.act(site.pre + "xn", R, in);
    dst = b.sh->tp > 1 ? b.act(site.pre + "logits.rank", R, out_w) : b.io(IoField::logits, R, out_w);
  } else {
    return site.where("linear role '" + role + "' has no emitter yet");
  }
  std::vector<std::int64_t> ints{R, 0};
  if (int_index(site.op, "col_slices") >= 0) ints.push_back(/*col_slices=*/1);
  // A GEMM row's split K: none until the slicing's split_gemms chooses one.
  const bool k_split = int_index(site.op, "k_splits") >= 0;
  if (k_split) ints.push_back(/*k_splits=*/1);
  if (site.k == "gemv_bias" || site.k == "gemm_bias") {  // gpt-oss: the bias node of the linear's role
    MET_TRY(const auto bias, projection_bias(site, role, out_w));
    MET_CHECK(site.add({src, w, bias, dst}, ints, {}));
    return {};
  }
  if (k_split)
    MET_CHECK(site.add({src, w, dst, /*part=*/MET_NO_TENSOR}, ints, {}));
  else
    MET_CHECK(site.add({src, w, dst}, ints, {}));
  if (role == "lm_head" && b.sh->tp > 1) return gather_logits(site, dst, out_w, /*tokens=*/false);
  return {};
}

// gemv_o_residual (attn -> x) and gemv_down_residual (h -> x).
Expected<void> bind_residual_gemv(const KernelSite& site) {
  Builder& b = site.b;
  const std::int64_t R = site.R;
  const bool o = site.k == "gemv_o_residual";
  const auto* lin = site.node("linear", o ? "o" : "down");
  if (!lin) return site.where(std::string("expects linear:") + (o ? "o" : "down"));
  MET_TRY(auto w, site.weight(lin));
  const auto in = o ? b.act("attn", R, param(*lin, "in")) : b.act("h", R, param(*lin, "in"));
  if (b.sh->tp > 1) return row_parallel_residual(site, "gemv_f32", in, w);
  MET_CHECK(site.add({in, w, site.x}, {R, 0, /*col_slices=*/1}, {}));
  return {};
}

// The GEMMs with a fused epilogue. gate_up + gated activation: xn -> h ([rows, dim], dim half the
// weight's rows); o or down + residual: attn or h -> x, added in place.
Expected<void> bind_gemm_gated(const KernelSite& site) {
  const auto* lin = site.node("linear", "gate_up");
  if (!lin) return site.where("expects linear:gate_up");
  MET_TRY(auto w, site.weight(lin));
  const std::int64_t in = param(*lin, "in"), out_w = param(*lin, "out");
  if (out_w % 2 != 0) return site.where("gate_up has an odd number of outputs (" + std::to_string(out_w) + ")");
  MET_CHECK(site.add({site.b.act("xn", site.R, in), w, site.b.act("h", site.R, out_w / 2), /*part=*/MET_NO_TENSOR},
                     {site.R, 0, /*col_slices=*/1, /*k_splits=*/1}, {}));
  return {};
}

Expected<void> bind_gemm_residual(const KernelSite& site) {
  const auto* lin = site.node("linear");
  if (!lin || (lin->role != "o" && lin->role != "down"))
    return site.where("expects linear:o or linear:down before the residual, not " + (lin ? "linear:" + lin->role : "none"));
  MET_TRY(auto w, site.weight(lin));
  const auto in = site.b.act(lin->role == "o" ? "attn" : "h", site.R, param(*lin, "in"));
  if (site.b.sh->tp > 1) return row_parallel_residual(site, "gemm_f32", in, w);
  MET_CHECK(site.add({in, w, site.x, /*part=*/MET_NO_TENSOR}, {site.R, 0, /*col_slices=*/1, /*k_splits=*/1}, {}));
  return {};
}

// gemv_rmsnorm_gate_up_silu and _gelu: x -> h.
Expected<void> bind_gate_up(const KernelSite& site) {
  MET_TRY(const auto nl, norm_linear(site, "gate_up"));
  MET_CHECK(site.add({site.x, nl.norm_w, nl.w, site.b.act("h", site.R, param(*nl.lin, "out") / 2)},
                     {site.R, /*in_row0=*/0, /*col_slices=*/1, nl.norm.once, nl.norm.offset}, {nl.norm.eps}));
  return {};
}

// gemv_rmsnorm_lm_head_argmax and _softcap_argmax: x -> logits and out_tokens.
Expected<void> bind_lm_head(const KernelSite& site) {
  Builder& b = site.b;
  const std::int64_t R = site.R;
  MET_TRY(const auto nl, norm_linear(site, "lm_head"));
  const std::int64_t vocab = param(*nl.lin, "out");
  std::vector<float> imms{nl.norm.eps};
  const std::vector<std::int64_t> ints{R, /*in_row0=*/0, /*col_slices=*/1, nl.norm.once, nl.norm.offset};
  if (site.k == "gemv_rmsnorm_lm_head_softcap_argmax") {
    MET_TRY(const float cap, softcap_of(site));
    imms.push_back(cap);
  }
  if (b.sh->tp > 1) {  // this rank's vocabulary slice, then the gather and the argmax over all of it
    const auto local = b.act(site.pre + "logits.rank", R, vocab);
    MET_CHECK(site.add({site.x, nl.norm_w, nl.w, local, MET_NO_TENSOR}, ints, imms));
    return gather_logits(site, local, vocab, /*tokens=*/true);
  }
  MET_CHECK(site.add({site.x, nl.norm_w, nl.w, b.io(IoField::logits, R, vocab), b.io(IoField::out_tokens, R)}, ints, imms));
  return {};
}

}  // namespace met::emit::detail
