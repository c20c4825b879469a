// The split rules of tensor parallelism, one table by (op, role): what each node's parameters
// become on one rank and which dimension of its weight is cut. A node the table does not name is
// refused by name, never split wrong. A step between a row-parallel projection and its residual
// (Gemma's post norms) reads the all-reduced projection output, whole on every rank, so it is
// replicated (the projection's binder all-reduces into its output there). Experts split like the dense MLP:
// every rank routes every row (the router replicated) and holds its slice of each expert's
// intermediate size, gate/up by rows and down by columns, the down's weighted sums left in fp32
// for the all-reduce (into the residual, or, for Gemma-4's experts beside a dense MLP, into their
// own output, which a norm reads before the branches are added).
#include "emit/tensor_parallel.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <utility>
#include <vector>

#include "model/tp_rules.hpp"

namespace met::emit::detail {
namespace {

using Rule = model::TpRule;
const Rule* rule_of(const model::Node& n) { return model::tp_rule(n); }

void divide(model::Node& n, const char* key, int ranks) {
  if (auto it = n.params.find(key); it != n.params.end()) it->second /= ranks;
}

}  // namespace

int weight_split_dim(const model::Node& n) {
  const Rule* r = rule_of(n);
  if (!r) return -1;
  if (*r == Rule::column || *r == Rule::expert_column) return 0;
  if (*r == Rule::row || *r == Rule::expert_row) return 1;
  // An attention node's weight is its sinks (gpt-oss), one per query head.
  if (*r == Rule::heads && n.op == "attention" && !n.weights.empty()) return 0;
  return -1;
}

int kv_groups(const model::ModelGraph& g, int ranks) {
  auto it = g.params.find("kv_heads");
  if (it == g.params.end() || it->second >= ranks) return ranks;
  return static_cast<int>(it->second);
}

namespace {

// How one layer kind's KV heads split: the kind's attention node's KV heads (Gemma-4's full layers
// have their own count), and with fewer than ranks, one per rank shared by ranks / kv ranks.
struct KvSplit {
  double kv_heads = 0;  // unsplit
  int groups = 1;       // kv_groups of the kind
  double rank_kv = 0;   // a rank's KV heads
  double q_rows = 0;    // the kind's heads x head_dim (its qkv's q rows), unsplit
};

Expected<KvSplit> kv_split(double kv_heads, double q_rows, int ranks, const std::string& ctx, const std::string& key) {
  KvSplit k;
  k.kv_heads = kv_heads;
  k.q_rows = q_rows;
  k.groups = kv_heads >= ranks || kv_heads <= 0 ? ranks : static_cast<int>(kv_heads);
  if (kv_heads <= 0) return k;  // no KV heads to split
  if (k.groups == ranks && std::fmod(kv_heads, ranks) != 0)
    return fail(fmt::format("{}: {} = {} is not a multiple of {}: each rank takes an equal share of it", ctx, key, kv_heads, ranks));
  if (k.groups < ranks && std::fmod(ranks, kv_heads) != 0)
    return fail(fmt::format("{}: {} = {} is fewer than the {} ranks and does not divide them: a rank holds one KV head, "
                            "shared by an equal number of ranks",
                            ctx, key, kv_heads, ranks));
  k.rank_kv = k.groups < ranks ? 1 : kv_heads / ranks;
  return k;
}

}  // namespace

Expected<model::ModelGraph> rank_graph(const model::ModelGraph& g, int ranks, const std::string& display) {
  const std::string ctx = fmt::format("{}/config.json: --tp {}", display, ranks);
  // Fewer KV heads than ranks: each rank holds the one KV head its query heads read, shared by
  // ranks / kv_heads ranks (so ranks must be a multiple of the KV heads).
  auto param_or = [&](const char* p) { return g.params.count(p) ? g.params.at(p) : 0.0; };
  MET_TRY(const KvSplit whole, kv_split(param_or("kv_heads"), param_or("heads") * param_or("head_dim"), ranks, ctx,
                                        "num_key_value_heads"));
  // What a rank must hold whole: config.json key -> circuit parameter.
  const std::pair<const char*, const char*> counts[] = {{"num_attention_heads", "heads"},
                                                        {"intermediate_size", "inter"},
                                                        {"moe_intermediate_size", "moe_inter"},
                                                        {"vocab_size", "vocab"}};
  for (const auto& [key, param] : counts) {
    auto it = g.params.find(param);
    if (it == g.params.end()) continue;
    const double v = it->second;
    if (std::fmod(v, ranks) != 0)
      return fail(fmt::format("{}: {} = {} is not a multiple of {}: each rank takes an equal share of it", ctx, key, v, ranks));
  }
  model::ModelGraph r = g;
  for (const char* p : {"heads", "inter", "moe_inter"})
    if (auto it = r.params.find(p); it != r.params.end()) it->second /= ranks;
  if (auto it = r.params.find("kv_heads"); it != r.params.end()) it->second = whole.rank_kv;
  // Every node without a rule is named at once: what an architecture lacks, not its first gap.
  std::vector<std::string> missing;
  std::string bad;  // the first node whose numbers the split cannot divide
  auto split = [&](model::Node& n, const KvSplit& kv) {
    const Rule* rule = rule_of(n);
    if (!rule) {
      const std::string name = fmt::format("{}{} ({})", n.op, n.role.empty() ? "" : ":" + n.role, n.where);
      if (std::find(missing.begin(), missing.end(), name) == missing.end()) missing.push_back(name);
      return;
    }
    switch (*rule) {
      case Rule::replicate:
      case Rule::once: break;
      case Rule::heads:
        divide(n, "heads", ranks);
        // (A rope over q alone, in a layer that reads another layer's KV, keeps its 0 KV heads.)
        if (auto it = n.params.find("kv_heads"); it != n.params.end() && it->second > 0) it->second = kv.rank_kv;
        // A per-head norm's count: the KV heads' (k_norm, v_norm) become the rank's, the query heads' divide.
        if (auto it = n.params.find("count"); it != n.params.end())
          it->second = kv.groups < ranks && it->second == kv.kv_heads ? kv.rank_kv : it->second / ranks;
        break;
      case Rule::column:
        if ((n.op == "linear" || n.op == "bias") && n.role == "qkv") {
          // The rank's q heads, then its KV heads' k and v rows; the builder cuts the k and v parts
          // in the kind's KV slices (kv_groups). gpt-oss's q/k/v bias (its width in "dim") alike.
          const char* width = n.op == "bias" ? "dim" : "out";
          n.params["kv_groups"] = kv.groups;
          if (kv.groups < ranks) {
            auto out = n.params.find(width);
            const double kvr = out == n.params.end() ? 0 : out->second - kv.q_rows;
            if (!(kv.q_rows > 0) || !(kvr > 0) || std::fmod(kvr, kv.kv_heads) != 0) {
              if (bad.empty())
                bad = fmt::format("{}:qkv ({}) has {} outputs, not heads x head_dim = {} query rows and whole KV heads", n.op,
                                  n.where, out == n.params.end() ? 0 : out->second, kv.q_rows);
              break;
            }
            out->second = kv.q_rows / ranks + kvr / kv.kv_heads * kv.rank_kv;
            break;
          }
          divide(n, width, ranks);
          break;
        }
        divide(n, "out", ranks);
        break;
      case Rule::row: divide(n, "in", ranks); break;
      case Rule::inter_width: divide(n, "dim", ranks); break;
      case Rule::expert_column:
      case Rule::expert_row:
        divide(n, "inter", ranks);
        if (n.op == "bias") divide(n, "dim", ranks);  // each expert's gate/up bias (gpt-oss)
        break;
    }
  };
  for (auto& n : r.pre) split(n, whole);
  for (auto& k : r.kinds) {
    // The kind's own KV heads and head size, from its attention node (Gemma-4's full layers).
    KvSplit kv = whole;
    for (const auto& n : k.nodes) {
      if (n.op != "attention" || !n.params.count("kv_heads")) continue;
      const double kvh = n.params.at("kv_heads");
      const double q = n.params.count("heads") && n.params.count("head_dim") ? n.params.at("heads") * n.params.at("head_dim") : 0;
      MET_TRY(kv, kv_split(kvh, q, ranks, ctx,
                           kvh == whole.kv_heads ? std::string("num_key_value_heads")
                                                 : fmt::format("the {} layers' KV heads", k.kind)));
    }
    for (auto& n : k.nodes) split(n, kv);
  }
  for (auto& n : r.post) split(n, whole);
  if (!bad.empty()) return fail(fmt::format("{}: {}", ctx, bad));
  if (!missing.empty()) {
    std::string list;
    for (const auto& m : missing) list += (list.empty() ? "" : ", ") + m;
    return fail(fmt::format("{}: {} node(s) of circuit '{}' have no tensor-parallel split rule: {} (met splits dense "
                            "attention and MLP layers: embed and its scale, the attention/mlp/final and post norms, qkv, "
                            "q/k/v norms, rope, attention, o, gate_up, silu_mul, gelu_mul, down, the residuals, layer "
                            "scalars, lm_head, softcap, argmax, Gemma-4's per-layer inputs, gpt-oss's biases and sinks; and routed experts: moe_router, "
                            "moe_gate_up, moe_down, the clamped SwiGLU, and Gemma-4's scaled router and the norms around its experts)",
                            ctx, missing.size(), g.circuit, list));
  }
  return r;
}

}  // namespace met::emit::detail
