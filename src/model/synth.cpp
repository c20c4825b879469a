// Synthetic checkpoints: the tensor list comes from the circuit instantiated for the config (every
// weight node of every layer, fused nodes split into their checkpoint tensors); values come from
// a counter-based generator keyed by (seed, tensor name, element index). Value ranges keep a tiny
// model's activations and logits informative: linear ~ U(-1/sqrt(in), 1/sqrt(in)), embeddings and
// lm_head ~ U(-2/sqrt(hidden), 2/sqrt(hidden)), norms ~ 1 + U(-0.1, 0.1) (those stored as a
// difference from 1, Gemma-3's, ~ U(-0.1, 0.1): the same effective scale; the q and k norms of
// unscaled scores, Gemma-4's, ~ dim^(-1/4) (1 + U(-0.1, 0.1)); Gemma-4's layer scalars and its
// router's scale vectors as norms, near 1; its projection, whose input is scaled by hidden^(-1/2),
// ~ U(-1, 1), the linear range times sqrt(hidden), so its logits spread as a trained router's do
// rather than leaving the softmax so flat that its bf16 probabilities tie).
#include "model/synth.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <cstring>
#include <optional>
#include <set>
#include <nlohmann/json.hpp>

#include "core/strings.hpp"
#include "model/checkpoint.hpp"
#include "model/experts.hpp"
#include "model/instantiate.hpp"
#include "model/ops.hpp"
#include "model/quant.hpp"
#include "model/safetensors.hpp"
#include "model/safetensors_writer.hpp"

