// Synthetic checkpoints (`met model synth`): a circuit + config.json -> the tensor list of a real
// Hugging Face checkpoint and seeded weight bytes. Every byte is a function of (seed, tensor name,
// element index) only, so output never depends on platform, chunking or thread count. Pure: the
// caller supplies the config text and writes the bytes (src/cli/model_cmd.cpp).
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "core/expected.hpp"
#include "core/format.hpp"
#include "model/circuit.hpp"
#include "model/graph.hpp"

namespace met::model {

// What a tensor is, for value ranges and quantization.
// offset_norm: a norm weight stored as a difference from 1 (Gemma's 1 + w).
// scale: a block or per-tensor fp8 weight scale; input_scale: a static per-tensor activation scale;
// kv_scale: a per-tensor fp8 KV-cache scale (modelopt's k_proj.k_scale, v_proj.v_scale).
// qk_norm: a q or k norm of a layer whose scores are not scaled (Gemma-4: scale 1), drawn near
// dim^(-1/4) so that q.k keeps the spread a 1/sqrt(head_dim) scale would give it.
enum class TensorKind { embedding, norm, offset_norm, qk_norm, linear, scaled_router, lm_head, scale, input_scale, kv_scale,
                        other, mxfp4_blocks, mxfp4_scales };

struct WeightTensorSpec {
  std::string name;                    // checkpoint tensor name
  std::vector<std::uint64_t> shape;
  TensorKind kind = TensorKind::other;
  std::uint64_t fan_in = 0;            // inputs per output; 0: the last dim (a fused expert tensor stores them first)
};

// One weight-carrying node of one layer, with its tensors expanded for that layer.
struct WeightNodeSpec {
  int layer = -1;                      // -1: pre/post
  std::string op, role, where;         // where: the node template ("kernels/circuits/dense-gqa.toml:41")
  std::vector<std::string> names;      // template names for this layer (untied: "lm_head.weight")
  std::vector<WeightTensorSpec> tensors;  // tensors holding the bytes (tied: the embedding)
  bool tied = false;
  bool quantizable = false;            // a Linear weight fp8 may store (never embeddings, norms, lm_head)
  bool fused_experts = false;          // one tensor over every expert (model/experts.hpp): MXFP4 stores it
};

// Every weight node of the graph in execution order (pre, layer 0..n-1, post). Fused nodes split
// their stacked shape among their tensors: q/k/v by the layer's attention node (heads, kv heads,
// head dims), others equally. A per-expert node (model/experts.hpp) lists every expert's tensors,
// expert major, each expert's shape split like a fused node's; an expert weight whose template
// names no per-expert tensors (fused [experts, ...] checkpoint tensors) is an error.
Expected<std::vector<WeightNodeSpec>> weight_nodes(const Circuit& circuit, const ModelGraph& graph);

// How fp8 Linear weights are laid out (docs/arch/kernel-tree.md, Synthetic checkpoints):
// block128: Qwen3-8B-FP8's config.json quantization_config {quant_method fp8, fmt e4m3,
//   activation_scheme dynamic, weight_block_size [128, 128]} and F32 `<weight>_scale_inv`
//   [ceil(r/128), ceil(c/128)];
// modelopt: nvidia's *-Instruct-FP8 hf_quant_config.json {quant_algo FP8, kv_cache_quant_algo FP8,
//   exclude_modules [lm_head]} with F32 scalar `<module>.weight_scale` and `<module>.input_scale`,
//   and F32 scalar `self_attn.k_proj.k_scale` / `self_attn.v_proj.v_scale` per attention layer.
enum class Fp8Layout { block128, modelopt };

struct SynthOptions {
  std::uint64_t seed = 0;
  Format dtype = Format::bf16;         // bf16 | fp8_e4m3 (Linear weights) | mxfp4 (fused expert tensors); the rest stays bf16
  Fp8Layout layout = Fp8Layout::block128;  // read when dtype is fp8_e4m3
};

// The --dtype names of `met model synth`: bf16, fp8-block128, fp8-modelopt, and fp8-e4m3 (the
// name before there were two layouts: block128). nullopt for any other name.
struct SynthDtype {
  Format dtype;
  Fp8Layout layout;
};
std::optional<SynthDtype> parse_synth_dtype(const std::string& name);
inline const std::vector<std::string>& synth_dtype_names() {
  static const std::vector<std::string> names = {"bf16", "fp8-block128", "fp8-modelopt", "fp8-e4m3", "mxfp4"};
  return names;
}

inline constexpr std::uint64_t kSynthBlock = 128;          // fp8 weight_block_size
inline constexpr std::uint64_t kDefaultShardBytes = 2'000'000'000;

struct SynthTensor {
  std::string name;
  std::string dtype;                   // "BF16", "F8_E4M3", "F32"
  std::vector<std::uint64_t> shape;
  TensorKind kind = TensorKind::other;
  std::uint64_t fan_in = 1;            // last dim; sets the value range of linear weights
  std::uint64_t bytes = 0;
};

struct SynthPlan {
  std::string circuit;                 // circuit id
  std::string config_json;             // config.json to write
  std::string hf_quant_config_json;    // hf_quant_config.json to write (modelopt), else empty
  SynthOptions options;
  std::vector<SynthTensor> tensors;    // in file order; an fp8 weight is followed by its scale
  std::uint64_t total_bytes = 0;
};

// config_text: the input config.json; display names it in errors.
Expected<SynthPlan> plan_synth(const std::map<std::string, Circuit>& circuits, const std::string& config_text,
                               const std::string& display, const SynthOptions& options);

// Bytes [begin, begin + out.size()) of tensor t's data; begin and size need not be element-aligned.
void synth_bytes(const SynthPlan& plan, std::size_t t, std::uint64_t begin, std::span<std::byte> out);

struct SynthShard {
  std::string file;                    // "model.safetensors" or "model-00001-of-00003.safetensors"
  std::vector<std::size_t> tensors;    // indices into plan.tensors, in file order
  std::string header;                  // the 8-byte length, JSON header and padding
  std::uint64_t data_bytes = 0;
};

// Tensors in order into shards of at most shard_bytes of data (a bigger tensor gets a shard of its
// own); one shard is model.safetensors, several also need index_json().
Expected<std::vector<SynthShard>> shard_synth(const SynthPlan& plan, std::uint64_t shard_bytes);
// model.safetensors.index.json: {"metadata":{"total_size":N},"weight_map":{tensor: file}}.
std::string index_json(const SynthPlan& plan, const std::vector<SynthShard>& shards);

// The whole directory in memory (file -> bytes): for tests and tiny models only.
Expected<std::map<std::string, std::string>> synth_files(const SynthPlan& plan, std::uint64_t shard_bytes);

// Encoders the generator and the tests share: round to nearest, ties to even.
std::uint16_t f32_to_bf16(float f);
std::uint8_t f32_to_fp8_e4m3(float f);   // saturates at +-448
float fp8_e4m3_value(std::uint8_t v);

}  // namespace met::model
