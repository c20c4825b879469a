// Binding the mixture-of-experts ops: the router (xn -> the routed experts' ids and weights, one
// [rows, top_k] pair of buffers), the experts' gate/up with SiLU (xn -> moe.h, [rows, top_k *
// inter]) and their down projection with the weighted sum (moe.h -> y); the residual add after it
// is the dense MLP's. Each expert node's weight is every expert's tensors stacked (model/experts.hpp).
// The grouped down projection (moe_down_mma) also takes moe.acc, [rows, hidden] fp32: each row's
// sums of its weighted copies while the body walks the experts.
#include "emit/bind.hpp"

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

}  // namespace

Expected<void> bind_moe_router(const KernelSite& site) {
  const auto* n = site.node("moe_router");
  if (!n) return site.where("expects moe_router");
  MET_TRY(auto w, site.weight(n));
  const std::int64_t top_k = param(*n, "top_k"), experts = param(*n, "experts");
  if (top_k < 1 || top_k > experts)
    return site.where("top_k " + std::to_string(top_k) + " is not between 1 and the " + std::to_string(experts) + " experts");
  const Routing r = routing(site, top_k);
  MET_CHECK(site.add({site.b.act("xn", site.R, param(*n, "hidden")), w, r.ids, r.weights},
                     {site.R, top_k, param(*n, "renormalize") != 0 ? 1 : 0}, {}));
  return {};
}

Expected<void> bind_moe_gate_up(const KernelSite& site) {
  const auto* n = site.node("moe_gate_up");
  if (!n) return site.where("expects moe_gate_up");
  MET_TRY(auto w, site.weight(n));
  const std::int64_t top_k = param(*n, "top_k"), inter = param(*n, "inter");
  const Routing r = routing(site, top_k);
  MET_CHECK(site.add({site.b.act("xn", site.R, param(*n, "hidden")), w, r.ids, site.b.act(kH, site.R, top_k * inter)},
                     {site.R, top_k, inter, /*col_slices=*/1}, {}));
  return {};
}

Expected<void> bind_moe_down(const KernelSite& site) {
  const auto* n = site.node("moe_down");
  if (!n) return site.where("expects moe_down");
  MET_TRY(auto w, site.weight(n));
  const std::int64_t top_k = param(*n, "top_k"), inter = param(*n, "inter");
  const Routing r = routing(site, top_k);
  std::vector<std::uint32_t> tensors = {site.b.act(kH, site.R, top_k * inter), w, r.ids, r.weights};
  if (tensor_index(site.op, "acc") >= 0)
    tensors.push_back(site.b.buffer(
        kAcc, MET_DTYPE_F32, std::vector<std::uint64_t>{static_cast<std::uint64_t>(site.R), static_cast<std::uint64_t>(site.hidden)}));
  tensors.push_back(site.b.act("y", site.R, site.hidden));
  MET_CHECK(site.add(std::move(tensors), {site.R, top_k, site.hidden, /*col_slices=*/1}, {}));
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
  const std::int64_t top_k = param(*n, "top_k"), experts = param(*n, "experts");
  if (top_k < 1 || top_k > experts)
    return site.where("top_k " + std::to_string(top_k) + " is not between 1 and the " + std::to_string(experts) + " experts");
  const Routing r = routing(site, top_k);
  MET_CHECK(site.add({site.b.act("xn", site.R, param(*n, "hidden")), w, bias, r.ids, r.weights}, {site.R, top_k}, {}));
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
  MET_TRY(auto bias, site.weight(bn));
  const std::int64_t top_k = param(*n, "top_k"), inter = param(*n, "inter");
  const Routing r = routing(site, top_k);
  MET_CHECK(site.add({site.b.act(kH, site.R, top_k * inter), w, bias, r.ids, r.weights, site.b.act("y", site.R, site.hidden)},
                     {site.R, top_k, site.hidden, /*col_slices=*/1, inter, param(*n, "experts")}, {}));
  return {};
}

}  // namespace met::emit::detail
