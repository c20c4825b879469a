// emit: an accepted plan + a checkpoint's headers -> assets (model.pkt, weights.json, build.json).
// One program per prefill bucket and per decode rung, each built from the planner's Plan for that
// mode and row count (the Plan the report prints); a plan with gaps is refused. Pure: the caller
// reads config.json and the safetensors headers and writes the files.
//
// Runtime contract the host follows (src/interp):
//  - KV cache of a layer: [max_seqs * max_ctx + pad_slots, kv_heads, head_dim] (k and v tensors);
//    sequence s owns slots [s*max_ctx, (s+1)*max_ctx); the last pad_slots slots take the writes of
//    prefill padding rows. In a decode program row r IS sequence r (padding row r writes slot
//    the last slot of its own region: a prompt never fills it, and its own decode writes it first).
//  - a sliding-window layer whose ring (model::kv_ring over the window, the largest prefill bucket
//    and max_ctx) is smaller has a cache of [max_seqs * (R + 1) + pad_slots, ...] rows instead:
//    sequence s owns rows [s*(R+1), (s+1)*(R+1)), position p at row s*(R+1) + p % R, and its last
//    row takes the writes of the sequence's idle decode rows; pad rows follow at max_seqs*(R+1).
//    Those layers' writes read the IO field ring_slots and their attention ring_base (the host
//    fills both from the linear slots with KvRing::map); their attention ops carry ring = R.
//  - prefill: the rows hold one or more prompts (packed: each row carries its own position, slot
//    and seq_base), then padding rows with position 0, seq_base and slot in the pad region. The
//    head runs over planner::prefill_head_rows(rows) rows: head row h reads row head_rows[h] (a
//    gather_rows instruction before the head), the last row of a prompt the launch finishes; unused
//    head rows read any row and are ignored.
//  - IO tensors (source io, ref = IoField) per program; the host fills tokens, positions, slots,
//    seq_base, seq_len, head_rows and sample_params before a run and reads out_tokens,
//    sampled_tokens and logits after it.
//  - generated tensors (source generated, ref = GeneratedTable) hold no bytes in the assets: the
//    loader computes them with generated_table() from build.json (today: the scaled rope's
//    inv_freq; a plain rope passes no table and the op bodies use theta).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "core/expected.hpp"
#include "emit/packet.hpp"
#include "emit/weights_manifest.hpp"
#include "model/graph.hpp"
#include "planner/library.hpp"
#include "planner/plan.hpp"

