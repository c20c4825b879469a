// Binding the row-wise ops: the embedding gather, rmsnorm (of x into xn, or in place on the q and k
// columns of the qkv buffer), the residual add, the gated activations, argmax and the head's
// softcap over the logits.
#include <algorithm>

#include "emit/bind.hpp"
#include "kernels/cpu/bf16.hpp"

namespace met::emit::detail {

Expected<void> bind_embed(const KernelSite& site) {
  Builder& b = site.b;
  const std::int64_t R = site.R;
  const auto* n = site.node("embed");
  MET_TRY(auto w, site.weight(n));
  MET_CHECK(site.add({b.io(IoField::tokens, R), w, site.x}, {R, 0}, {}));
  return {};
}

Expected<void> bind_rmsnorm(const KernelSite& site) {
  Builder& b = site.b;
  const std::int64_t R = site.R;
  const auto* n = site.node("rmsnorm");
  MET_TRY(auto w, site.weight(n));
  const std::int64_t dim = param(*n, "dim"), count = std::max<std::int64_t>(1, param(*n, "count"));
  if (n->role == "q_norm" || n->role == "k_norm") {
    MET_TRY(const auto qkv, site.qkv("q/k norm before the qkv projection"));
    const std::int64_t col0 = n->role == "q_norm" ? 0 : b.q_width;
    MET_CHECK(site.add({qkv.handle, w, qkv.handle}, {R, 0, count, dim, qkv.stride, col0, qkv.stride, col0}, {b.cfg.eps}));
  } else {
    const auto y = b.act(site.pre + "xn", R, dim * count);
    MET_CHECK(site.add({site.x, w, y}, {R, site.x_row0, count, dim, site.hidden, 0, dim * count, 0}, {b.cfg.eps}));
  }
  return {};
}

Expected<void> bind_residual_add(const KernelSite& site) {
  MET_CHECK(site.add({site.x, site.b.act("y", site.R, site.hidden)}, {site.R, site.hidden}, {}));
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
Expected<void> bind_scale(const KernelSite& site) {
  const auto* n = site.node("scale");
  const double factor = n->params.count("factor") ? n->params.at("factor") : 0.0;
  if (!(factor > 0.0)) return site.where("scale node" + (n->role.empty() ? "" : " '" + n->role + "'") + " has no factor");
  const std::int64_t dim = param(*n, "dim");
  if (dim != site.hidden) return site.where("scale over " + std::to_string(dim) + " columns, not the residual stream's " +
                                            std::to_string(site.hidden));
  MET_CHECK(site.add({site.x}, {site.R, dim}, {cpu::round_bf16(static_cast<float>(factor))}));
  return {};
}

// softcap over the logits: bound in the head only (the one place a plan runs it apart).
Expected<void> bind_softcap(const KernelSite& site) {
  if (!site.c.head) return site.where("kernel '" + site.kname + "' has no emitter yet");
  const auto* n = site.node("softcap");
  const std::int64_t vocab = static_cast<std::int64_t>(site.graph.params.at("vocab"));
  MET_CHECK(site.add({site.b.io(IoField::logits, site.R, vocab)}, {site.R, vocab},
                     {static_cast<float>(n->params.count("cap") ? n->params.at("cap") : 0.0)}));
  return {};
}

}  // namespace met::emit::detail
