// Binding the mixture-of-experts ops: the router (xn -> the routed experts' ids and weights, one
// [rows, top_k] pair of buffers; Gemma-4's scaled router reads the residual x itself), the
// experts' gate/up with SiLU or GELU (xn -> moe.h, [rows, top_k * inter]) and their down
// projection with the weighted sum (moe.h -> y); the residual add after it is the dense MLP's.
// Gemma-4's experts run beside its dense MLP on buffers of their own (bind.hpp: kMoeXn, kMoeY).
// Each expert node's weight is every expert's tensors stacked (model/experts.hpp).
// The grouped down projection (moe_down_mma) also takes moe.acc, [rows, hidden] fp32: each row's
// sums of its weighted copies while the body walks the experts. The grouped wgmma experts add
// moe_group before gate_up and moe_combine after down (bind_moe_gate_up).
#include "emit/bind.hpp"
#include "kernels/common/interp/smem.h"
#include "kernels/cpu/bf16.hpp"

namespace met::emit::detail {
namespace {

constexpr const char* kIds = "moe.ids";
constexpr const char* kWeights = "moe.weights";
constexpr const char* kH = "moe.h";
constexpr const char* kAcc = "moe.acc";

struct Routing {
  std::uint32_t ids = 0, weights = 0;
};
Routing routing(const KernelSite& site, std::int64_t top_k) {
  const auto shape = std::vector<std::uint64_t>{static_cast<std::uint64_t>(site.R), static_cast<std::uint64_t>(top_k)};
  return {site.b.buffer(kIds, MET_DTYPE_I32, shape), site.b.buffer(kWeights, MET_DTYPE_F32, shape)};
}

// A router's logits [rows, experts] fp32: the workspace of its column parts (ops.def), where the
// slicing splits its experts over the streams (a GPU's decode rows, src/emit/slice.cpp).
std::uint32_t router_logits(const KernelSite& site, std::int64_t experts) {
  return site.b.buffer("moe.router_logits", MET_DTYPE_F32,
                       {static_cast<std::uint64_t>(site.R), static_cast<std::uint64_t>(experts)});
}

Expected<void> check_top_k(const KernelSite& site, std::int64_t top_k, std::int64_t experts) {
  if (top_k < 1 || top_k > experts)
    return site.where("top_k " + std::to_string(top_k) + " is not between 1 and the " + std::to_string(experts) + " experts");
  return {};
}

// The experts' input: moe.xn beside a dense MLP (bind.hpp), else xn.
std::uint32_t expert_input(const KernelSite& site, std::int64_t hidden) {
  return site.b.act(beside_dense_mlp(site) ? kMoeXn : "xn", site.R, hidden);
}

}  // namespace

bool beside_dense_mlp(const KernelSite& site) {
  for (const auto& n : site.c.scope->nodes)
    if (n.op == "rmsnorm" && n.role == "moe_norm") return true;
  return false;
}

Expected<void> bind_moe_router(const KernelSite& site) {
  const auto* n = site.node("moe_router");
  if (!n) return site.where("expects moe_router");
  MET_TRY(auto w, site.weight(n));
  const std::int64_t top_k = param(*n, "top_k");
  MET_CHECK(check_top_k(site, top_k, param(*n, "experts")));
  const Routing r = routing(site, top_k);
  const std::uint32_t logits = router_logits(site, param(*n, "experts"));
  MET_CHECK(site.add({site.b.act("xn", site.R, param(*n, "hidden")), w, r.ids, r.weights, logits},
                     {site.R, top_k, param(*n, "renormalize") != 0 ? 1 : 0, /*col_slices=*/1}, {}));
  return {};
}

// The grouped wgmma experts (ops.def moe_group): the step's slots sorted by expert, their activation
// rows (moe.xs, [rows, top_k * hidden]: a place a row), each slot's place (moe.pos) and the tiles
// (moe.tiles); gate_up writes moe.h at the places and down each place's projection to moe.ys, which
// moe_combine sums back into the rows.
constexpr const char* kXs = "moe.xs";
constexpr const char* kPos = "moe.pos";
constexpr const char* kTiles = "moe.tiles";
constexpr const char* kYs = "moe.ys";

bool grouped_experts(const KernelSite& site) { return site.k == "moe_gate_up_silu_wgmma" || site.k == "moe_down_wgmma"; }

std::uint32_t group_tiles(const KernelSite& site, std::int64_t top_k, std::int64_t experts) {
  const auto max_tiles = static_cast<std::uint64_t>(MET_MOE_WGMMA_MAX_TILES(site.R * top_k, experts));
  return site.b.buffer(kTiles, MET_DTYPE_I32, {1 + max_tiles, 4});
}
std::uint32_t group_pos(const KernelSite& site, std::int64_t top_k) {
  return site.b.buffer(kPos, MET_DTYPE_I32, {static_cast<std::uint64_t>(site.R), static_cast<std::uint64_t>(top_k)});
}

Expected<void> bind_moe_gate_up(const KernelSite& site) {
  const auto* n = site.node("moe_gate_up");
  if (!n) return site.where("expects moe_gate_up");
  MET_TRY(auto w, site.weight(n));
  const std::int64_t top_k = param(*n, "top_k"), inter = param(*n, "inter"), hidden = param(*n, "hidden");
  const Routing r = routing(site, top_k);
  const std::uint32_t x = expert_input(site, hidden), h = site.b.act(kH, site.R, top_k * inter);
  if (!grouped_experts(site)) return site.add({x, w, r.ids, h}, {site.R, top_k, inter, /*col_slices=*/1}, {});
  const std::int64_t experts = param(*n, "experts");
  MET_CHECK(check_top_k(site, top_k, experts));
  const std::uint32_t xs = site.b.act(kXs, site.R, top_k * hidden), tiles = group_tiles(site, top_k, experts);
  MET_CHECK(site.b.add("moe_group", site.c.group_index, site.c.label, {x, r.ids, xs, group_pos(site, top_k), tiles},
                       {site.R, top_k, experts, hidden}, {}));
  return site.add({xs, w, h, MET_NO_TENSOR, tiles}, {site.R, /*in_row0=*/0, /*col_slices=*/1, /*k_splits=*/1, top_k, inter, experts}, {});
}

Expected<void> bind_moe_down(const KernelSite& site) {
  const auto* n = site.node("moe_down");
  if (!n) return site.where("expects moe_down");
  MET_TRY(auto w, site.weight(n));
  const std::int64_t top_k = param(*n, "top_k"), inter = param(*n, "inter");
  const Routing r = routing(site, top_k);
  std::vector<std::uint32_t> tensors = {site.b.act(kH, site.R, top_k * inter), w, r.ids, r.weights};
  Builder& b = site.b;
  if (grouped_experts(site)) {
    // The grouped down projection, then the weighted sums (under tensor parallelism this rank's
    // unrounded sums, moe_combine_f32, for the all-reduce as moe_down_f32 leaves them).
    const std::int64_t experts = param(*n, "experts");
    if (!b.bufs.count(kTiles))
      return site.where("'" + site.k + "' reads the places moe_group sorts the slots to, and no moe_gate_up_silu_wgmma came before it");
    const std::uint32_t ys = b.act(kYs, site.R, top_k * site.hidden), tiles = group_tiles(site, top_k, experts);
    MET_CHECK(site.add({tensors[0], w, ys, MET_NO_TENSOR, tiles},
                       {site.R, /*in_row0=*/0, /*col_slices=*/1, /*k_splits=*/1, top_k, site.hidden, experts}, {}));
    std::vector<std::uint32_t> sum = {ys, group_pos(site, top_k), r.ids, r.weights};
    if (b.sh->tp > 1) {
      const auto partial = b.buffer("y.partial", MET_DTYPE_F32,
                                    {static_cast<std::uint64_t>(site.R), static_cast<std::uint64_t>(site.hidden)});
      sum.push_back(partial);
      MET_CHECK(b.add("moe_combine_f32", site.c.group_index, site.c.label, std::move(sum), {site.R, top_k, site.hidden, 1}, {}));
      if (!beside_dense_mlp(site)) {
        b.partial = partial;
        return {};
      }
      return b.add("allreduce_residual", site.c.group_index, site.c.label, {b.act(kMoeY, site.R, site.hidden), partial},
                   {site.R, site.hidden, b.sh->tp, /*col_slices=*/1, /*accumulate=*/0}, {});
    }
    sum.push_back(b.act(beside_dense_mlp(site) ? kMoeY : "y", site.R, site.hidden));
    return b.add("moe_combine", site.c.group_index, site.c.label, std::move(sum), {site.R, top_k, site.hidden, 1}, {});
  }
  if (b.sh->tp > 1) {
    // Tensor parallelism: this rank's slice of every expert's intermediate size, summed in fp32
    // for the residual's all-reduce (bind_residual_add); beside a dense MLP (Gemma-4), all-reduced
    // at once into the experts' output, rounded once, for their post norm to read whole.
    if (site.k != "moe_down" && site.k != "moe_down_mma")
      return site.where("'" + site.k + "' has no tensor-parallel form (moe_down_f32 is moe_down's, moe_down_mma_f32 moe_down_mma's)");
    const auto partial = b.buffer("y.partial", MET_DTYPE_F32,
                                  {static_cast<std::uint64_t>(site.R), static_cast<std::uint64_t>(site.hidden)});
    tensors.push_back(partial);
    MET_CHECK(b.add(site.k == "moe_down" ? "moe_down_f32" : "moe_down_mma_f32", site.c.group_index, site.c.label, std::move(tensors),
                    {site.R, top_k, site.hidden, /*col_slices=*/1}, {}));
    if (!beside_dense_mlp(site)) {
      b.partial = partial;
      return {};
    }
    return b.add("allreduce_residual", site.c.group_index, site.c.label, {b.act(kMoeY, site.R, site.hidden), partial},
                 {site.R, site.hidden, b.sh->tp, /*col_slices=*/1, /*accumulate=*/0}, {});
  }
  if (tensor_index(site.op, "acc") >= 0)
    tensors.push_back(site.b.buffer(
        kAcc, MET_DTYPE_F32, std::vector<std::uint64_t>{static_cast<std::uint64_t>(site.R), static_cast<std::uint64_t>(site.hidden)}));
  tensors.push_back(site.b.act(beside_dense_mlp(site) ? kMoeY : "y", site.R, site.hidden));
  MET_CHECK(site.add(std::move(tensors), {site.R, top_k, site.hidden, /*col_slices=*/1}, {}));
  return {};
}

// Gemma-4's router (moe_router scoring 3) with the nodes that are its parts: router_norm's weight
// (router.scale) and eps, router_scale's factor (hidden^-1/2; an fp32 number when exact, as
// bind_scale applies it) and expert_scale's per-expert vector. It reads the residual stream x.
Expected<void> bind_moe_router_scaled(const KernelSite& site) {
  const auto* norm = site.node("rmsnorm", "router_norm");
  const auto* sc = site.node("scale", "router_scale");
  const auto* n = site.node("moe_router");
  const auto* es = site.node("expert_scale");
  if (!norm || !sc || !n || !es) return site.where("expects rmsnorm:router_norm, scale:router_scale, moe_router and expert_scale");
  const std::int64_t top_k = param(*n, "top_k"), experts = param(*n, "experts"), hidden = param(*n, "hidden");
  MET_CHECK(check_top_k(site, top_k, experts));
  if (hidden != site.hidden || param(*norm, "dim") != hidden || param(*sc, "dim") != hidden)
    return site.where("the router's norm, scale and projection read " + std::to_string(param(*norm, "dim")) + ", " +
                      std::to_string(param(*sc, "dim")) + " and " + std::to_string(hidden) + " columns, not the residual stream's " +
                      std::to_string(site.hidden));
  if (param(*es, "experts") != experts)
    return site.where("expert_scale over " + std::to_string(param(*es, "experts")) + " experts, the router's " +
                      std::to_string(experts));
  if (param(*norm, "weighted") == 0 || param(*norm, "round_once") != 0)
    return site.where("router_norm is a weighted norm rounded before its weight (Gemma4TextRouter's norm, then its scale)");
  const double factor = sc->params.count("factor") ? sc->params.at("factor") : 0.0;
  if (!(factor > 0.0)) return site.where("router_scale has no factor");
  const float root = param(*sc, "exact") != 0 ? static_cast<float>(factor) : cpu::round_bf16(static_cast<float>(factor));
  const double node_eps = norm->params.count("eps") ? norm->params.at("eps") : 0.0;
  const float eps = node_eps > 0 ? static_cast<float>(node_eps) : site.b.cfg.eps;
  MET_TRY(auto w, site.weight(n));
  MET_TRY(auto scale, site.weight(norm));
  MET_TRY(auto per_expert, site.weight(es));
  const Routing r = routing(site, top_k);
  MET_CHECK(site.add({site.x, w, scale, per_expert, r.ids, r.weights, router_logits(site, experts)},
                     {site.R, top_k, /*col_slices=*/1}, {eps, root}));
  return {};
}

// gpt-oss: the router with its bias, and the experts of one tensor over every expert with their
// biases (the bias nodes the rule's pattern names), the clamped SwiGLU's limit and alpha.
Expected<void> bind_moe_router_bias(const KernelSite& site) {
  const auto* n = site.node("moe_router");
  const auto* bn = site.node("bias", "router");
  if (!n || !bn) return site.where("expects moe_router and bias:router");
  MET_TRY(auto w, site.weight(n));
  MET_TRY(auto bias, site.weight(bn));
  const std::int64_t top_k = param(*n, "top_k");
  MET_CHECK(check_top_k(site, top_k, param(*n, "experts")));
  const Routing r = routing(site, top_k);
  const std::uint32_t logits = router_logits(site, param(*n, "experts"));
  MET_CHECK(site.add({site.b.act("xn", site.R, param(*n, "hidden")), w, bias, r.ids, r.weights, logits},
                     {site.R, top_k, /*col_slices=*/1}, {}));
  return {};
}

Expected<void> bind_moe_gate_up_swiglu(const KernelSite& site) {
  const auto* n = site.node("moe_gate_up");
  const auto* bn = site.node("bias", "gate_up");
  const auto* act = site.node("swiglu_clamp");
  if (!n || !bn || !act) return site.where("expects moe_gate_up, bias:gate_up and swiglu_clamp");
  MET_TRY(auto w, site.weight(n));
  MET_TRY(auto bias, site.weight(bn));
  const std::int64_t top_k = param(*n, "top_k"), inter = param(*n, "inter"), hidden = param(*n, "hidden");
  const Routing r = routing(site, top_k);
  MET_CHECK(site.add({site.b.act("xn", site.R, hidden), w, bias, r.ids, site.b.act(kH, site.R, top_k * inter)},
                     {site.R, top_k, inter, /*col_slices=*/1, hidden, param(*n, "experts")},
                     {static_cast<float>(param_f(*act, "limit")), static_cast<float>(param_f(*act, "alpha"))}));
  return {};
}

Expected<void> bind_moe_down_bias(const KernelSite& site) {
  const auto* n = site.node("moe_down");
  const auto* bn = site.node("bias", "down");
  if (!n || !bn) return site.where("expects moe_down and bias:down");
  MET_TRY(auto w, site.weight(n));
  const std::int64_t top_k = param(*n, "top_k"), inter = param(*n, "inter");
  const Routing r = routing(site, top_k);
  Builder& b = site.b;
  const std::vector<std::int64_t> ints{site.R, top_k, site.hidden, /*col_slices=*/1, inter, param(*n, "experts")};
  if (b.sh->tp > 1) {
    // Tensor parallelism: this rank's slice of every expert's intermediate size, fp32 partial sums
    // for the residual's all-reduce (bind_residual_add); the bias weighted and added once, by the
    // first rank (absent on the others).
    std::uint32_t bias = MET_NO_TENSOR;
    if (b.sh->rank == 0) {
      MET_TRY(bias, site.weight(bn));
    }
    const auto partial = b.buffer("y.partial", MET_DTYPE_F32,
                                  {static_cast<std::uint64_t>(site.R), static_cast<std::uint64_t>(site.hidden)});
    MET_CHECK(b.add("moe_down_bias_f32", site.c.group_index, site.c.label, {b.act(kH, site.R, top_k * inter), w, bias, r.ids, r.weights,
                    partial}, ints, {}));
    b.partial = partial;
    return {};
  }
  MET_TRY(auto bias, site.weight(bn));
  MET_CHECK(site.add({b.act(kH, site.R, top_k * inter), w, bias, r.ids, r.weights, b.act("y", site.R, site.hidden)}, ints, {}));
  return {};
}

}  // namespace met::emit::detail
