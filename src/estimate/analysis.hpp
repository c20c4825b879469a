// Analysis: everything a report shows for one model on one device, computed once — the plan at
// the requested case, ceilings and predictions for decode at C, prefill at T and TP degrees,
// memory fit, key figures, ranked gaps, the port list over all modes and the format paths.
// Renderers (src/report) only format these values.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "estimate/basis.hpp"
#include "estimate/cost.hpp"
#include "model/graph.hpp"
#include "planner/library.hpp"
#include "planner/plan.hpp"

namespace met::estimate {

struct Options {
  BasisChoice basis = BasisChoice::datasheet;
  planner::Mode mode = planner::Mode::decode;
  std::int64_t rows = 1;     // decode 1, batch C, prefill T
  std::int64_t context = 0;  // 0: the model's serving default
  int tp = 1;
  std::vector<std::int64_t> decode_c = {1, 2, 4, 8, 16, 32, 64, 128};
  std::vector<std::int64_t> prefill_t = {512, 4096, 32768};
  std::vector<int> tps = {1, 2, 4, 8};
};

struct GroupRow {
  std::string scope;
  int count = 1;
  std::string group;          // rule id or "gap"
  std::string nodes;          // "rmsnorm:attn_norm linear:qkv rope kv_append"
  std::string kernels;
  std::string unit;
  std::string family;                        // "" for a gap
  bool measured = false;                     // the prediction divides by the family's measured efficiency
  std::string exec;                          // "W8A16 fp8-e4m3 x bf16 emulate (bf16)" / "W4A4 nvfp4 x nvfp4 no path" (exec_text)
  std::optional<planner::Exec> exec_detail;  // the same, field by field (the JSON's)
  GroupCost cost;             // per layer
  double fit_seconds = 0;     // per layer: what the family's efficiency divides (the datasheet-basis
                              // ceiling, its compute over the tiles' share of the SMs for a gemm)
  double step_seconds = 0;    // cost.seconds * count (prediction basis)
  double share = 0;           // of the step
};

struct CaseEstimate {
  std::string mode;           // decode | batch | prefill
  std::int64_t rows = 0;      // C or T
  std::int64_t context = 0;   // decode: cache length per sequence
  int tp = 1;
  double ceiling_s = 0;
  double prediction_s = 0;
  std::string prediction_basis;       // "unmeasured" or "measured: " and the evidence
  std::vector<std::string> evidence;  // the campaigns the prediction read, sorted, each once
  double weight_bytes = 0;
  double kv_bytes = 0;
  double other_bytes = 0;
  double flops = 0;
  double allreduce_s = 0;  // the step's all-reduces (fp32 partial sums, as emit --tp places them)
  double gather_s = 0;     // the gather of the vocabulary-parallel logits
  double gap_s = 0;
  double tokens_per_s = 0;            // at the ceiling: decode C / step, prefill T / time
  double predicted_tokens_per_s = 0;  // the same at the prediction
  double memory_bound_share = 0;
  int gaps = 0;
  std::string digest;
  double measured_s = 0;        // > 0: a campaign measured this exact case (attach_measured)
  std::string measured_source;  // that campaign: "FILE, STAMP"
};

struct MemoryFit {
  int tp = 1;
  std::int64_t seqs = 1;
  std::int64_t context = 0;
  double weights = 0;       // per device
  double kv = 0;
  double state = 0;
  double activations = 0;   // workspace + activation buffers
  double reserve = 0;       // runtime's fixed reservation
  double total = 0;
  double usable = 0;
  bool fits = false;
  std::optional<int> smallest_tp;        // when it does not fit at this tp
  std::vector<std::string> devices_that_fit;  // at tp 1, when no tp fits
  std::int64_t max_seqs = 0;             // sequences of `context` tokens that fit at this tp
};

struct KeyFigures {
  double weight_bytes = 0;              // whole model, declared formats
  double parameters = 0;                // weight elements
  double kv_bytes_per_token = 0;        // all layers, full-attention equivalent
  double state_bytes_per_seq = 0;
  double decode_weight_bytes_read = 0;  // one decode step at C = 1
  double energy_j_per_token = 0;        // TDP x step time at the requested case (estimate)
};

struct GapRow {
  std::string scope;
  std::string op;
  int count = 1;
  double step_seconds = 0;
  double share = 0;
  std::string why;
  std::string kernel;
  // Why the row is here. Gaps (unfused reference ops): "no kernel" (no kernel of the class runs the
  // op here: its rule's kernels are absent, need an instruction the device lacks or do not take the
  // shape, or no rule covers the op) and "no format path" (every candidate rule lacks the format
  // pair). Groups that run a kernel: "tensor-core policy" (a matmul off the tensor cores at or
  // above the class's row threshold) and "unmeasured" (its family has no measured efficiency
  // where the rest of the case's prediction is measured: its time is the ceiling).
  std::string klass;
};

struct FormatRow {
  std::string node;      // "layers:full linear:qkv"
  std::string weight;    // declared format
  std::string act;       // declared activation format (the checkpoint's, else the model's)
  std::string source;    // where the format came from
  std::string decode;    // exec at decode: "W8A8 native (fp8, RULE; activations quantised to fp8-e4m3 on the fly)"
  std::string prefill;   // exec at prefill
  std::optional<planner::Exec> decode_exec, prefill_exec;  // field by field, when the node has a group
  std::string decode_rule, prefill_rule;                   // "" for a gap
};

struct PortRow {
  planner::PortItem item;
  std::vector<std::string> modes;
};

// Holds pointers to the model graph and the target's device: both must outlive the Analysis.
struct Analysis {
  const model::ModelGraph* model = nullptr;
  const device::Device* device = nullptr;
  std::vector<std::string> chain;
  Options options;
  std::int64_t context = 0;
  Basis basis;
  planner::Plan plan;                 // the requested case
  std::vector<GroupRow> groups;       // of the requested case
  CaseEstimate requested;
  std::vector<CaseEstimate> decode;   // C ladder at tp
  std::vector<CaseEstimate> prefill;  // T ladder at tp
  std::vector<CaseEstimate> tp;       // decode at rows over TP degrees
  std::vector<GapRow> gaps;           // ranked by share of the requested step
  std::vector<PortRow> ports;         // over decode, batch and prefill plans
  std::vector<planner::TcFinding> tc_audit;
  std::vector<FormatRow> formats;
  MemoryFit fit;
  KeyFigures key;
  std::vector<std::string> notes;
  bool measured_asked = false;  // --measured was given: reports say where nothing matched
};

Expected<Analysis> analyze(const planner::Library& lib, const planner::Target& target, const model::ModelGraph& model,
                           const Options& options);

// The collectives of one step at tensor parallelism tp (none at 1), where `met circuit emit --tp`
// places them: an all-reduce after each row-parallel projection (o, down, the experts' down) where
// the first norm or residual add reads its partial sums (Gemma's post norms read them before the
// residual), and one gather of the vocabulary-parallel logits, costed as allreduce_s and gather_s.
// A residual add with no row-parallel producer (Gemma-4's per-layer inputs, its branch sum) moves
// nothing.
struct TpCollectives {
  std::int64_t all_reduces = 0;
  std::int64_t gathers = 0;
};
TpCollectives tp_collectives(const model::ModelGraph& m, int tp);

// K parts of a GEMM of `tiles` output tiles over `k` input values on `units` SMs, by its class's
// split K (avail::ClassInfo::gemm_k_split: most parts, fewest K values per part; none: 1): as many
// as one wave of the SMs holds. Emit cuts the GEMM so (src/emit/slice.cpp, split_gemms) and the
// prediction counts the parts (tile_occupancy).
std::int64_t gemm_k_parts(std::int64_t tiles, std::int64_t k, std::int64_t units,
                          const std::optional<std::pair<std::int64_t, std::int64_t>>& split);

// One case of the ladder (exposed for tests): the plan at that case and its cost.
// A group's exec as one line: "W8A8 fp8-e4m3 x bf16 native (fp8), activations quantised to fp8-e4m3
// on the fly"; a gap's names the pair it would need: "W4A4 nvfp4 x nvfp4 no path".
std::string exec_text(const planner::Exec& e, bool gap);

CaseEstimate estimate_case(const planner::Library& lib, const planner::Target& target, const model::ModelGraph& model,
                           const Basis& basis, planner::Mode mode, std::int64_t rows, std::int64_t context, int tp,
                           std::vector<GroupRow>* groups = nullptr, planner::Plan* plan_out = nullptr);

MemoryFit memory_fit(const planner::Library& lib, const device::Device& d, const avail::ClassInfo& cls,
                     const model::ModelGraph& model, std::int64_t seqs, std::int64_t context, int tp);

}  // namespace met::estimate
