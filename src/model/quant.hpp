// Declared quantization of a checkpoint, read from config.json `quantization_config` (fp8, mxfp4,
// modelopt, compressed-tensors) or hf_quant_config.json (modelopt). Says which Linear weights are
// stored in which format, which modules are excluded, and the KV cache format.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "core/expected.hpp"
#include "core/format.hpp"
#include "model/checkpoint.hpp"

namespace met::model {

struct QuantScheme {
  std::string method;                 // "fp8", "mxfp4", "modelopt", "compressed-tensors"
  std::string source;                 // "config.json quantization_config" | "hf_quant_config.json"
  Format weight = Format::bf16;       // format of quantized Linear weights
  std::vector<std::string> exclude;   // module patterns kept unquantized (prefix or glob with '*')
  std::optional<Format> kv;           // KV cache format when the config declares one
  // Input activations of quantized Linear nodes, when the checkpoint fixes their quantisation
  // (static scales: W8A8, W4A4). Dynamic activation schemes leave the choice to the runtime and
  // stay absent, with a note.
  std::optional<Format> act;
  bool act_dynamic = false;           // the config declares dynamic activation quantisation
  std::vector<std::string> notes;     // facts for the report (block size, group size, ...)
  std::vector<std::int64_t> block;    // fp8 weight_block_size [rows, cols] when declared, else empty
};

inline constexpr const char* kHfQuantFile = "hf_quant_config.json";

// config: the parsed config.json. nullopt: not quantized.
Expected<std::optional<QuantScheme>> read_quant(const nlohmann::json& config, const CheckpointSource& src);
// Whether a tensor ("model.layers.0.self_attn.q_proj.weight") falls under an exclusion pattern:
// the pattern matches the tensor name or one of its dotted prefixes; '*' matches any run of characters.
bool excluded(const std::vector<std::string>& patterns, const std::string& tensor);

}  // namespace met::model
