// weights.json ("met-weights/1"): which checkpoint bytes back each weight the packets name. A
// manifest tensor is one or more checkpoint tensors stacked along dim 0 (fused q/k/v, gate/up),
// with its fp8 scales stacked the same way: block scales (`<tensor>_scale_inv`, Qwen3-FP8 /
// DeepSeek-V3) or one per-tensor scale per part (modelopt's `<module>.weight_scale`, with its static
// `<module>.input_scale`). Pure: headers arrive through a CheckpointSource; the interpreter
// (src/interp/weights.hpp) maps the bytes.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "core/expected.hpp"
#include "model/circuit.hpp"
#include "model/graph.hpp"
#include "model/safetensors.hpp"

namespace met::emit {

inline constexpr const char* kWeightsSchema = "met-weights/1";
inline constexpr const char* kScaleSuffix = "_scale_inv";   // block-fp8 checkpoints: "<weight>_scale_inv"
inline constexpr const char* kTensorScaleSuffix = "_scale";  // modelopt: "<module>.weight" + "_scale"
inline constexpr const char* kInputScale = "input_scale";    // modelopt: "<module>.input_scale"
inline constexpr const char* kBlocksSuffix = "_blocks";    // MXFP4 (gpt-oss experts): "<tensor>_blocks" U8 codes
inline constexpr const char* kScalesSuffix = "_scales";    // and "<tensor>_scales" U8 e8m0, one per 32 codes
inline constexpr const char* kKScaleSuffix = ".self_attn.k_proj.k_scale";  // modelopt FP8 KV: "<...>.layers.N" + these
inline constexpr const char* kVScaleSuffix = ".self_attn.v_proj.v_scale";
inline constexpr std::uint64_t kMxfp4BlockBytes = 16;       // 32 e2m1 codes, two a byte
inline constexpr std::uint64_t kFp8BlockRows = 128;         // weight_block_size of DeepSeek-V3 / Qwen3-FP8
inline constexpr std::uint64_t kFp8BlockCols = 128;

struct WeightPart {
  std::string tensor;                 // checkpoint tensor name
  std::string file;                   // shard, relative to the checkpoint directory
  std::string dtype;                  // safetensors dtype: "BF16", "F8_E4M3", "F32"
  std::uint64_t offset = 0;           // byte offset of the data in the file, length prefix and header included
  std::uint64_t bytes = 0;
  std::vector<std::uint64_t> shape;
  // Tensor parallelism (emit --tp): the rank's window, a start and a count per dimension:
  // {row0, rows, col0, cols} of a 2-d tensor, {expert0, experts, row0, rows, col0, cols} of a 3-d
  // one ([experts, rows, cols], Gemma-4's stacked experts); empty: the whole tensor. offset, bytes
  // and shape stay the checkpoint tensor's.
  std::vector<std::uint64_t> window;
};

// The shape a part contributes: its window's counts, or the tensor's shape.
std::vector<std::uint64_t> part_shape(const WeightPart& p);

struct WeightEntry {
  std::string name;                   // "model.layers.0.self_attn.qkv"
  std::string dtype;                  // format name: "bf16", "fp8-e4m3", "f16", "f32"
  std::vector<std::uint64_t> shape;   // parts stacked along dim 0
  std::vector<WeightPart> parts;
  // One per part or empty: F32 [ceil(r/128), ceil(c/128)] block scales with `block`, or, with
  // `block` empty, one F32 [] per-tensor scale per part (modelopt).
  std::vector<WeightPart> scale_parts;
  std::vector<std::uint64_t> block;     // scale block [rows, cols] of each part; empty for per-tensor scales
  std::vector<WeightPart> input_scale_parts;  // static per-tensor activation scales, F32 [], one per part, or empty
};

// A calibrated per-tensor KV-cache scale (modelopt's `<attn>.k_proj.k_scale` and
// `<attn>.v_proj.v_scale`, F32 []) that emit wrote into the packets of an fp8 KV cache. The loader
// reads both tensors again and refuses a checkpoint whose values are not the ones the packets hold.
struct KvScale {
  int layer = 0;  // the graph's layer, whose caches the scales encode
  WeightPart k, v;
  float k_scale = 1, v_scale = 1;
};

struct WeightsManifest {
  std::string network;                // lower-cased checkpoint directory name
  std::string checkpoint;             // the checkpoint directory as given
  std::vector<WeightEntry> tensors;
  std::vector<KvScale> kv_scales;     // fp8 KV cache over a checkpoint's calibrated scales; else empty
};

// Canonical text (2-space indent, fixed key order, trailing newline).
std::string to_json(const WeightsManifest& m);
// Strict: unknown keys, missing keys, wrong types and parts that do not stack are located errors.
Expected<WeightsManifest> parse_weights_manifest(const std::string& text, const std::string& display);

// Every tensor of a checkpoint plus, per shard, where its data begins (8 + header length).
// The values of its calibrated KV scales (F32 [] tensors named `*.k_proj.k_scale` and
// `*.v_proj.v_scale`), read from the weight bytes: the only values emit puts in the packets.
struct CheckpointLayout {
  std::map<std::string, model::TensorInfo> tensors;
  std::map<std::string, std::uint64_t> data_start;  // file -> byte offset of the first data byte
  std::map<std::string, float> kv_scale_values;     // tensor -> value
};
Expected<CheckpointLayout> read_checkpoint_layout(const CheckpointSource& src);

// The calibrated KV scales of a checkpoint by layer (the N of `layers.N.self_attn.k_proj.k_scale`),
// each layer with both k and v, F32 [], finite and positive; empty when it carries none.
Expected<std::map<int, KvScale>> calibrated_kv_scales(const CheckpointLayout& layout, const std::string& display);

// One manifest entry from checkpoint tensors stacked along dim 0: same rank, trailing dims and
// dtype; fp8 parts must each have a `<tensor>_scale_inv` F32 [ceil(r/128), ceil(c/128)] or, all of
// them, a per-tensor `<tensor>_scale` F32 [] (and then `<module>.input_scale` F32 [] where present).
// display names the checkpoint in errors.
Expected<WeightEntry> make_entry(const std::string& name, const std::vector<std::string>& tensors,
                                 const CheckpointLayout& layout, const std::string& display);

// How a weight's dimensions hold the matrix a tensor-parallel split cuts (rank_slice).
enum class SplitLayout {
  out_in,  // [out, in], or stacked experts [experts, out, in] (a Linear's weight; MXFP4 blocks
           // [experts, out, in / 32, 16] with scales [experts, out, in / 32])
  in_out,  // [experts, in, out]: gpt-oss's bf16 experts
  vector,  // [n] or [experts, n]: a bias or the attention sinks, cut along the last dimension
};

// Tensor parallelism: the entry of rank `rank` of `ranks`, each part cut into `ranks` equal windows
// along dim (0: the outputs, for column-parallel projections; 1: the inputs, for row-parallel ones)
// and the rank's window kept; named "<entry>.rank<r>". part_groups[k] > 0 cuts part k into that many
// windows instead, of which rank r keeps window r * groups / ranks (the k and v parts of qkv when
// KV heads are fewer than ranks). Per-tensor scales (modelopt fp8) go with every window of their
// tensor. A 3-d part [experts, out, in] is cut per expert: by inputs, one window over every
// expert; by outputs, `halves` windows of each expert (a fused gate/up stacks gate's rows, then up's:
// each is cut), as many parts as experts x halves, so the rank's rows of one expert stay together
// as the expert ops read them. MXFP4 experts are cut like a 3-d part, their blocks and e8m0 scales
// alike; by inputs only in whole 32-column scale blocks. Refuses fp8 block-scaled entries, scaled
// 3-d parts and a dim that does not divide (ctx locates the error).
Expected<WeightEntry> rank_slice(const WeightEntry& e, int dim, int rank, int ranks, const std::string& ctx,
                                 const std::vector<int>& part_groups = {}, int halves = 1,
                                 SplitLayout layout = SplitLayout::out_in);

// "Meta-Llama-3.1-8B" -> "meta-llama-3.1-8b".
std::string network_slug(const std::string& checkpoint_dir_name);
// Name of the entry of a node: its one tensor, or for a fused node the tensors' common dotted
// prefix plus the role ("model.layers.0.self_attn." + "qkv"), or the op where the node has no role
// ("model.layers.0.mlp.experts." + "moe_down": every expert's down_proj).
std::string entry_name(const std::vector<std::string>& tensors, const std::string& role, const std::string& op = "");

// Every weight of the graph, layer by layer in execution order (pre, layers, post); a tied node
// (lm_head on the embedding) gets its own entry over the embedding's bytes. The fp8 tensors are
// held to what config.json and hf_quant_config.json declare: block scales for quant_method fp8
// (weight_block_size 128x128), per-tensor weight and input scales for modelopt FP8, no fp8 tensor
// under an exclusion, and with kv_cache_quant_algo FP8 a `k_proj.k_scale` and `v_proj.v_scale`
// F32 [] beside every attention layer's k and v projections.
Expected<WeightsManifest> build_weights_manifest(const model::Circuit& circuit, const model::ModelGraph& graph,
                                                 const CheckpointSource& src, const std::string& checkpoint);

// Bytes per element of the manifest formats (f32 4, bf16/f16 2, fp8 1); 0 when unknown.
std::uint64_t format_element_bytes(const std::string& dtype);

}  // namespace met::emit