namespace met::model {
namespace {

using json = nlohmann::json;

constexpr std::uint64_t kGolden = 0x9E3779B97F4A7C15ull;   // splitmix64 increment
constexpr std::uint64_t kSeedSalt = 0x6d65742d73796e74ull;  // "met-synt": separates seed 0 from key 0
constexpr float kFp8Max = 448.0f;
constexpr double kNormNoise = 0.1;
constexpr double kOtherRange = 0.1;
constexpr double kEmbedGain = 2.0;
constexpr double kActAmax = 8.0;  // calibrated |activation| and |K|, |V| bound behind static scales
constexpr double kE2m1Max = 6.0;  // largest fp4 e2m1 magnitude
constexpr double kE8m0Bias = 127; // e8m0 scale code of 2^0

std::uint64_t mix64(std::uint64_t z) {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

std::uint64_t fnv1a(const std::string& s) {
  std::uint64_t h = 0xcbf29ce484222325ull;
  for (unsigned char ch : s) {
    h ^= ch;
    h *= 0x100000001b3ull;
  }
  return h;
}

std::uint64_t tensor_key(std::uint64_t seed, const std::string& name) { return mix64(mix64(seed ^ kSeedSalt) ^ fnv1a(name)); }

// Uniform in [-1, 1) from the top 24 bits: exact in float, identical on every platform.
float uniform(std::uint64_t key, std::uint64_t e) {
  const std::uint64_t h = mix64(key + (e + 1) * kGolden);
  constexpr float kStep = 1.0f / 16777216.0f;  // 2^-24
  return static_cast<float>(h >> 40) * kStep * 2.0f - 1.0f;
}

std::string shape_text(const std::vector<std::uint64_t>& s) {
  std::vector<std::string> parts;
  for (auto d : s) parts.push_back(std::to_string(d));
  return "[" + join(parts, ", ") + "]";
}

const NodeTemplate* template_at(const std::vector<NodeTemplate>& ts, const std::string& where) {
  for (const auto& t : ts) {
    if (t.where == where) return &t;
  }
  return nullptr;
}

double param(const Node& n, const char* key) {
  auto it = n.params.find(key);
  return it == n.params.end() ? 0 : it->second;
}

// dim-0 sizes of a fused node's tensors.
Expected<std::vector<std::uint64_t>> split_rows(const Node& node, std::uint64_t rows, std::size_t parts,
                                                const std::vector<Node>& siblings, const std::string& ctx) {
  std::vector<std::uint64_t> out;
  if (node.role == "qkv" && (parts == 2 || parts == 3)) {
    const Node* attn = nullptr;
    for (const auto& s : siblings) {
      if (s.op == "attention") attn = &s;
    }
    if (!attn) return fail(fmt::format("{}: fused qkv node without an attention node to split it by", ctx));
    const auto hd = static_cast<std::uint64_t>(param(*attn, "head_dim"));
    const auto vd = static_cast<std::uint64_t>(param(*attn, "v_head_dim"));
    const auto heads = static_cast<std::uint64_t>(param(*attn, "heads"));
    const auto kv = static_cast<std::uint64_t>(param(*attn, "kv_heads"));
    out = {heads * hd, kv * hd};
    if (parts == 3) out.push_back(kv * vd);
  } else {
    if (rows % parts != 0) return fail(fmt::format("{}: {} rows do not split evenly among {} tensors", ctx, rows, parts));
    out.assign(parts, rows / parts);
  }
  std::uint64_t sum = 0;
  for (auto r : out) sum += r;
  if (sum != rows) {
    return fail(fmt::format("{}: the tensors' rows sum to {}, the node's weight has {}", ctx, sum, rows));
  }
  return out;
}

TensorKind kind_of(const Node& n, const OpInfo& op, const std::vector<Node>& siblings) {
  if (n.op == "embed") return TensorKind::embedding;
  if (n.op == "rmsnorm" && (n.role == "q_norm" || n.role == "k_norm") && param(n, "offset") == 0) {
    for (const auto& s : siblings)
      if (s.op == "attention" && param(s, "scale") == 1) return TensorKind::qk_norm;
  }
  if (n.op == "rmsnorm")
    return n.params.count("offset") && n.params.at("offset") == 1 ? TensorKind::offset_norm : TensorKind::norm;
  if (n.op == "scale") return TensorKind::norm;  // a layer scalar near 1, as a norm weight
  if (n.op == "expert_scale") return TensorKind::norm;  // Gemma-4's per_expert_scale, near 1
  if (n.op == "moe_router" && param(n, "scoring") == 3) return TensorKind::scaled_router;  // Gemma-4's
  if (n.role == "lm_head") return TensorKind::lm_head;
  if (op.quantizable) return TensorKind::linear;
  return TensorKind::other;
}

Expected<std::optional<WeightNodeSpec>> node_spec(const Circuit& circuit, const std::string& arch, const Node& n,
                                                  const NodeTemplate* t, int layer, const std::vector<Node>& siblings) {
  if (!has_weight(n)) return std::optional<WeightNodeSpec>{};
  const std::string ctx = layer >= 0 ? fmt::format("{}: layer {}", n.where, layer) : n.where;
  if (!t) return fail(fmt::format("{}: no node template at this place in the circuit", ctx));
  const OpInfo* op = find_op(n.op);
  WeightNodeSpec s;
  s.layer = layer;
  s.op = n.op;
  s.role = n.role;
  s.where = n.where;
  s.tied = n.tied;
  for (const auto& w : t->weight) s.names.push_back(tensor_name(circuit, arch, w, layer));
  const std::vector<std::string> tensors =
      n.tied ? std::vector<std::string>{tensor_name(circuit, arch, t->tied, layer)} : s.names;
  std::vector<std::uint64_t> shape;
  for (double d : weight_shape(n)) shape.push_back(static_cast<std::uint64_t>(d));
  const TensorKind kind = kind_of(n, *op, siblings);
  if (!n.tied && per_expert(n, s.names)) {
    // One tensor per expert and template name, each expert's stacked like a fused node's.
    const std::size_t parts = s.names.size();
    const int experts = expert_count(n);
    MET_TRY(auto rows, split_rows(n, shape[1], parts, siblings, ctx));
    s.names = expert_tensors(s.names, experts);
    s.quantizable = op->quantizable;
    for (std::size_t k = 0; k < s.names.size(); ++k) s.tensors.push_back({s.names[k], {rows[k % parts], shape[2]}, kind});
    return std::optional<WeightNodeSpec>(std::move(s));
  }
  if (!n.tied && fused_experts(n)) {
    // One tensor over every expert, stored [experts, in, out] (MXFP4 synth writes it as blocks and
    // scales with the output dimension first).
    if (s.names.size() != 1) return fail(fmt::format("{}: an expert node of layout 1 names one tensor, not {}", ctx, s.names.size()));
    std::vector<std::uint64_t> stored;
    for (double d : fused_bf16_shape(n)) stored.push_back(static_cast<std::uint64_t>(d));
    s.quantizable = op->quantizable;
    s.fused_experts = true;
    s.tensors.push_back({s.names[0], stored, kind, stored[1]});
    return std::optional<WeightNodeSpec>(std::move(s));
  }
  if (!n.tied && whole_experts(n)) {
    // One bf16 tensor over every expert, stored as the weight shape [experts, out, in] (Gemma-4).
    if (s.names.size() != 1) return fail(fmt::format("{}: an expert node of layout 2 names one tensor, not {}", ctx, s.names.size()));
    s.tensors.push_back({s.names[0], shape, kind});
    return std::optional<WeightNodeSpec>(std::move(s));
  }
  if (shape.size() > 2) {
    return fail(fmt::format("{}: op '{}' has a weight {} whose template names no per-expert tensors ('{}'); "
                            "synth and weights.json write experts one tensor per expert only",
                            ctx, n.op, shape_text(shape), kExpertZero));
  }
  s.quantizable = op->quantizable && !n.tied && n.role != "lm_head" && shape.size() == 2;
  if (n.tied || tensors.size() == 1 || static_cast<int>(tensors.size()) == op->weight_tensors) {
    for (const auto& name : tensors) s.tensors.push_back({name, shape, n.tied ? TensorKind::embedding : kind});
    return std::optional<WeightNodeSpec>(std::move(s));
  }
  MET_TRY(auto rows, split_rows(n, shape[0], tensors.size(), siblings, ctx));
  for (std::size_t k = 0; k < tensors.size(); ++k) {
    auto part = shape;
    part[0] = rows[k];
    // A tensor a fused node reads twice (Gemma-4's k_proj standing in for v_proj) is written once.
    const auto again =
        std::find_if(s.tensors.begin(), s.tensors.end(), [&](const auto& have) { return have.name == tensors[k]; });
    if (again != s.tensors.end()) {
      if (again->shape != part)
        return fail(fmt::format("{}: tensor '{}' is read twice with shapes {} and {}", ctx, tensors[k], shape_text(again->shape),
                                shape_text(part)));
      continue;
    }
    s.tensors.push_back({tensors[k], part, kind});
  }
  return std::optional<WeightNodeSpec>(std::move(s));
}

std::uint64_t bytes_of(const std::string& dtype, const std::vector<std::uint64_t>& shape) {
  std::uint64_t n = 1;
  for (auto d : shape) n *= d;
  return n * static_cast<std::uint64_t>(dtype_bits(dtype).value_or(8)) / 8;
}

// A tensor's values are offset + gain * u, u ~ U(-1, 1); fp8 codes are round(448 u).
struct Affine {
  double offset = 0, gain = 0;
};

Affine affine_of(const SynthTensor& t) {
  const double fan = static_cast<double>(std::max<std::uint64_t>(t.fan_in, 1));
  switch (t.kind) {
    case TensorKind::embedding:
    case TensorKind::lm_head: return {0, kEmbedGain / std::sqrt(fan)};
    case TensorKind::linear: return {0, 1 / std::sqrt(fan)};
    case TensorKind::scaled_router: return {0, 1};
    case TensorKind::norm: return {1, kNormNoise};
    case TensorKind::offset_norm: return {0, kNormNoise};
    case TensorKind::qk_norm: {
      const double c = std::pow(fan, -0.25);
      return {c, kNormNoise * c};
    }
    case TensorKind::other: return {0, kOtherRange};
    case TensorKind::mxfp4_blocks: return {0, 1};
    case TensorKind::mxfp4_scales:
      // e8m0 codes around 2^e with 6 * 2^e (the largest e2m1 value) near 1 / sqrt(in), one step
      // either way: the dequantised weights get the bf16 synth's range.
      return {std::round(std::log2(1 / std::sqrt(fan) / kE2m1Max)) + kE8m0Bias, 1};
    case TensorKind::scale: {
      // value = fp8 * scale with fp8 ~ U(-448, 448): scale ~ (1/sqrt(in)) / 448, varied by 25% per block.
      const double base = 1 / std::sqrt(fan) / kFp8Max;
      return {base, 0.25 * base};
    }
    case TensorKind::input_scale:
    case TensorKind::kv_scale:
      // amax / 448 as modelopt calibrates it, for activations and K/V of magnitude up to ~kActAmax.
      return {kActAmax / kFp8Max, 0.25 * kActAmax / kFp8Max};
  }
  return {};
}

enum class Elem { bf16, fp8, f32, fp4_pair, e8m0 };

Elem elem_of(const SynthTensor& t) {
  if (t.kind == TensorKind::mxfp4_blocks) return Elem::fp4_pair;
  if (t.kind == TensorKind::mxfp4_scales) return Elem::e8m0;
  return t.dtype == "F8_E4M3" ? Elem::fp8 : t.dtype == "F32" ? Elem::f32 : Elem::bf16;
}

// One element's bytes (little-endian) into out.
void element(Elem dtype, const Affine& f, std::uint64_t key, std::uint64_t e, std::array<std::byte, 4>& out) {
  const float u = uniform(key, e);
  if (dtype == Elem::fp4_pair) {  // two uniform e2m1 codes
    out[0] = static_cast<std::byte>(static_cast<std::uint8_t>(std::min(255.0f, std::floor((u + 1.0f) * 128.0f))));
    return;
  }
  if (dtype == Elem::e8m0) {  // f.offset, one code up or down a third of the time each
    const double step = u < -1.0f / 3.0f ? -1 : u >= 1.0f / 3.0f ? 1 : 0;
    out[0] = static_cast<std::byte>(static_cast<std::uint8_t>(std::clamp(f.offset + step, 1.0, 254.0)));
    return;
  }
  if (dtype == Elem::fp8) {
    out[0] = static_cast<std::byte>(f32_to_fp8_e4m3(u * kFp8Max));
    return;
  }
  const auto v = static_cast<float>(f.offset + f.gain * static_cast<double>(u));
  if (dtype == Elem::f32) {
    const auto bits = std::bit_cast<std::uint32_t>(v);
    for (std::size_t k = 0; k < 4; ++k) out[k] = static_cast<std::byte>((bits >> (8 * k)) & 0xffu);
    return;
  }
  const std::uint16_t b = f32_to_bf16(v);
  out[0] = static_cast<std::byte>(b & 0xffu);
  out[1] = static_cast<std::byte>(b >> 8);
}

std::size_t element_size(const std::string& dtype) {
  if (dtype == "F8_E4M3" || dtype == "U8") return 1;
  if (dtype == "F32") return 4;
  return 2;
}

const char* json_type(const nlohmann::ordered_json& j) {
  if (j.is_object()) return "an object";
  if (j.is_array()) return "an array";
  if (j.is_string()) return "a string";
  if (j.is_null()) return "null";
  return "a scalar";
}

}  // namespace

std::uint16_t f32_to_bf16(float f) {
  std::uint32_t bits = std::bit_cast<std::uint32_t>(f);
  if (std::isnan(f)) return static_cast<std::uint16_t>((bits >> 16) | 0x40u);  // quiet, sign kept
  bits += 0x7fffu + ((bits >> 16) & 1u);
  return static_cast<std::uint16_t>(bits >> 16);
}

float fp8_e4m3_value(std::uint8_t v) {
  const int exp = (v >> 3) & 0xf;
  const int man = v & 0x7;
  if (exp == 0xf && man == 0x7) return std::nanf("");
  const float mag = exp == 0 ? std::ldexp(static_cast<float>(man), -9) : std::ldexp(1.0f + static_cast<float>(man) / 8.0f, exp - 7);
  return (v & 0x80) ? -mag : mag;
}

std::uint8_t f32_to_fp8_e4m3(float f) {
  // Magnitudes of codes 0..126 ascending (127 is NaN); nearest, ties to the even code.
  static const std::array<float, 127> kMags = [] {
    std::array<float, 127> m{};
    for (int c = 0; c < 127; ++c) m[static_cast<std::size_t>(c)] = fp8_e4m3_value(static_cast<std::uint8_t>(c));
    return m;
  }();
  if (std::isnan(f)) return 0x7f;
  const std::uint8_t sign = std::signbit(f) ? 0x80 : 0x00;
  const float a = std::fabs(f);
  std::uint8_t code = 126;
  if (a < kMags[126]) {
    const auto it = std::lower_bound(kMags.begin(), kMags.end(), a);
    const auto hi = static_cast<std::uint8_t>(it - kMags.begin());
    if (kMags[hi] == a || hi == 0) {
      code = hi;
    } else {
      const auto lo = static_cast<std::uint8_t>(hi - 1);
      const float dlo = a - kMags[lo], dhi = kMags[hi] - a;
      code = dlo < dhi ? lo : dhi < dlo ? hi : ((lo & 1) == 0 ? lo : hi);
    }
  }
  return code == 0 ? sign : static_cast<std::uint8_t>(sign | code);
}

Expected<std::vector<WeightNodeSpec>> weight_nodes(const Circuit& circuit, const ModelGraph& graph) {
  std::vector<WeightNodeSpec> out;
  auto add_list = [&](const std::vector<Node>& nodes, const std::vector<NodeTemplate>& ts, int layer) -> Expected<void> {
    for (const auto& n : nodes) {
      MET_TRY(auto s, node_spec(circuit, graph.architecture, n, template_at(ts, n.where), layer, nodes));
      if (s) out.push_back(std::move(*s));
    }
    return {};
  };
  MET_CHECK(add_list(graph.pre, circuit.pre, -1));
  for (std::size_t i = 0; i < graph.layer_kinds.size(); ++i) {
    const LayerGroup& g = graph.kinds[static_cast<std::size_t>(graph.layer_kinds[i])];
    auto it = circuit.kinds.find(g.kind);
    if (it == circuit.kinds.end()) return fail(fmt::format("{}: layer {}: no kind '{}'", circuit.file, i, g.kind));
    MET_CHECK(add_list(g.nodes, it->second, static_cast<int>(i)));
  }
  MET_CHECK(add_list(graph.post, circuit.post, -1));
  return out;
}

std::optional<SynthDtype> parse_synth_dtype(const std::string& name) {
  if (name == "bf16") return SynthDtype{Format::bf16, Fp8Layout::block128};
  if (name == "fp8-block128" || name == "fp8-e4m3") return SynthDtype{Format::fp8_e4m3, Fp8Layout::block128};
  if (name == "fp8-modelopt") return SynthDtype{Format::fp8_e4m3, Fp8Layout::modelopt};
  if (name == "mxfp4") return SynthDtype{Format::mxfp4, Fp8Layout::block128};
  return std::nullopt;
}

Expected<SynthPlan> plan_synth(const std::map<std::string, Circuit>& circuits, const std::string& config_text,
                               const std::string& display, const SynthOptions& options) {
  if (options.dtype != Format::bf16 && options.dtype != Format::fp8_e4m3 && options.dtype != Format::mxfp4) {
    return fail(fmt::format("synth: dtype '{}' is not written (known: bf16, fp8-e4m3, mxfp4)", format_name(options.dtype)));
  }
  nlohmann::ordered_json config;  // keeps the input's key order in the written config.json
  try {
    config = nlohmann::ordered_json::parse(config_text);
  } catch (const json::exception& e) {
    return fail(fmt::format("{}: invalid json: {}", display, e.what()));
  }
  if (!config.is_object()) return fail(fmt::format("{}: expected a json object, found {}", display, json_type(config)));
  std::string arch;
  if (config.contains("architectures") && config["architectures"].is_array() && !config["architectures"].empty() &&
      config["architectures"][0].is_string()) {
    arch = config["architectures"][0].get<std::string>();
  }
  MET_TRY(const Circuit* circuit, circuit_for(circuits, arch, display));

  config["torch_dtype"] = "bfloat16";
  if (config.contains("dtype")) config["dtype"] = "bfloat16";
  config.erase("quantization_config");
  const bool modelopt = options.dtype == Format::fp8_e4m3 && options.layout == Fp8Layout::modelopt;
  if (options.dtype == Format::fp8_e4m3 && !modelopt) {
    config["quantization_config"] = {{"quant_method", "fp8"},
                                     {"fmt", "e4m3"},
                                     {"activation_scheme", "dynamic"},
                                     {"weight_block_size", {kSynthBlock, kSynthBlock}}};
  }
  if (options.dtype == Format::mxfp4) {
    // gpt-oss's released form: the experts MXFP4, everything these modules hold bf16.
    config["quantization_config"] = {
        {"modules_to_not_convert", {"model.layers.*.self_attn", "model.layers.*.mlp.router", "model.embed_tokens", "lm_head"}},
        {"quant_method", "mxfp4"}};
  }
  SynthPlan plan;
  plan.circuit = circuit->id;
  plan.options = options;
  plan.config_json = config.dump(2) + "\n";
  if (modelopt) {
    // nvidia/Llama-3.1-70B-Instruct-FP8's sidecar (modelopt 0.23.0); its config.json has no
    // quantization_config.
    nlohmann::ordered_json hq;
    hq["producer"] = {{"name", "modelopt"}, {"version", "0.23.0"}};
    hq["quantization"] = {{"quant_algo", "FP8"}, {"kv_cache_quant_algo", "FP8"}, {"exclude_modules", {"lm_head"}}};
    plan.hf_quant_config_json = hq.dump(4);
  }

  // Instantiate from the config alone (recipe bf16): the graph fixes the tensor list.
  MemCheckpoint src("synth", {{"config.json", plan.config_json}});
  MET_TRY(auto graph, instantiate(*circuit, src, FormatChoice::recipe({}, Format::bf16), "synth"));
  MET_TRY(auto nodes, weight_nodes(*circuit, graph));
  std::set<std::string> seen;
  for (const auto& n : nodes) {
    if (n.tied) continue;  // stored once, under the embedding
    for (const auto& w : n.tensors) {
      if (!seen.insert(w.name).second) {
        return fail(fmt::format("{}: layer {}: tensor '{}' is named twice", n.where, n.layer, w.name));
      }
      SynthTensor t;
      t.name = w.name;
      t.shape = w.shape;
      t.kind = w.kind;
      t.fan_in = w.fan_in != 0 ? w.fan_in : w.shape.empty() ? 1 : w.shape.back();
      if (options.dtype == Format::mxfp4 && n.fused_experts) {
        // [experts, in, out] -> blocks [experts, out, in / 32, 16] and scales [experts, out, in / 32].
        const auto group = static_cast<std::uint64_t>(kMxfp4Group);
        if (w.shape.size() != 3 || w.shape[1] % group != 0) {
          return fail(fmt::format("{}: layer {}: tensor '{}' {}: MXFP4 needs an input size divisible by {}", n.where, n.layer,
                                  w.name, shape_text(w.shape), group));
        }
        for (const bool blocks : {true, false}) {
          SynthTensor q = t;
          q.name = w.name + std::string(blocks ? kBlocksSuffix : kScalesSuffix);
          q.dtype = "U8";
          q.shape = {w.shape[0], w.shape[2], w.shape[1] / group};
          if (blocks) q.shape.push_back(group / 2);
          q.kind = blocks ? TensorKind::mxfp4_blocks : TensorKind::mxfp4_scales;
          q.bytes = bytes_of(q.dtype, q.shape);
          plan.tensors.push_back(q);
        }
        continue;
      }
      const bool fp8 = options.dtype == Format::fp8_e4m3 && n.quantizable;
      if (fp8 && modelopt && !std::string_view(w.name).ends_with(".weight")) {
        return fail(fmt::format("{}: layer {}: fp8-modelopt names scales after '<module>.weight'; tensor '{}' is not one",
                                n.where, n.layer, w.name));
      }
      t.dtype = fp8 ? "F8_E4M3" : "BF16";
      t.bytes = bytes_of(t.dtype, t.shape);
      plan.tensors.push_back(t);
      if (!fp8) continue;
      auto add_f32 = [&](const std::string& name, std::vector<std::uint64_t> shape, TensorKind kind) {
        SynthTensor s;
        s.name = name;
        s.dtype = "F32";
        s.shape = std::move(shape);
        s.kind = kind;
        s.fan_in = t.fan_in;
        s.bytes = bytes_of(s.dtype, s.shape);
        plan.tensors.push_back(s);
      };
      if (!modelopt) {
        add_f32(w.name + "_scale_inv", {(w.shape[0] + kSynthBlock - 1) / kSynthBlock, (w.shape[1] + kSynthBlock - 1) / kSynthBlock},
                TensorKind::scale);
        continue;
      }
      // "<module>.weight" -> "<module>.weight_scale", "<module>.input_scale" (F32 scalars).
      const std::string module = w.name.substr(0, w.name.size() - std::string_view(".weight").size());
      add_f32(w.name + "_scale", {}, TensorKind::scale);
      add_f32(module + ".input_scale", {}, TensorKind::input_scale);
      if (std::string_view(module).ends_with(".self_attn.k_proj")) add_f32(module + ".k_scale", {}, TensorKind::kv_scale);
      if (std::string_view(module).ends_with(".self_attn.v_proj")) add_f32(module + ".v_scale", {}, TensorKind::kv_scale);
    }
  }
  if (options.dtype == Format::mxfp4 &&
      std::none_of(nodes.begin(), nodes.end(), [](const WeightNodeSpec& n) { return n.fused_experts; })) {
    return fail(fmt::format("{}: synth writes MXFP4 for fused expert tensors (gpt-oss) only; circuit '{}' has none", display,
                            circuit->id));
  }
  for (const auto& t : plan.tensors) plan.total_bytes += t.bytes;
  return plan;
}

void synth_bytes(const SynthPlan& plan, std::size_t t, std::uint64_t begin, std::span<std::byte> out) {
  const SynthTensor& tensor = plan.tensors[t];
  const std::uint64_t key = tensor_key(plan.options.seed, tensor.name);
  const std::size_t esz = element_size(tensor.dtype);
  const Affine f = affine_of(tensor);
  const Elem kind = elem_of(tensor);
  std::array<std::byte, 4> buf{};
  std::uint64_t pos = begin;
  const std::uint64_t end = begin + out.size();
  std::byte* dst = out.data();
  // Ragged head and tail elements go through buf; whole elements are written directly.
  auto partial = [&](std::uint64_t upto) {
    const std::uint64_t e = pos / esz;
    const std::size_t skip = static_cast<std::size_t>(pos % esz);
    element(kind, f, key, e, buf);
    const std::size_t n = static_cast<std::size_t>(std::min<std::uint64_t>(esz - skip, upto - pos));
    std::memcpy(dst, buf.data() + skip, n);
    dst += n;
    pos += n;
  };
  if (pos % esz != 0 && pos < end) partial(end);
  const std::uint64_t whole_end = end - end % esz;
  for (std::uint64_t e = pos / esz; pos + esz <= whole_end && pos < end; ++e) {
    element(kind, f, key, e, buf);
    std::memcpy(dst, buf.data(), esz);
    dst += esz;
    pos += esz;
  }
  if (pos < end) partial(end);
}

Expected<std::vector<SynthShard>> shard_synth(const SynthPlan& plan, std::uint64_t shard_bytes) {
  if (shard_bytes == 0) return fail("synth: --shard-bytes must be positive");
  std::vector<SynthShard> shards;
  std::uint64_t cur = 0;
  for (std::size_t k = 0; k < plan.tensors.size(); ++k) {
    const std::uint64_t b = plan.tensors[k].bytes;
    if (shards.empty() || (!shards.back().tensors.empty() && cur + b > shard_bytes)) {
      shards.emplace_back();
      cur = 0;
    }
    shards.back().tensors.push_back(k);
    cur += b;
  }
  if (shards.empty()) shards.emplace_back();
  const std::size_t n = shards.size();
  for (std::size_t s = 0; s < n; ++s) {
    shards[s].file = n == 1 ? std::string(kSingleFile) : fmt::format("model-{:05d}-of-{:05d}.safetensors", s + 1, n);
    std::vector<HeaderTensor> hs;
    for (auto k : shards[s].tensors) hs.push_back({plan.tensors[k].name, plan.tensors[k].dtype, plan.tensors[k].shape});
    MET_TRY(auto layout, write_safetensors_header(hs));
    shards[s].header = std::move(layout.bytes);
    shards[s].data_bytes = layout.data_bytes;
  }
  return shards;
}

std::string index_json(const SynthPlan& plan, const std::vector<SynthShard>& shards) {
  nlohmann::ordered_json j;
  j["metadata"] = {{"total_size", plan.total_bytes}};
  std::map<std::string, std::string> map;
  for (const auto& s : shards) {
    for (auto k : s.tensors) map[plan.tensors[k].name] = s.file;
  }
  nlohmann::ordered_json wm = nlohmann::ordered_json::object();
  for (const auto& [name, file] : map) wm[name] = file;
  j["weight_map"] = std::move(wm);
  return j.dump(2) + "\n";
}

Expected<std::map<std::string, std::string>> synth_files(const SynthPlan& plan, std::uint64_t shard_bytes) {
  MET_TRY(auto shards, shard_synth(plan, shard_bytes));
  std::map<std::string, std::string> files;
  files["config.json"] = plan.config_json;
  if (!plan.hf_quant_config_json.empty()) files[kHfQuantFile] = plan.hf_quant_config_json;
  for (const auto& s : shards) {
    std::string bytes = s.header;
    for (auto k : s.tensors) {
      const std::size_t at = bytes.size();
      bytes.resize(at + plan.tensors[k].bytes);
      synth_bytes(plan, k, 0, std::span<std::byte>(reinterpret_cast<std::byte*>(bytes.data() + at), plan.tensors[k].bytes));
    }
    files[s.file] = std::move(bytes);
  }
  if (shards.size() > 1) files[kIndexFile] = index_json(plan, shards);
  return files;
}

}  // namespace met::model
