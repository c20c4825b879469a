#include "estimate/cost.hpp"

#include "model/tp_rules.hpp"

#include <algorithm>
#include <cmath>

namespace met::estimate {
namespace {

constexpr double kStateBytes = 4.0;       // recurrent SSM / delta-rule state is kept in fp32
constexpr std::int64_t kFlashQTile = 128; // query rows per flash-attention tile
constexpr double kLogitBytes = 4.0;       // logits are reduced in fp32

double p(const model::Node& n, const char* key, double fallback = 0.0) {
  auto it = n.params.find(key);
  return it == n.params.end() ? fallback : it->second;
}

// Heads of a tensor-parallel shard: split when there are at least tp of them, else replicated.
double shard(double heads, int tp) { return heads >= tp ? heads / tp : heads; }

// Distinct experts R independently routed tokens touch, k of E each: E (1 - (1 - k/E)^R).
double experts_touched(double experts, double top_k, double rows) {
  if (experts <= 0) return 0;
  return experts * (1.0 - std::pow(1.0 - top_k / experts, rows));
}

}  // namespace

std::int64_t moe_row_parts(std::int64_t rows, std::int64_t cols, std::int64_t unit_cols, std::int64_t units) {
  if (rows <= 0 || cols <= 0 || unit_cols <= 0 || units <= 0) return 1;
  const std::int64_t tiles = (cols + unit_cols - 1) / unit_cols;
  return std::clamp<std::int64_t>((units + tiles - 1) / tiles, 1, std::max<std::int64_t>(1, rows / kMoeRowsPerPart));
}

namespace {

// E[ceil(n / block)] for n ~ Binomial(r, q), summed over the mass within 12 standard deviations.
double expected_blocks(double r, double q, std::int64_t block) {
  const double bm = static_cast<double>(block);
  if (r <= 0 || q <= 0) return 0;
  if (q >= 1) return std::ceil(r / bm);
  const double mean = r * q, sd = std::sqrt(r * q * (1 - q));
  const double lo = std::max(0.0, std::floor(mean - 12 * sd - 1)), hi = std::min(r, std::ceil(mean + 12 * sd + 1));
  const double lq = std::log(q), lnq = std::log1p(-q), lr = std::lgamma(r + 1);
  double e = 0;
  for (double n = lo; n <= hi; n += 1)
    e += std::exp(lr - std::lgamma(n + 1) - std::lgamma(r - n + 1) + n * lq + (r - n) * lnq) * std::ceil(n / bm);
  return e;
}

}  // namespace

double moe_blocks(double experts, double top_k, double rows, std::int64_t row_parts, std::int64_t block_rows) {
  if (experts <= 0 || rows <= 0 || row_parts <= 0 || block_rows <= 0) return 0;
  const double q = std::min(1.0, top_k / experts);
  // Parts of about rows / row_parts tokens (the last takes the rest).
  const double r = std::floor(rows / static_cast<double>(row_parts)), rest = rows - r * static_cast<double>(row_parts - 1);
  return experts * (expected_blocks(r, q, block_rows) * static_cast<double>(row_parts - 1) + expected_blocks(rest, q, block_rows));
}

double rank_kv_heads(double kv_heads, int tp) { return kv_heads >= tp ? kv_heads / tp : std::min(kv_heads, 1.0); }

double qkv_rank_share(const std::vector<model::Node>& layer, const model::Node& qkv, int tp) {
  const double even = 1.0 / tp;
  const model::Node* at = nullptr;
  for (const auto& n : layer)
    if (n.op == "attention") at = &n;
  if (!at || tp <= 1) return even;
  const double kvh = p(*at, "kv_heads"), q = p(*at, "heads") * p(*at, "head_dim");
  const double out = qkv.op == "bias" ? p(qkv, "dim") : p(qkv, "out");  // gpt-oss's q/k/v bias splits as the rows
  const double kv = out - q;
  if (kvh >= tp || !(kv > 0) || !(out > 0)) return even;
  return (q / tp + kv / kvh * rank_kv_heads(kvh, tp)) / out;
}

PrefillAttention prefill_attention(std::int64_t prior, std::int64_t rows, std::int64_t window) {
  PrefillAttention out;
  auto visible = [&](std::int64_t pos) -> double {
    const std::int64_t v = pos + 1;
    return static_cast<double>(window > 0 ? std::min(v, window) : v);
  };
  // Sum of visible tokens over positions prior .. prior+rows-1, in closed form per regime.
  for (std::int64_t t0 = 0; t0 < rows; t0 += kFlashQTile) {
    const std::int64_t t1 = std::min(rows, t0 + kFlashQTile);
    const std::int64_t first = prior + t0;
    const std::int64_t last = prior + t1 - 1;
    const std::int64_t lo = window > 0 ? std::max<std::int64_t>(0, first - window + 1) : 0;
    out.kv_tokens_streamed += static_cast<double>(last - lo + 1);
    for (std::int64_t pos = first; pos <= last; ++pos) out.visible_sum += visible(pos);
  }
  return out;
}

NodeCost node_cost(const model::Node& n, const StepShape& s) {
  NodeCost c;
  const double R = static_cast<double>(s.rows);
  const double S = static_cast<double>(s.seqs);
  const double a = format_bytes(s.act);
  const double kvb = format_bytes(s.kv);
  const double wb = n.weight_format ? format_bytes(*n.weight_format) : a;
  const int tp = s.tp;
  const std::string& op = n.op;
  // A node the split rules keep whole on every rank (Gemma-4's per-layer inputs) costs its whole
  // width at any TP (model/tp_rules.hpp, the table the emit splits by).
  const model::TpRule* rule = tp > 1 ? model::tp_rule(n) : nullptr;
  const bool whole = rule && (*rule == model::TpRule::replicate || *rule == model::TpRule::once);

  if (op == "embed") {
    const double dim = p(n, "dim");
    c.weight_bytes = R * dim * wb;  // a gather reads one row per token
    c.out_bytes = R * dim * a;
  } else if (op == "rmsnorm") {
    const double width = p(n, "dim") * p(n, "count", 1);
    c.weight_bytes = p(n, "weighted", 1) != 0 ? p(n, "dim") * a : 0;  // Gemma-4's v_norm has none
    c.in_bytes = R * width * a;
    c.out_bytes = R * width * a;
    c.flops = 4 * R * width;
  } else if (op == "linear") {
    const double in = p(n, "in"), out = p(n, "out");
    const double share = whole ? 1.0 : n.role == "qkv" && s.qkv_share > 0 ? s.qkv_share : 1.0 / tp;
    c.weight_bytes = in * out * wb * share;
    c.in_bytes = R * in * a;
    c.out_bytes = R * out * a * share;
    c.flops = 2 * R * in * out * share;
  } else if (op == "rope") {
    const double heads = shard(p(n, "heads"), tp) + rank_kv_heads(p(n, "kv_heads"), tp);
    const double hd = p(n, "head_dim");
    c.in_bytes = R * heads * hd * a;
    c.out_bytes = R * heads * hd * a;
    c.flops = 3 * R * heads * p(n, "rotary_dim", hd);
  } else if (op == "kv_append") {
    const double width = rank_kv_heads(p(n, "kv_heads"), tp) * (p(n, "head_dim") + p(n, "v_head_dim", p(n, "head_dim")));
    c.in_bytes = R * width * a;
    c.kv_write = R * width * kvb;
  } else if (op == "kv_append_mla") {
    const double width = p(n, "kv_lora") + p(n, "rope_dim");
    c.in_bytes = R * width * a;
    c.kv_write = R * width * kvb;
  } else if (op == "attention" || op == "attention_mla") {
    const bool mla = op == "attention_mla";
    const double heads = shard(p(n, "heads"), tp);
    double kv_width, qk, vd;
    if (mla) {
      kv_width = p(n, "kv_lora") + p(n, "rope_dim");  // one latent row per token, shared by all heads
      qk = kv_width;
      vd = p(n, "kv_lora");
    } else {
      const double kvh = rank_kv_heads(p(n, "kv_heads"), tp);
      qk = p(n, "head_dim");
      vd = p(n, "v_head_dim", qk);
      kv_width = kvh * (qk + vd);
    }
    const auto window = static_cast<std::int64_t>(p(n, "window"));
    c.in_bytes = R * heads * qk * a;
    c.out_bytes = R * heads * vd * a;
    if (s.prefill) {
      const auto pa = prefill_attention(s.prior, s.rows, window);
      c.kv_read = pa.kv_tokens_streamed * kv_width * kvb;
      c.flops = 2 * heads * (qk + vd) * pa.visible_sum;
    } else {
      const double visible = static_cast<double>(window > 0 ? std::min(s.context, window) : s.context);
      c.kv_read = S * visible * kv_width * kvb;
      c.flops = 2 * R * heads * visible * (qk + vd);
    }
  } else if (op == "residual") {
    const double dim = p(n, "dim");
    c.in_bytes = 2 * R * dim * a;
    c.out_bytes = R * dim * a;
    c.flops = R * dim;
  } else if (op == "silu_mul" || op == "gelu_mul" || op == "gelu_mul_split" || op == "swiglu_clamp") {
    const double dim = p(n, "dim") / (whole ? 1 : tp);
    c.in_bytes = 2 * R * dim * a;
    c.out_bytes = R * dim * a;
    c.flops = 8 * R * dim;
  } else if (op == "bias") {
    // A projection's bias (gpt-oss): read once per step, added to the output; a bias per expert is
    // charged whole (at most experts x dim values, small beside the experts' weights). Under TP it
    // splits with its projection (q/k/v's as the qkv share, gate/up's by the ranks), or is added
    // whole once (o's and down's, by the first rank).
    const double share = whole ? 1.0 : n.role == "qkv" && s.qkv_share > 0 ? s.qkv_share : 1.0 / tp;
    const double dim = p(n, "dim") * share;
    c.weight_bytes = dim * std::max(1.0, p(n, "experts")) * wb;
    c.in_bytes = R * dim * a;
    c.out_bytes = R * dim * a;
    c.flops = R * dim;
  } else if (op == "expert_scale") {
    // Gemma-4's per-expert scale of the routing weights: the vector read once, one product per
    // routed slot.
    const double experts = p(n, "experts");
    c.weight_bytes = experts * wb;
    c.in_bytes = R * experts * kLogitBytes;
    c.out_bytes = R * experts * kLogitBytes;
    c.flops = R * experts;
  } else if (op == "relu2" || op == "scale" || op == "softcap") {
    const double dim = p(n, "dim");
    c.in_bytes = R * dim * a;
    c.out_bytes = R * dim * a;
    c.flops = (op == "softcap" ? 4 : 2) * R * dim;
    if (op == "scale" && p(n, "weighted") != 0) c.weight_bytes = wb;  // Gemma-4's one-element layer_scalar
  } else if (op == "argmax") {
    const double vocab = p(n, "vocab");
    c.in_bytes = R * vocab * kLogitBytes;
    c.out_bytes = R * 4;
    c.flops = R * vocab;
  } else if (op == "moe_router") {
    const double hidden = p(n, "hidden"), experts = p(n, "experts");
    c.weight_bytes = hidden * experts * wb;
    c.in_bytes = R * hidden * a;
    c.out_bytes = R * experts * kLogitBytes;
    c.flops = 2 * R * hidden * experts;
  } else if (op == "moe_gate_up" || op == "moe_down") {
    const double hidden = p(n, "hidden"), inter = p(n, "inter"), experts = p(n, "experts"), k = p(n, "top_k");
    const double per_expert = (op == "moe_gate_up" ? 2 : 1) * inter * hidden;
    c.weight_bytes = experts_touched(experts, k, R) * per_expert * wb / tp;
    c.flops = 2 * R * k * per_expert / tp;
    if (s.prefill && s.moe_block) {
      // The grouped body: per row part (one where the body sorts the step's slots first), each
      // expert's slots in blocks of bm rows, a partial block computed whole, so the tensor cores do blocks x bm rows of work for R x k routed slots.
      // (Each block also reads the expert's weights again; the blocks of one expert run close
      // together in time, so those repeats are counted as L2 hits, not memory traffic.)
      const auto [bm, bn] = *s.moe_block;
      const bool gate_up = op == "moe_gate_up";
      const double cols = gate_up ? inter / tp : hidden;  // output columns of one rank
      const std::int64_t parts = s.moe_sorted ? 1 : moe_row_parts(s.rows, static_cast<std::int64_t>(cols), gate_up ? bn / 2 : bn, s.units);
      c.flops = 2 * moe_blocks(experts, k, R, parts, bm) * static_cast<double>(bm) * per_expert / tp;
    }
    c.in_bytes = op == "moe_gate_up" ? R * hidden * a : R * k * inter * a;
    c.out_bytes = op == "moe_gate_up" ? R * k * 2 * inter * a : R * hidden * a;
  } else if (op == "conv1d") {
    const double ch = p(n, "channels") / tp, kernel = p(n, "kernel");
    c.weight_bytes = ch * kernel * a;
    c.state_bytes = 2 * S * ch * (kernel - 1) * a;
    c.in_bytes = R * ch * a;
    c.out_bytes = R * ch * a;
    c.flops = 2 * R * ch * kernel;
  } else if (op == "ssm_scan") {
    const double heads = shard(p(n, "heads"), tp), hd = p(n, "head_dim"), st = p(n, "state"), groups = p(n, "groups");
    c.weight_bytes = 3 * heads * a;
    c.state_bytes = 2 * S * heads * hd * st * kStateBytes;
    c.in_bytes = R * (heads * hd + 2 * groups * st + heads) * a;
    c.out_bytes = R * heads * hd * a;
    c.flops = 6 * R * heads * hd * st;
  } else if (op == "gated_delta") {
    const double vh = shard(p(n, "v_heads"), tp), kh = shard(p(n, "k_heads"), tp), kd = p(n, "k_dim"), vd = p(n, "v_dim");
    c.weight_bytes = 2 * vh * a;
    c.state_bytes = 2 * S * vh * kd * vd * kStateBytes;
    c.in_bytes = R * (2 * kh * kd + vh * vd + 2 * vh) * a;
    c.out_bytes = R * vh * vd * a;
    c.flops = 6 * R * vh * kd * vd;
  }
  return c;
}

GroupCost group_cost(const planner::Group& g, const planner::Scope& scope, const StepShape& s, const Basis& basis) {
  GroupCost out;
  double in_first = 0, out_last = 0, act_all = 0;
  bool first = true;
  for (int idx : g.nodes) {
    const model::Node& n = scope.nodes[static_cast<std::size_t>(idx)];
    StepShape ns = s;
    if ((n.op == "linear" || n.op == "bias") && n.role == "qkv") ns.qkv_share = qkv_rank_share(scope.nodes, n, s.tp);
    const NodeCost c = node_cost(n, ns);
    out.weight_bytes += c.weight_bytes;
    out.kv_bytes += c.kv_read + c.kv_write;
    out.other_bytes += c.state_bytes;
    out.flops += c.flops;
    act_all += c.in_bytes + c.out_bytes;
    if (first) in_first = c.in_bytes;
    first = false;
    if (c.out_bytes > 0) out_last = c.out_bytes;
  }
  // Fused: intermediates stay on chip. A gap's reference ops each round-trip memory.
  out.other_bytes += g.gap ? act_all : in_first + out_last;

  const double mem_s = out.bytes() / basis.bandwidth.value;
  double compute_s = 0;
  if (g.unit == "tensor_core") {
    out.peak_key = g.exec ? g.exec->math : "bf16";
  } else if (g.unit == "cuda_core") {
    out.peak_key = "fp32";
  }
  if (!out.peak_key.empty()) {
    const double peak = basis.peak(out.peak_key).value;
    compute_s = peak > 0 ? out.flops / peak : 0;
  }
  out.memory_seconds = mem_s;
  out.compute_seconds = compute_s;
  out.seconds = std::max(mem_s, compute_s);
  out.bound = compute_s > mem_s ? "compute" : "memory";
  return out;
}

}  // namespace met::estimate
