// The op table rows. Shapes follow checkpoint layout ([out, in] for linear); params are the
// evaluated circuit expressions of a node, defaults already filled.
#include "model/ops.hpp"

#include <array>

namespace met::model {
namespace {

double p(const Params& ps, const char* key) {
  auto it = ps.find(key);
  return it == ps.end() ? 0.0 : it->second;
}

using Shape = std::vector<double>;

Shape none(const Params&) { return {}; }

const std::vector<OpInfo>& table() {
  static const std::vector<OpInfo> ops = [] {
    std::vector<OpInfo> t;
    auto add = [&](OpInfo o) { t.push_back(std::move(o)); };
    add({"embed", {"vocab", "dim"}, {}, {}, true, false, 1,
         [](const Params& a) { return Shape{p(a, "vocab"), p(a, "dim")}; }, nullptr, nullptr});
    // eps 0: the emitter reads config.json's rms_norm_eps; offset: the weight is stored as a
    // difference from it (Gemma-3's norms scale by 1 + w); round_once 1: the product with the
    // weight in fp32, rounded once (Gemma's norms; offset != 0 implies it), else the normalised
    // value rounds before the weight (Llama); weighted 0: no weight at all (Gemma-4's v_norm).
    OpInfo rmsnorm{"rmsnorm", {"dim"},
                   {{"count", 1, ""}, {"eps", 0, "", true}, {"offset", 0, "", true}, {"round_once", 0, "", true},
                    {"weighted", 1, "", true}},
                   {}, true, false, 1,
                   [](const Params& a) { return p(a, "weighted") != 0 ? Shape{p(a, "dim")} : Shape{}; }, nullptr, nullptr};
    rmsnorm.weight_required = false;  // a weightless norm names none, and says so
    rmsnorm.weight_switch = "weighted";
    add(rmsnorm);
    add({"linear", {"in", "out"}, {},
         {"qkv", "q", "k", "v", "kv", "o", "gate_up", "gate", "up", "down", "lm_head", "q_a", "q_b", "kv_a",
          "kv_b", "in_proj", "out_proj", "shared_gate_up", "shared_down", "per_layer_model_proj", "per_layer_gate",
          "per_layer_proj"},
         true, true, 1, [](const Params& a) { return Shape{p(a, "out"), p(a, "in")}; }, nullptr, nullptr});
    // theta 0: config.json's rope base; scaled 0: a plain rope even where config.json scales it
    // (Gemma-3's local layers).
    add({"rope", {"heads", "kv_heads", "head_dim"}, {{"rotary_dim", 0, "head_dim"}, {"theta", 0, "", true}, {"scaled", 1, "", true}}, {},
         false, false, 1, none, nullptr, nullptr});
    add({"kv_append", {"kv_heads", "head_dim"}, {{"v_head_dim", 0, "head_dim"}}, {}, false, false, 1, none,
         [](const Params& a) { return p(a, "kv_heads") * (p(a, "head_dim") + p(a, "v_head_dim")); }, nullptr});
    OpInfo attention{"attention", {"heads", "kv_heads", "head_dim"},
         {{"v_head_dim", 0, "head_dim"}, {"window", 0, ""}, {"sinks", 0, ""}, {"softcap", 0, ""}, {"scale", 0, "", true}}, {}, true, false,
         1, [](const Params& a) { return p(a, "sinks") != 0 ? Shape{p(a, "heads")} : Shape{}; }, nullptr, nullptr};
    attention.weight_required = false;  // the sinks tensor exists only when sinks != 0
    add(attention);
    add({"kv_append_mla", {"kv_lora", "rope_dim"}, {}, {}, false, false, 1, none,
         [](const Params& a) { return p(a, "kv_lora") + p(a, "rope_dim"); }, nullptr});
    add({"attention_mla", {"heads", "kv_lora", "rope_dim", "nope_dim", "v_dim"}, {}, {}, false, false, 1, none,
         nullptr, nullptr});
    // gelu_mul_split: gelu(gate) * up with up a buffer of its own (Gemma-4's per-layer input).
    for (const char* name : {"residual", "silu_mul", "gelu_mul", "gelu_mul_split", "relu2"}) {
      add({name, {"dim"}, {}, {}, false, false, 1, none, nullptr, nullptr});
    }
    // gpt-oss's gated activation over interleaved (gate, up) columns: gate clamped above at limit,
    // up clamped to [-limit, limit], then (up + 1) * gate * sigmoid(alpha * gate).
    add({"swiglu_clamp", {"dim"}, {{"limit", 7, ""}, {"alpha", 1.702, ""}}, {}, false, false, 1, none, nullptr, nullptr});
    // x + b over the output of the projection (or, for experts, of each routed expert's
    // projection) just before it: b is [dim], or [experts, dim] for a bias per expert.
    add({"bias", {"dim"}, {{"experts", 0, ""}},
         {"qkv", "o", "router", "gate_up", "down"}, true, false, 1,
         [](const Params& a) { return p(a, "experts") > 0 ? Shape{p(a, "experts"), p(a, "dim")} : Shape{p(a, "dim")}; },
         nullptr, nullptr});
    // cap * tanh(x / cap) (the final logit softcap).
    add({"softcap", {"dim", "cap"}, {}, {}, false, false, 1, none, nullptr, nullptr});
    // x * factor (Gemma's embedding scale, sqrt(hidden)); 0 = the circuit gives none. weighted 1:
    // the factor is the node's one-element weight (Gemma-4's layer_scalar).
    // exact 1: the factor applies as an fp32 number (a Python float in transformers), not rounded
    // to bf16 first as the embedding scale is.
    OpInfo scale{"scale", {"dim"}, {{"factor", 0, ""}, {"weighted", 0, "", true}, {"exact", 0, "", true}}, {}, true, false, 1,
                 [](const Params& a) { return p(a, "weighted") != 0 ? Shape{1} : Shape{}; }, nullptr, nullptr};
    scale.weight_required = false;  // only a weighted scale names one
    add(scale);
    // renormalize: the top-k probabilities are divided by their sum (Mixtral always; Qwen3-MoE with
    // norm_topk_prob). scoring: how the router turns logits into routing weights, a code the
    // circuit states and a body's rule requires: 0 softmax over every expert, then the top k
    // (Qwen-MoE, Mixtral, Qwen3-Next); 1 sigmoid scores with a correction bias and grouped top-k,
    // times a routed scaling factor (DeepSeek-V3, Kimi-K2, Nemotron-H); 2 the top k of the logits
    // plus the router's bias, then a softmax over those k (gpt-oss); 3 Gemma-4's router: its input
    // the raw residual through the nodes before it (rmsnorm router_norm with the router's scale
    // vector, scale router_scale by hidden^-1/2), a softmax over every expert, the top k divided by
    // their sum, then times the expert_scale node's per-expert vector.
    add({"moe_router", {"hidden", "experts", "top_k"}, {{"renormalize", 1, ""}, {"scoring", 0, ""}}, {}, true, false, 1,
         [](const Params& a) { return Shape{p(a, "experts"), p(a, "hidden")}; }, nullptr, nullptr});
    // Each routed expert's weight times that expert's entry of a vector [experts] (Gemma-4's
    // router.per_expert_scale), after the router that chose it.
    add({"expert_scale", {"experts"}, {}, {}, true, false, 1, [](const Params& a) { return Shape{p(a, "experts")}; }, nullptr,
         nullptr});
    // layout: how the checkpoint stores the experts. 0: one tensor per expert and projection
    // (`experts.<e>.`, gate rows then up rows; Qwen3-MoE). 1: one tensor over every expert
    // (gpt-oss): bf16 [experts, in, out] (the input dimension first) with gate_up's columns
    // interleaved (gate 2j, up 2j + 1), or MXFP4 `<name>_blocks` U8 [experts, out, in / 32, 16] and
    // `<name>_scales` U8 [experts, out, in / 32]. 2: one bf16 tensor over every expert stored as the
    // weight shape below, [experts, out, in] (Gemma-4's experts.gate_up_proj, gate rows then up
    // rows, and experts.down_proj): the bytes of layout 0's stack. The weight shape below is
    // [experts, out, in] in every layout (model/experts.hpp gives layout 1's stored shapes).
    add({"moe_gate_up", {"hidden", "inter", "experts", "top_k"}, {{"layout", 0, "", true}}, {}, true, true, 1,
         [](const Params& a) { return Shape{p(a, "experts"), 2 * p(a, "inter"), p(a, "hidden")}; }, nullptr, nullptr});
    add({"moe_down", {"hidden", "inter", "experts", "top_k"}, {{"layout", 0, "", true}}, {}, true, true, 1,
         [](const Params& a) { return Shape{p(a, "experts"), p(a, "hidden"), p(a, "inter")}; }, nullptr, nullptr});
    add({"conv1d", {"channels", "kernel"}, {}, {}, true, false, 1,
         [](const Params& a) { return Shape{p(a, "channels"), p(a, "kernel")}; }, nullptr,
         [](const Params& a) { return p(a, "channels") * (p(a, "kernel") - 1); }});
    add({"ssm_scan", {"heads", "head_dim", "state", "groups"}, {}, {}, true, false, /*A, D, dt bias*/ 3,
         [](const Params& a) { return Shape{p(a, "heads")}; }, nullptr,
         [](const Params& a) { return p(a, "heads") * p(a, "head_dim") * p(a, "state"); }});
    add({"gated_delta", {"k_heads", "v_heads", "k_dim", "v_dim"}, {}, {}, true, false, /*A_log, dt bias*/ 2,
         [](const Params& a) { return Shape{p(a, "v_heads")}; }, nullptr,
         [](const Params& a) { return p(a, "v_heads") * p(a, "k_dim") * p(a, "v_dim"); }});
    add({"argmax", {"vocab"}, {}, {}, false, false, 1, none, nullptr, nullptr});
    return t;
  }();
  return ops;
}

}  // namespace

const OpInfo* find_op(std::string_view name) {
  for (const auto& op : table()) {
    if (op.name == name) return &op;
  }
  return nullptr;
}

std::vector<std::string> op_names() {
  std::vector<std::string> out;
  for (const auto& op : table()) out.push_back(op.name);
  return out;
}

std::vector<std::string> op_param_names(const OpInfo& op) {
  std::vector<std::string> out = op.required;
  for (const auto& o : op.optional) out.push_back(o.name);
  return out;
}

void fill_defaults(const OpInfo& op, Params& params) {
  for (const auto& o : op.optional) {
    if (params.count(o.name)) continue;
    params[o.name] = o.same_as.empty() ? o.value : p(params, o.same_as.c_str());
  }
}

bool has_weight(const Node& node) { return !weight_shape(node).empty(); }

std::vector<double> weight_shape(const Node& node) {
  const OpInfo* op = find_op(node.op);
  return op && op->weight_shape ? op->weight_shape(node.params) : std::vector<double>{};
}

double weight_elems(const Node& node) {
  const OpInfo* op = find_op(node.op);
  const auto shape = weight_shape(node);
  if (!op || shape.empty()) return 0;
  double n = 1;
  for (double d : shape) n *= d;
  return n * op->weight_tensors;
}

double kv_elems_per_token(const Node& node) {
  const OpInfo* op = find_op(node.op);
  return op && op->kv_elems ? op->kv_elems(node.params) : 0;
}

double state_elems_per_seq(const Node& node) {
  const OpInfo* op = find_op(node.op);
  return op && op->state_elems ? op->state_elems(node.params) : 0;
}

}  // namespace met::model
