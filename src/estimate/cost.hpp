// Bytes and FLOPs of one node for one step on one device (after tensor-parallel sharding), and
// the time of a group: max(bytes / bandwidth, flops / peak of the unit that runs it). A fused
// group moves its weights, cache and state plus only its own input and output; a gap is costed
// as unfused reference ops (every node reads and writes its activations) on CUDA cores.
#pragma once

#include <string>

#include "core/format.hpp"
#include "estimate/basis.hpp"
#include "model/graph.hpp"
#include "planner/plan.hpp"

namespace met::estimate {

struct StepShape {
  std::int64_t rows = 1;         // tokens computed in this step (per launch)
  std::int64_t seqs = 1;         // sequences those rows belong to
  std::int64_t context = 0;      // decode: tokens each sequence attends to (cache incl. this one)
  bool prefill = false;          // rows are consecutive positions of one sequence
  std::int64_t prior = 0;        // prefill: tokens already in the cache before this chunk
  int tp = 1;
  double qkv_share = 0;          // a rank's share of the scope's qkv rows (qkv_rank_share); 0: 1 / tp
  Format act = Format::bf16;
  Format kv = Format::bf16;
};

struct NodeCost {
  double weight_bytes = 0;
  double kv_read = 0;
  double kv_write = 0;
  double state_bytes = 0;  // recurrent state read + written
  double in_bytes = 0;
  double out_bytes = 0;
  double flops = 0;
};

NodeCost node_cost(const model::Node& n, const StepShape& s);

// KV heads one of tp ranks holds, as `emit --tp` splits them: its share when there are at least tp,
// else one (shared by tp / kv_heads ranks).
double rank_kv_heads(double kv_heads, int tp);

// The share of a layer's linear:qkv rows one of tp ranks holds: 1/tp of the query rows and its
// rank_kv_heads of the KV heads' k and v rows (the layer's attention node gives heads, KV heads and
// head_dim); 1/tp where the layer has no such attention node.
double qkv_rank_share(const std::vector<model::Node>& layer, const model::Node& qkv, int tp);

// Attention rows a prefill chunk computes under a window (0 = full): sum over its rows of the
// tokens each sees, and the KV tokens a flash kernel streams (once per query tile).
struct PrefillAttention {
  double visible_sum = 0;
  double kv_tokens_streamed = 0;
};
PrefillAttention prefill_attention(std::int64_t prior, std::int64_t rows, std::int64_t window);

struct GroupCost {
  double weight_bytes = 0;
  double kv_bytes = 0;
  double other_bytes = 0;  // activations and state
  double flops = 0;
  double seconds = 0;      // the ceiling: max(memory_seconds, compute_seconds)
  double memory_seconds = 0, compute_seconds = 0;
  std::string bound;       // memory | compute
  std::string peak_key;    // fp32, bf16, fp8, ... ("" for memory-only units)
  double bytes() const { return weight_bytes + kv_bytes + other_bytes; }
};

GroupCost group_cost(const planner::Group& g, const planner::Scope& scope, const StepShape& s, const Basis& basis);

}  // namespace met::estimate