namespace met::emit {

enum class IoField : std::uint32_t {
  tokens = 0,      // i32 [rows]
  positions = 1,   // i32 [rows]
  slots = 2,       // i64 [rows]: KV slot each row writes
  seq_base = 3,    // i64 [rows]: first slot of the row's sequence
  seq_len = 4,     // i32 [rows]: keys the row attends to, its own included (decode)
  out_tokens = 5,  // i32 [head rows]: argmax of the head
  logits = 6,      // bf16 [head rows, vocab]
  sample_params = 7,   // f32 [head rows, 4]: temperature (<= 0: greedy, the row is skipped), top_p, top_k, u
  sampled_tokens = 8,  // i32 [head rows]: the sampled token of each non-greedy row
  head_rows = 9,       // i32 [head rows]: prefill: the row of the program each head row reads
  ring_slots = 10,     // i64 [rows]: the row's KV slot in the ring caches (KvRing::map)
  ring_base = 11,      // i64 [rows]: the first ring row of the row's sequence
};
inline constexpr std::uint32_t kIoFields = 12;
const char* io_field_name(IoField f);

// The ring caches' rows of the runtime contract above, from the linear layout's (build.json's
// max_ctx, max_seqs and kv_ring). ring 0: the emit made no ring.
struct KvRing {
  std::int64_t max_ctx = 0, max_seqs = 0, ring = 0;
  struct Rows {
    std::int64_t slot = 0, base = 0;
  };
  // A row that writes linear `slot` of the region starting at `base` at position `pos`: a padding
  // row (base at or past max_seqs * max_ctx: the pad region), an idle decode row (slot - base !=
  // pos: the spare row of its sequence) or a sequence's row (position pos % ring).
  Rows map(std::int64_t slot, std::int64_t base, std::int64_t pos) const {
    if (ring <= 0 || max_ctx <= 0) return {slot, base};
    const std::int64_t per = ring + 1, pad = max_seqs * max_ctx;
    if (base >= pad) return {max_seqs * per + (slot - base), max_seqs * per};
    const std::int64_t first = base / max_ctx * per;
    return {slot - base == pos ? first + pos % ring : first + ring, first};
  }
};
// Whether the host writes the field before a launch (else the program writes it).
bool io_input(IoField f);


// The rotary embedding of config.json: rope_theta plus rope_scaling (or a flat rope_parameters).
// default: inv_freq_i = theta^(-2i/rotary_dim); linear: inv_freq / factor (positions / factor);
// llama3: per frequency, wavelengths 2*pi/inv_freq above original/low_freq_factor are divided by
// factor, those below original/high_freq_factor kept, and those between blended smoothly.
// proportional (Gemma-4's global layers): the whole head is the rotary width; the first
// floor(partial_rotary_factor * rotary_dim / 2) frequencies are theta^(-2i/rotary_dim) / factor and
// the rest 0, so dims i and i + rotary_dim/2 past them pass unrotated (cos 1, sin 0).
struct RopeConfig {
  double theta = 10000.0;
  std::string type = "default";  // default | linear | llama3 | proportional
  double factor = 1.0;
  double low_freq_factor = 0.0, high_freq_factor = 0.0;
  double original_max_position_embeddings = 0.0;
  double partial_rotary_factor = 1.0;  // proportional: the rotated share of the head
  // yarn: the ramp between extrapolated and interpolated frequencies over the correction range of
  // beta_fast..beta_slow rotations (its bounds floored and ceiled when truncate), and the attention
  // factor cos and sin are multiplied by (0.1 ln(factor) + 1 unless config.json names one).
  double beta_fast = 32.0, beta_slow = 1.0;
  bool truncate = true;
  double attention_factor = 1.0;
  double mscale = 0.0, mscale_all_dim = 0.0;  // yarn: both named, the attention factor is their ratio
  bool scaled() const { return type != "default"; }
  float attention_scale() const { return type == "yarn" ? static_cast<float>(attention_factor) : 1.0f; }
};
// The rope of a config.json text (display names it in errors); other scaling types are refused. A
// rope_parameters keyed by layer type (Gemma) gives the one scaled entry among them (each entry's
// type and keys checked; two scaled entries that differ are refused), or a plain rope.
Expected<RopeConfig> parse_rope(const std::string& config_json, const std::string& display);
// inv_freq[i], i < rotary_dim / 2, computed in double and rounded once to fp32.
std::vector<float> rope_inv_freq(const RopeConfig& rope, std::int64_t rotary_dim);

enum class GeneratedTable : std::uint64_t {
  rope_inv_freq = 0,  // f32 [rotary_dim / 2]
};

// GPU decode attention: the fewest keys of a row's context one split takes, unless
// `--split-keys` says otherwise (EmitOptions::split_keys).
inline constexpr std::int64_t kDefaultSplitKeys = 32;

struct EmitOptions {
  std::int64_t max_ctx = 4096;
  std::vector<std::int64_t> decode_rungs;     // empty: the class defaults
  std::vector<std::int64_t> prefill_buckets;  // empty: the class defaults
  std::uint32_t sm_count = 0;                 // cpu: worker threads (0: 4); GPU: 0 = the device's SMs/CUs
  int tp = 1;                                 // tensor-parallel ranks (1, 2, 4, 8): one packet per rank
  std::int64_t max_seqs = 0;                  // 0: the largest decode rung
  std::int64_t split_keys = 0;                // GPU decode attention: fewest keys of context a split takes (0: kDefaultSplitKeys)
  std::string config_json;                    // config.json text: rope_theta, rms_norm_eps
  std::string checkpoint;                     // the checkpoint directory as given (build.json, weights.json)
  std::string network;                        // weights.json network slug; empty: from the directory name
  std::map<std::string, std::string> flags;   // every command-line flag that produced it (build.json)
  std::string git_commit;                     // the build of met that emitted it (build.json; `met --version`)
  std::vector<std::string> gpu_interpreters;  // the GPU interpreters that build carries (build.json)
};

struct ProgramInfo {
  std::string name;
  std::string mode;                 // decode | batch | prefill
  std::int64_t rows = 0;
  std::string digest;               // the plan's digest
  std::vector<std::string> groups;  // rule id of every instruction group, in instruction order
};

struct Assets {
  PacketFile packet;                    // rank 0 (the only rank without --tp)
  std::vector<PacketFile> other_ranks;  // --tp N: ranks 1 .. N-1, one file each (model.rank<r>.pkt)
  WeightsManifest weights;
  std::string build_json;
  std::vector<ProgramInfo> programs;
  std::int64_t max_ctx = 0, max_seqs = 0, pad_slots = 0;
  std::int64_t kv_ring = 0;  // the rows of the sliding-window layers' rings (0: no ring)
};

Expected<Assets> emit(const planner::Library& lib, const planner::Target& target, const model::ModelGraph& graph,
                      const CheckpointLayout& layout, const EmitOptions& options);

// The rule ids of a plan's non-gap groups in execution order: pre, then per layer (model order)
// the groups of the layer's scope, then post. What an emitted program's instruction groups list.
std::vector<std::string> plan_group_rules(const planner::Plan& plan, const model::ModelGraph& graph);

// build.json fields the interpreter reads back.
struct BuildInfo {
  std::string target_class;
  std::string device;
  std::uint32_t sm_count = 0;
  int tp = 1;  // build.json "tp": tensor-parallel ranks
  std::int64_t max_ctx = 0, max_seqs = 0, pad_slots = 0;
  std::int64_t kv_ring = 0;  // build.json "kv_ring" (absent: 0)
  std::uint32_t abi_hash = 0;
  std::string checkpoint;
  RopeConfig rope;  // build.json "rope"
  std::map<std::string, std::string> program_digests;  // program name -> its plan digest (build.json "programs")
};
Expected<BuildInfo> parse_build_json(const std::string& text, const std::string& display);

// The bytes of a generated tensor of an emit (display names the packet in errors).
Expected<std::string> generated_table(const TensorDesc& tensor, const BuildInfo& build, const std::string& display);

}  // namespace met::emit
