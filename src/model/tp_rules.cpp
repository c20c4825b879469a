#include "model/tp_rules.hpp"

#include <map>
#include <utility>

namespace met::model {
namespace {

// (op, role) -> rule; role "*" matches any role of the op.
const std::map<std::pair<std::string, std::string>, TpRule>& rules() {
  static const std::map<std::pair<std::string, std::string>, TpRule> t = {
      // every rank looks up the whole table
      {{"embed", "*"}, TpRule::replicate},
      {{"rmsnorm", "attn_norm"}, TpRule::replicate},
      {{"rmsnorm", "mlp_norm"}, TpRule::replicate},
      {{"rmsnorm", "final_norm"}, TpRule::replicate},
      // Gemma: on the all-reduced o and down outputs
      {{"rmsnorm", "post_attn_norm"}, TpRule::replicate},
      {{"rmsnorm", "post_mlp_norm"}, TpRule::replicate},
      // Gemma's embedding scale, on the whole residual stream
      {{"scale", ""}, TpRule::replicate},
      // Gemma-4's layer scalar, on the whole residual stream
      {{"scale", "layer_scalar"}, TpRule::replicate},
      // over the gathered logits
      {{"softcap", "*"}, TpRule::replicate},
      // Gemma-4 E2B/E4B's per-layer inputs, whole on every rank: the table, its projection from the
      // residual stream, each layer's gate and projection back, their norms and scales (small
      // beside the layer: a per-layer width of 256 against the hidden size), added to the whole
      // residual stream as every rank holds it.
      {{"embed", "per_layer_tok"}, TpRule::replicate},
      {{"scale", "per_layer_tok"}, TpRule::replicate},
      {{"scale", "per_layer_proj"}, TpRule::replicate},
      {{"scale", "per_layer_input"}, TpRule::replicate},
      {{"linear", "per_layer_model_proj"}, TpRule::replicate},
      {{"linear", "per_layer_gate"}, TpRule::replicate},
      {{"linear", "per_layer_proj"}, TpRule::replicate},
      {{"rmsnorm", "per_layer_norm"}, TpRule::replicate},
      {{"rmsnorm", "post_per_layer_norm"}, TpRule::replicate},
      {{"gelu_mul_split", "*"}, TpRule::replicate},
      // per-head norms: the rank's heads, the same weight
      {{"rmsnorm", "q_norm"}, TpRule::heads},
      {{"rmsnorm", "k_norm"}, TpRule::heads},
      // Gemma-4's weightless norm of each KV head's V
      {{"rmsnorm", "v_norm"}, TpRule::heads},
      {{"rope", "*"}, TpRule::heads},
      {{"kv_append", "*"}, TpRule::heads},
      {{"attention", "*"}, TpRule::heads},
      {{"linear", "qkv"}, TpRule::column},
      // a layer that reads another layer's KV (Gemma-4's shared KV)
      {{"linear", "q"}, TpRule::column},
      {{"linear", "gate_up"}, TpRule::column},
      // vocabulary-parallel: logits gathered after it
      {{"linear", "lm_head"}, TpRule::column},
      {{"linear", "o"}, TpRule::row},
      {{"linear", "down"}, TpRule::row},
      {{"silu_mul", "*"}, TpRule::inter_width},
      {{"gelu_mul", "*"}, TpRule::inter_width},
      // every rank routes every row the same way
      {{"moe_router", "*"}, TpRule::replicate},
      // each expert's gate and up rows of the rank's slice
      {{"moe_gate_up", "*"}, TpRule::expert_column},
      // each expert's columns of that slice: fp32 partials
      {{"moe_down", "*"}, TpRule::expert_row},
      // Gemma-4's MoE block beside the dense MLP: the scaled router's parts (replicated with it),
      // the experts' input norm, and the norms of each branch's all-reduced output.
      {{"rmsnorm", "router_norm"}, TpRule::replicate},
      {{"scale", "router_scale"}, TpRule::replicate},
      {{"expert_scale", "*"}, TpRule::replicate},
      {{"rmsnorm", "moe_norm"}, TpRule::replicate},
      {{"rmsnorm", "post_dense_norm"}, TpRule::replicate},
      {{"rmsnorm", "post_moe_norm"}, TpRule::replicate},
      // gpt-oss: the biases of the split projections split with them (q/k/v's by heads, each
      // expert's gate/up by the rank's slice of the intermediate size); those of the row-parallel
      // o and down projections are added once, to the first rank's partial sums; the router's bias
      // is replicated with it; the clamped SwiGLU acts on the rank's slice; the attention sinks
      // are per query head (the attention node's weight, split by its heads rule).
      {{"bias", "qkv"}, TpRule::column},
      {{"bias", "o"}, TpRule::once},
      {{"bias", "router"}, TpRule::replicate},
      {{"bias", "gate_up"}, TpRule::expert_column},
      {{"bias", "down"}, TpRule::once},
      {{"swiglu_clamp", "*"}, TpRule::inter_width},
      // after a row-parallel projection: the all-reduce
      {{"residual", "*"}, TpRule::replicate},
      // over the gathered logits
      {{"argmax", "*"}, TpRule::replicate},
  };
  return t;
}

}  // namespace

const TpRule* tp_rule(const Node& n) {
  const auto& t = rules();
  if (auto it = t.find({n.op, n.role}); it != t.end()) return &it->second;
  if (auto it = t.find({n.op, "*"}); it != t.end()) return &it->second;
  return nullptr;
}

}  // namespace met::model
