// Binding the row-wise ops: the embedding gather, rmsnorm (of x into xn, or in place on the q and k
// columns of the qkv buffer), the residual add, the gated activations, argmax and the head's
// softcap over the logits.
#include <algorithm>
#include <cmath>
#include <limits>
#include <utility>

#include "emit/bind.hpp"
#include "kernels/cpu/bf16.hpp"

namespace met::emit::detail {

// Gemma-4's per-layer inputs live in buffers of their own, [rows, layers * per-layer width]: the
// token part (ple, role per_layer_tok) and the projection of the embedding that becomes the inputs
// (ple_in). The embedding, scale, norm and residual nodes of those roles bind to them.
const char* per_layer_buffer(const std::string& role) {
  if (role == "per_layer_tok") return "ple";
  if (role == "per_layer_proj" || role == "per_layer_input" || role == "per_layer_norm" || role == "per_layer_sum") return "ple_in";
  return nullptr;
}

Expected<void> bind_embed(const KernelSite& site) {
  Builder& b = site.b;
  const std::int64_t R = site.R;
  const auto* n = site.node("embed");
  MET_TRY(auto w, site.weight(n));
  const char* ple = per_layer_buffer(n->role);
  const auto out = ple ? b.act(ple, R, param(*n, "dim")) : site.x;
  MET_CHECK(site.add({b.io(IoField::tokens, R), w, out}, {R, 0}, {}));
  return {};
}

// gelu_mul_split (Gemma-4's per-layer input): gelu(ple_g) * layer L's columns of ple_in -> ple_h.
Expected<void> bind_gelu_mul_split(const KernelSite& site) {
  Builder& b = site.b;
  const auto* n = site.node("gelu_mul_split");
  const std::int64_t dim = param(*n, "dim");
  auto it = b.bufs.find("ple_in");
  if (it == b.bufs.end()) return site.where("gelu_mul_split before the per-layer inputs");
  const auto width = static_cast<std::int64_t>(b.sh->file->tensors[it->second].shape[1]);
  if ((site.c.layer + 1) * dim > width)
    return site.where("layer " + std::to_string(site.c.layer) + "'s per-layer input of " + std::to_string(dim) +
                      " columns is past the inputs' " + std::to_string(width));
  MET_CHECK(site.add({b.act("ple_g", site.R, dim), it->second, b.act("ple_h", site.R, dim)},
                     {site.R, dim, width, site.c.layer * dim}, {}));
  return {};
}

// rmsnorm and rmsnorm_offset (Gemma's norms: the weight product in fp32, rounded once; 1 + w on
// Gemma-3): of x into xn, in place on the q, k or v columns of the qkv buffer, or in place on y
// (post_attn_norm and post_mlp_norm: Gemma's norms of a projection's output before the residual;
// post_dense_norm: Gemma-4's of its dense MLP's beside the experts). Gemma-4's expert branch: x
// into moe.xn (moe_norm), in place on moe.y (post_moe_norm); its router_norm binds only as a part
// of the router's kernel. A weightless norm (Gemma-4's v_norm) binds no weight. eps: the node's,
// else config.json's.
Expected<void> bind_rmsnorm(const KernelSite& site) {
  Builder& b = site.b;
  const std::int64_t R = site.R;
  const auto* n = site.node("rmsnorm");
  if (n->role == "router_norm") return site.where("router_norm on '" + site.kname + "': it binds only inside its router's kernel");
  const bool weighted = param(*n, "weighted") != 0;
  std::uint32_t w = MET_NO_TENSOR;
  if (weighted) {
    MET_TRY(w, site.weight(n));
  } else if (site.k != "rmsnorm_offset") {
    return site.where("a norm without a weight on '" + site.kname + "', whose body reads one");
  }
  const std::int64_t dim = param(*n, "dim"), count = std::max<std::int64_t>(1, param(*n, "count"));
  const double node_eps = n->params.count("eps") ? n->params.at("eps") : 0.0;
  const float eps = node_eps > 0 ? static_cast<float>(node_eps) : b.cfg.eps;
  std::vector<float> imms{eps};
  if (site.k == "rmsnorm_offset") {
    const double offset = n->params.count("offset") ? n->params.at("offset") : 0.0;
    if (offset == 0 && param(*n, "round_once") == 0 && weighted)
      return site.where("rmsnorm_offset on a norm without an offset or a single rounding");
    imms.push_back(static_cast<float>(offset));
  }
  if (n->role == "q_norm" || n->role == "k_norm" || n->role == "v_norm") {
    MET_TRY(const auto qkv, site.qkv("q/k/v norm before the qkv projection"));
    // v: the last count * dim columns of the row.
    const std::int64_t col0 = n->role == "q_norm" ? 0 : n->role == "k_norm" ? b.q_width : qkv.stride - count * dim;
    MET_CHECK(site.add({qkv.handle, w, qkv.handle}, {R, 0, count, dim, qkv.stride, col0, qkv.stride, col0}, imms));
  } else if (const char* ple = per_layer_buffer(n->role)) {  // in place on the per-layer inputs
    const auto y = b.act(ple, R, dim * count);
    MET_CHECK(site.add({y, w, y}, {R, 0, count, dim, dim * count, 0, dim * count, 0}, imms));
  } else if (n->role == "post_attn_norm" || n->role == "post_mlp_norm" || n->role == "post_per_layer_norm" ||
             n->role == "post_dense_norm" || n->role == "post_moe_norm") {
    if (dim * count != site.hidden) return site.where("post norm over " + std::to_string(dim * count) + " columns, not the hidden " +
                                                      std::to_string(site.hidden));
    const auto y = b.act(n->role == "post_moe_norm" ? kMoeY : "y", R, site.hidden);
    MET_CHECK(site.add({y, w, y}, {R, 0, count, dim, site.hidden, 0, site.hidden, 0}, imms));
  } else {
    const auto y = b.act(n->role == "moe_norm" ? std::string(kMoeXn) : site.pre + "xn", R, dim * count);
    MET_CHECK(site.add({site.x, w, y}, {R, /*in_row0=*/0, count, dim, site.hidden, 0, dim * count, 0}, imms));
  }
  return {};
}

// Gemma's post-norm of y with the residual add after it, and Gemma-4's layer scalar where the group
// ends with it (rmsnorm_residual): x = x + norm(y), then x *= s. The norm's kind as bind_rmsnorm
// binds it on rmsnorm or rmsnorm_offset.
Expected<void> bind_rmsnorm_residual(const KernelSite& site) {
  Builder& b = site.b;
  const auto* n = site.node("rmsnorm");
  const auto* res = site.node("residual");
  if (!n || !res) return site.where("expects rmsnorm and residual");
  if (!res->role.empty())
    return site.where("residual:" + res->role + " on '" + site.kname + "', whose body adds to the residual stream");
  if (n->role != "post_attn_norm" && n->role != "post_mlp_norm" && n->role != "post_per_layer_norm")
    return site.where(n->role + " on '" + site.kname + "', which normalises the layer's y (a post norm)");
  if (b.partial != MET_NO_TENSOR) return site.where("'" + site.kname + "' after a row-parallel projection's partial sums");
  const std::int64_t dim = param(*n, "dim") * std::max<std::int64_t>(1, param(*n, "count"));
  if (dim != site.hidden)
    return site.where("post norm over " + std::to_string(dim) + " columns, not the hidden " + std::to_string(site.hidden));
  std::uint32_t w = MET_NO_TENSOR, sc = MET_NO_TENSOR;
  if (param(*n, "weighted") != 0) {
    MET_TRY(w, site.weight(n));
  }
  if (const auto* s = site.node("scale")) {
    if (param(*s, "weighted") == 0) return site.where("scale:" + s->role + " on '" + site.kname + "' without a weight");
    MET_TRY(sc, site.weight(s));
  }
  MET_TRY(const auto nk, norm_kind_of(site, *n));
  MET_CHECK(site.add({site.x, b.act("y", site.R, dim), w, sc}, {site.R, dim, nk.once, nk.offset}, {nk.eps}));
  return {};
}

Expected<FusedNormKind> norm_kind_of(const KernelSite& site, const model::Node& n) {
  const double offset = n.params.count("offset") ? n.params.at("offset") : 0.0;
  // The bodies take the offset as a float from a whole-number int: exact up to 2^24.
  if (offset != std::floor(offset) || std::fabs(offset) > static_cast<double>(1 << std::numeric_limits<float>::digits))
    return site.where(n.role + " offset " + std::to_string(offset) + " on '" + site.kname +
                      "', whose body takes a whole number a float holds exactly");
  const double node_eps = n.params.count("eps") ? n.params.at("eps") : 0.0;
  return FusedNormKind{node_eps > 0 ? static_cast<float>(node_eps) : site.b.cfg.eps,
                       offset != 0 || param(n, "round_once") != 0 ? 1 : 0, static_cast<std::int64_t>(offset)};
}

Expected<FusedNormKind> fused_norm_kind(const KernelSite& site, const std::vector<const model::Node*>& norms) {
  FusedNormKind k;
  for (std::size_t i = 0; i < norms.size(); ++i) {
    const model::Node& n = *norms[i];
    if (param(n, "weighted") == 0) return site.where("a weightless " + n.role + " on '" + site.kname + "', whose body reads a weight");
    MET_TRY(const auto nk, norm_kind_of(site, n));
    if (i == 0) {
      k = nk;
    } else if (nk.once != k.once || nk.offset != k.offset || nk.eps != k.eps) {
      return site.where(n.role + " on '" + site.kname + "' is another kind of norm than " + norms[0]->role +
                        " (one eps, offset and rounding per instruction)");
    }
  }
  return k;
}

// x += y; per_layer_sum: the per-layer inputs' projection plus their token part (ple_in += ple);
// moe_sum: Gemma-4's dense branch plus its experts' (y += moe.y).
Expected<void> bind_residual_add(const KernelSite& site) {
  const auto* n = site.node("residual");
  if (n && n->role == "moe_sum") {
    const std::int64_t dim = param(*n, "dim");
    if (dim != site.hidden)
      return site.where("moe_sum over " + std::to_string(dim) + " columns, not the hidden " + std::to_string(site.hidden));
    MET_CHECK(site.add({site.b.act("y", site.R, dim), site.b.act(kMoeY, site.R, dim)}, {site.R, dim}, {}));
    return {};
  }
  if (n && n->role == "per_layer_sum") {
    const std::int64_t dim = param(*n, "dim");
    MET_CHECK(site.add({site.b.act("ple_in", site.R, dim), site.b.act("ple", site.R, dim)}, {site.R, dim}, {}));
    return {};
  }
  Builder& b = site.b;
  if (b.partial != MET_NO_TENSOR) {  // tensor parallelism: every rank's partial sums, then the add
    const std::uint32_t part = std::exchange(b.partial, MET_NO_TENSOR);
    return b.add("allreduce_residual", site.c.group_index, site.c.label, {site.x, part},
                 {site.R, site.hidden, b.sh->tp, /*col_slices=*/1, /*accumulate=*/1}, {});
  }
  MET_CHECK(site.add({site.x, b.act("y", site.R, site.hidden)}, {site.R, site.hidden}, {}));
  return {};
}

// silu_mul and gelu_mul: gu [rows, 2 * dim] -> h [rows, dim].
Expected<void> bind_gated_act(const KernelSite& site) {
  Builder& b = site.b;
  const std::int64_t R = site.R;
  const auto* n = site.node(site.k);
  const std::int64_t dim = param(*n, "dim");
  MET_CHECK(site.add({b.act("gu", R, 2 * dim), b.act("h", R, dim)}, {R, dim}, {}));
  return {};
}

Expected<void> bind_argmax(const KernelSite& site) {
  Builder& b = site.b;
  const std::int64_t R = site.R;
  const auto* n = site.node("argmax");
  const std::int64_t vocab = param(*n, "vocab");
  MET_CHECK(site.add({b.io(IoField::logits, R, vocab), b.io(IoField::out_tokens, R)}, {R, 0, vocab}, {}));
  return {};
}

// x *= factor in place over the residual stream (Gemma's embedding scale). The factor is applied
// in the activations' dtype, as transformers multiplies by the normalizer cast to the weights' bf16.
// scale_tensor: the factor is the node's one-element weight (Gemma-4's layer_scalar).
Expected<void> bind_scale(const KernelSite& site) {
  const auto* n = site.node("scale");
  if (n->role == "router_scale") return site.where("router_scale on '" + site.kname + "': it binds only inside its router's kernel");
  if (site.k == "scale_tensor") {
    if (param(*n, "weighted") == 0) return site.where("scale_tensor on a scale node without a weight");
    MET_TRY(auto s, site.weight(n));
    const std::int64_t dim = param(*n, "dim");
    if (dim != site.hidden)
      return site.where("scale over " + std::to_string(dim) + " columns, not the residual stream's " +
                        std::to_string(site.hidden));
    MET_CHECK(site.add({site.x, s}, {site.R, dim}, {}));
    return {};
  }
  const double factor = n->params.count("factor") ? n->params.at("factor") : 0.0;
  if (!(factor > 0.0)) return site.where("scale node" + (n->role.empty() ? "" : " '" + n->role + "'") + " has no factor");
  const std::int64_t dim = param(*n, "dim");
  const float f = param(*n, "exact") != 0 ? static_cast<float>(factor) : cpu::round_bf16(static_cast<float>(factor));
  if (const char* ple = per_layer_buffer(n->role)) {
    MET_CHECK(site.add({site.b.act(ple, site.R, dim)}, {site.R, dim}, {f}));
    return {};
  }
  if (dim != site.hidden) return site.where("scale over " + std::to_string(dim) + " columns, not the residual stream's " +
                                            std::to_string(site.hidden));
  MET_CHECK(site.add({site.x}, {site.R, dim}, {f}));
  return {};
}

Expected<float> softcap_of(const KernelSite& site) {
  const auto* n = site.node("softcap");
  const double cap = n && n->params.count("cap") ? n->params.at("cap") : 0.0;
  if (!(cap > 0)) return site.where("softcap node without a positive cap");
  return static_cast<float>(cap);
}

// softcap over the logits: bound in the head only (the one place a plan runs it apart).
Expected<void> bind_softcap(const KernelSite& site) {
  if (!site.c.head) return site.where("kernel '" + site.kname + "' has no emitter yet");
  MET_TRY(const float cap, softcap_of(site));
  const std::int64_t vocab = static_cast<std::int64_t>(site.graph.params.at("vocab"));
  MET_CHECK(site.add({site.b.io(IoField::logits, site.R, vocab)}, {site.R, vocab}, {cap}));
  return {};
}

}  // namespace met::emit::detail
