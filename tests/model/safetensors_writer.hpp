// Test helper: writes real safetensors bytes (8-byte little-endian length, JSON header, zeroed
// data) and tiny dense-gqa checkpoints in memory, so header and format tests need no files.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace met::model::testing {

struct FakeTensor {
  std::string name;
  std::string dtype;
  std::vector<std::uint64_t> shape;
};

inline int bytes_of(const std::string& dtype) {
  if (dtype == "F32") return 4;
  if (dtype == "BF16" || dtype == "F16") return 2;
  return 1;
}

inline std::string le64(std::uint64_t n) {
  std::string out(8, '\0');
  for (int k = 0; k < 8; ++k) out[static_cast<std::size_t>(k)] = static_cast<char>((n >> (8 * k)) & 0xff);
  return out;
}

// A header text and a data size make a file; tests corrupt either before joining them.
inline std::string safetensors_file(const std::string& header, std::uint64_t data_bytes) {
  return le64(header.size()) + header + std::string(data_bytes, '\0');
}

inline std::pair<std::string, std::uint64_t> safetensors_header(const std::vector<FakeTensor>& tensors) {
  nlohmann::json h = nlohmann::json::object();
  h["__metadata__"] = {{"format", "pt"}};
  std::uint64_t off = 0;
  for (const auto& t : tensors) {
    std::uint64_t n = 1;
    for (auto d : t.shape) n *= d;
    n *= static_cast<std::uint64_t>(bytes_of(t.dtype));
    h[t.name] = {{"dtype", t.dtype}, {"shape", t.shape}, {"data_offsets", {off, off + n}}};
    off += n;
  }
  return {h.dump(), off};
}

inline std::string safetensors(const std::vector<FakeTensor>& tensors) {
  auto [header, bytes] = safetensors_header(tensors);
  return safetensors_file(header, bytes);
}

struct TinyDims {
  std::uint64_t hidden = 64, heads = 4, kv_heads = 2, head_dim = 16, inter = 128, vocab = 256, layers = 2;
};

// Every tensor of a tiny Llama-style checkpoint; `linear_dtype` for the Linear weights.
inline std::vector<FakeTensor> tiny_llama_tensors(const TinyDims& d, const std::string& linear_dtype = "BF16") {
  std::vector<FakeTensor> t;
  t.push_back({"model.embed_tokens.weight", "BF16", {d.vocab, d.hidden}});
  for (std::uint64_t i = 0; i < d.layers; ++i) {
    const std::string p = "model.layers." + std::to_string(i) + ".";
    t.push_back({p + "input_layernorm.weight", "BF16", {d.hidden}});
    t.push_back({p + "self_attn.q_proj.weight", linear_dtype, {d.heads * d.head_dim, d.hidden}});
    t.push_back({p + "self_attn.k_proj.weight", linear_dtype, {d.kv_heads * d.head_dim, d.hidden}});
    t.push_back({p + "self_attn.v_proj.weight", linear_dtype, {d.kv_heads * d.head_dim, d.hidden}});
    t.push_back({p + "self_attn.o_proj.weight", linear_dtype, {d.hidden, d.heads * d.head_dim}});
    t.push_back({p + "post_attention_layernorm.weight", "BF16", {d.hidden}});
    t.push_back({p + "mlp.gate_proj.weight", linear_dtype, {d.inter, d.hidden}});
    t.push_back({p + "mlp.up_proj.weight", linear_dtype, {d.inter, d.hidden}});
    t.push_back({p + "mlp.down_proj.weight", linear_dtype, {d.hidden, d.inter}});
  }
  t.push_back({"model.norm.weight", "BF16", {d.hidden}});
  t.push_back({"lm_head.weight", "BF16", {d.vocab, d.hidden}});
  return t;
}

inline std::string tiny_llama_config(const TinyDims& d) {
  nlohmann::json c = {{"architectures", {"LlamaForCausalLM"}},
                      {"hidden_size", d.hidden},
                      {"num_attention_heads", d.heads},
                      {"num_key_value_heads", d.kv_heads},
                      {"num_hidden_layers", d.layers},
                      {"intermediate_size", d.inter},
                      {"vocab_size", d.vocab},
                      {"tie_word_embeddings", false},
                      {"torch_dtype", "bfloat16"}};
  return c.dump(2);
}

}  // namespace met::model::testing
