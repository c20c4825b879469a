// Bytes and FLOPs of one node for one step on one device (after tensor-parallel sharding), and
// the time of a group: max(bytes / bandwidth, flops / peak of the unit that runs it). A fused
// group moves its weights, cache and state plus only its own input and output; a gap is costed
// as unfused reference ops (every node reads and writes its activations) on CUDA cores.
#pragma once

#include <optional>
#include <string>
#include <utility>

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
  // A prefill's routed experts on a class's grouped body (ClassInfo::moe_gemm_block, unset: none)
  // over `units` SMs: costed by moe_blocks, as the body reads them.
  std::optional<std::pair<std::int64_t, std::int64_t>> moe_block;
  bool moe_sorted = false;  // ClassInfo::moe_gemm_sorted: one row part
  std::int64_t units = 0;
};

// The fewest rows a row part of the grouped expert body takes: a part's slots reach an expert's
// block once the experts share them (src/emit/slice.cpp cuts so).
inline constexpr std::int64_t kMoeRowsPerPart = 1024;

// Row parts of a grouped expert op over `rows` rows and `cols` output columns in units of
// `unit_cols` (a block's columns; gate_up's are half gate, half up) on `units` SMs: enough that
// every SM has a slice, each of at least kMoeRowsPerPart rows. Emit cuts the op so
// (src/emit/slice.cpp) and the prediction counts them (moe_blocks).
std::int64_t moe_row_parts(std::int64_t rows, std::int64_t cols, std::int64_t unit_cols, std::int64_t units);

// Expected blocks of `block_rows` slots the grouped body runs per column part of a prefill of
// `rows` tokens routed top_k of `experts`: each of row_parts parts holds about rows / row_parts tokens,
// and an expert's slots among them, Binomial(rows / row_parts, top_k / experts), run in
// ceil(slots / block_rows) blocks. Uniform routing; skew only adds blocks.
double moe_blocks(double experts, double top_k, double rows, std::int64_t row_parts, std::int64_t block_rows);

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
