// Instantiation: real configs through dense-gqa give the sizes recomputed here from the config
// numbers; config mutations, circuit choice, and declared formats from quantization configs and
// safetensors headers (tiny checkpoints written in memory) each fail or pass as they must.
#include <doctest/doctest.h>

#include <algorithm>

#include "model/instantiate.hpp"
#include "model/ops.hpp"
#include "model/safetensors_writer.hpp"
#include "tree/disk_tree.hpp"

using namespace met;
using namespace met::model;
using namespace met::model::testing;

namespace {
const DiskTree& real_tree() {
  static DiskTree tree(std::string(MET_SOURCE_DIR) + "/kernels", "kernels/");
  return tree;
}
const std::map<std::string, Circuit>& circuits() {
  static auto all = [] {
    auto c = load_circuit(real_tree(), "circuits/dense-gqa.toml");
    REQUIRE_MESSAGE(c.ok(), c.error().message);
    std::map<std::string, Circuit> m;
    m.emplace(c->id, *c);
    return m;
  }();
  return all;
}
std::string config_text(const std::string& dir) {
  auto t = real_tree().read("circuits/configs/" + dir + "/config.json");
  REQUIRE(t.ok());
  return *t;
}
Expected<ModelGraph> from_config(const std::string& dir_name, const std::string& config,
                                 std::map<std::string, std::string> extra = {}) {
  extra["config.json"] = config;
  MemCheckpoint src(dir_name, std::move(extra));
  return instantiate_checkpoint(real_tree(), circuits(), src);
}
std::string error_of(const Expected<ModelGraph>& g) { return g ? std::string("no error") : g.error().message; }

double stored_weight_elems(const ModelGraph& g) {
  double sum = 0;
  for (const auto& n : g.pre) sum += n.tied ? 0 : weight_elems(n);
  for (const auto& k : g.kinds)
    for (const auto& n : k.nodes) sum += static_cast<double>(k.layers.size()) * weight_elems(n);
  for (const auto& n : g.post) sum += n.tied ? 0 : weight_elems(n);
  return sum;
}
double kv_elems(const ModelGraph& g) {
  double sum = 0;
  for (const auto& k : g.kinds)
    for (const auto& n : k.nodes) sum += static_cast<double>(k.layers.size()) * kv_elems_per_token(n);
  return sum;
}
const Node* find_node(const std::vector<Node>& nodes, const std::string& role) {
  for (const auto& n : nodes)
    if (n.role == role || (role.empty() && n.op == "embed")) return &n;
  return nullptr;
}
std::string replace(std::string s, const std::string& from, const std::string& to) {
  const auto at = s.find(from);
  REQUIRE_MESSAGE(at != std::string::npos, from);
  return s.replace(at, from.size(), to);
}
}  // namespace

TEST_CASE("llama-3.1-8b-instruct: bf16 weights are 16060522496 bytes and KV is 131072 bytes per token") {
  auto instances = load_instances(real_tree());
  REQUIRE(instances.ok());
  auto g = instantiate_instance(real_tree(), circuits(), instances->at("llama-3.1-8b-instruct"), /*declared=*/false);
  REQUIRE_MESSAGE(g.ok(), g.error().message);
  // From config.json: hidden 4096, layers 32, heads 32, kv heads 8, head_dim 4096/32, inter 14336, vocab 128256.
  const double hidden = 4096, layers = 32, heads = 32, kv = 8, hd = hidden / heads, inter = 14336, vocab = 128256;
  const double per_layer = hidden                       // input_layernorm
                           + (heads + 2 * kv) * hd * hidden  // q, k, v
                           + hidden * heads * hd         // o
                           + hidden                      // post_attention_layernorm
                           + 2 * inter * hidden          // gate, up
                           + inter * hidden;             // down
  const double elems = vocab * hidden + layers * per_layer + hidden + vocab * hidden;  // embed, layers, norm, lm_head
  CHECK(elems * 2 == 16060522496.0);
  CHECK(stored_weight_elems(*g) * 2 == elems * 2);
  CHECK(kv_elems(*g) * format_bytes(g->kv) == layers * kv * (hd + hd) * 2);
  CHECK(kv_elems(*g) * format_bytes(g->kv) == 131072);
  CHECK(g->kinds.size() == 1);
  CHECK(g->kinds[0].layers.size() == 32);
  CHECK(g->layer_kinds == std::vector<int>(32, 0));
  CHECK(g->formats_basis == "recipe");
  CHECK_FALSE(g->tied_embeddings);
  CHECK(find_node(g->kinds[0].nodes, "q_norm") == nullptr);
  const Node* qkv = find_node(g->kinds[0].nodes, "qkv");
  REQUIRE(qkv);
  CHECK(qkv->weight == "model.layers.0.self_attn.q_proj.weight");
  CHECK(qkv->weights.size() == 3);
  CHECK(qkv->params.at("out") == 6144);
  CHECK(*qkv->weight_format == Format::bf16);
  CHECK(qkv->format_source == "recipe");
}

TEST_CASE("qwen3-8b has per-head q and k norms (count = heads, kv_heads) that llama lacks") {
  auto instances = load_instances(real_tree());
  REQUIRE(instances.ok());
  auto g = instantiate_instance(real_tree(), circuits(), instances->at("qwen3-8b"), false);
  REQUIRE_MESSAGE(g.ok(), g.error().message);
  const Node* q = find_node(g->kinds[0].nodes, "q_norm");
  const Node* k = find_node(g->kinds[0].nodes, "k_norm");
  REQUIRE(q);
  REQUIRE(k);
  CHECK(q->params.at("count") == 32);
  CHECK(q->params.at("dim") == 128);
  CHECK(k->params.at("count") == 8);
  CHECK(q->weight == "model.layers.0.self_attn.q_norm.weight");
  CHECK(g->kinds[0].layers.size() == 36);
  CHECK(g->params.at("window") == 0);  // use_sliding_window false
}

TEST_CASE("mistral: a null sliding_window counts as absent and the window defaults to 0") {
  auto g = from_config("mistralai--Mistral-7B-Instruct-v0.3", config_text("mistralai--Mistral-7B-Instruct-v0.3"));
  REQUIRE_MESSAGE(g.ok(), g.error().message);
  CHECK(g->params.at("window") == 0);
  CHECK(g->id == "mistralai--mistral-7b-instruct-v0.3");
  CHECK(g->architecture == "MistralForCausalLM");
}

TEST_CASE("llama-3.2-1b ties lm_head to the embedding: same tensor, stored once") {
  auto g = from_config("meta-llama--Llama-3.2-1B-Instruct", config_text("meta-llama--Llama-3.2-1B-Instruct"));
  REQUIRE_MESSAGE(g.ok(), g.error().message);
  CHECK(g->tied_embeddings);
  const Node* head = find_node(g->post, "lm_head");
  REQUIRE(head);
  CHECK(head->tied);
  CHECK(head->weight == "model.embed_tokens.weight");
}

TEST_CASE("config mutation: a missing field names the key and the circuit parameter") {
  const std::string cfg = replace(config_text("meta-llama--Llama-3.1-8B-Instruct"), "\"hidden_size\": 4096,", "");
  CHECK(error_of(from_config("x", cfg)) ==
        "checkpoints/x/config.json: missing 'hidden_size' (circuit 'dense-gqa' parameter 'hidden')");
}

TEST_CASE("config mutation: a wrong type is refused, not coerced") {
  const std::string cfg =
      replace(config_text("meta-llama--Llama-3.1-8B-Instruct"), "\"hidden_size\": 4096", "\"hidden_size\": \"4096\"");
  CHECK(error_of(from_config("x", cfg)) ==
        "checkpoints/x/config.json: 'hidden_size' is a string, expected a number (circuit 'dense-gqa' parameter 'hidden')");
}

TEST_CASE("config mutation: a null field without a default is missing, and says it is null") {
  const std::string cfg =
      replace(config_text("meta-llama--Llama-3.1-8B-Instruct"), "\"intermediate_size\": 14336", "\"intermediate_size\": null");
  CHECK(error_of(from_config("x", cfg)) ==
        "checkpoints/x/config.json: missing 'intermediate_size' ('intermediate_size' is null) (circuit 'dense-gqa' "
        "parameter 'inter')");
}

TEST_CASE("config mutation: a null field with a default takes the default") {
  const std::string cfg = replace(config_text("meta-llama--Llama-3.1-8B-Instruct"), "\"num_key_value_heads\": 8",
                                  "\"num_key_value_heads\": null");
  auto g = from_config("x", cfg);
  REQUIRE_MESSAGE(g.ok(), g.error().message);
  CHECK(g->params.at("kv_heads") == 32);
}

TEST_CASE("config mutation: booleans are 1 and 0") {
  const std::string cfg = replace(config_text("meta-llama--Llama-3.1-8B-Instruct"), "\"tie_word_embeddings\": false",
                                  "\"tie_word_embeddings\": true");
  auto g = from_config("x", cfg);
  REQUIRE(g.ok());
  CHECK(g->params.at("tie_word_embeddings") == 1);
  CHECK(g->tied_embeddings);
}

TEST_CASE("an architecture no circuit claims is refused with the known ones") {
  const std::string cfg =
      replace(config_text("meta-llama--Llama-3.1-8B-Instruct"), "LlamaForCausalLM", "FalconForCausalLM");
  CHECK(error_of(from_config("x", cfg)) ==
        "checkpoints/x/config.json: architecture 'FalconForCausalLM' has no circuit (known: LlamaForCausalLM, "
        "MistralForCausalLM, Qwen3ForCausalLM)");
}

TEST_CASE("config.json that is not json, or not an object, is refused") {
  CHECK(error_of(from_config("x", "{\"a\": ")).rfind("checkpoints/x/config.json: invalid json:", 0) == 0);
  CHECK(error_of(from_config("x", "[1]")) == "checkpoints/x/config.json: expected a json object, found an array");
}

TEST_CASE("a layer count that is not a whole positive number is refused") {
  const std::string cfg =
      replace(config_text("meta-llama--Llama-3.1-8B-Instruct"), "\"num_hidden_layers\": 32", "\"num_hidden_layers\": 0");
  CHECK(error_of(from_config("x", cfg)).find("layer count 'layers' = 0 is not a whole number") != std::string::npos);
}

// ---- declared formats ----

TEST_CASE("declared, no headers: Qwen3-8B-FP8 block fp8 puts Linear weights in fp8, norms, embed and lm_head in bf16") {
  auto g = from_config("Qwen--Qwen3-8B-FP8", config_text("Qwen--Qwen3-8B-FP8"));
  REQUIRE_MESSAGE(g.ok(), g.error().message);
  CHECK(g->formats_basis == "declared");
  const auto& nodes = g->kinds[0].nodes;
  CHECK(*find_node(nodes, "qkv")->weight_format == Format::fp8_e4m3);
  CHECK(find_node(nodes, "qkv")->format_source == "config.json quantization_config");
  CHECK(*find_node(nodes, "attn_norm")->weight_format == Format::bf16);
  CHECK(*find_node(g->pre, "")->weight_format == Format::bf16);
  CHECK(*find_node(g->post, "lm_head")->weight_format == Format::bf16);
  CHECK(g->kv == Format::bf16);
}

TEST_CASE("declared: modelopt hf_quant_config.json FP8 with fp8 KV, lm_head excluded") {
  auto tree_cfg = [](const std::string& f) {
    auto t = real_tree().read("circuits/configs/nvidia--Llama-3.1-70B-Instruct-FP8/" + f);
    REQUIRE(t.ok());
    return *t;
  };
  auto g = from_config("nvidia--Llama-3.1-70B-Instruct-FP8", tree_cfg("config.json"),
                       {{"hf_quant_config.json", tree_cfg("hf_quant_config.json")}});
  REQUIRE_MESSAGE(g.ok(), g.error().message);
  CHECK(g->kv == Format::fp8_e4m3);
  CHECK(*find_node(g->kinds[0].nodes, "down")->weight_format == Format::fp8_e4m3);
  CHECK(find_node(g->kinds[0].nodes, "down")->format_source == "hf_quant_config.json");
  CHECK(*find_node(g->post, "lm_head")->weight_format == Format::bf16);
}

TEST_CASE("declared: an unsupported quant_method is an error, never a silent bf16") {
  std::string cfg = tiny_llama_config({});
  cfg.insert(1, "\"quantization_config\": {\"quant_method\": \"awq\"},");
  CHECK(error_of(from_config("x", cfg)) ==
        "checkpoints/x/config.json: quantization_config: unsupported quant_method 'awq' (known: compressed-tensors, "
        "fp8, modelopt, mxfp4)");
}

TEST_CASE("declared: module exclusions apply per layer, and a kind whose layers differ splits into groups") {
  std::string cfg = tiny_llama_config({});
  cfg.insert(1, "\"quantization_config\": {\"quant_method\": \"fp8\", \"modules_to_not_convert\": "
                "[\"model.layers.1.mlp\"]},");
  auto g = from_config("x", cfg);
  REQUIRE_MESSAGE(g.ok(), g.error().message);
  REQUIRE(g->kinds.size() == 2);
  CHECK(g->kinds[0].kind == "full");
  CHECK(g->kinds[1].kind == "full");
  CHECK(g->layer_kinds == std::vector<int>{0, 1});
  CHECK(*find_node(g->kinds[0].nodes, "down")->weight_format == Format::fp8_e4m3);
  CHECK(*find_node(g->kinds[1].nodes, "down")->weight_format == Format::bf16);
  CHECK(*find_node(g->kinds[1].nodes, "qkv")->weight_format == Format::fp8_e4m3);
}

TEST_CASE("declared with headers: every weight's format comes from its tensor's dtype") {
  const TinyDims d;
  auto g = from_config("tiny", tiny_llama_config(d), {{"model.safetensors", safetensors(tiny_llama_tensors(d))}});
  REQUIRE_MESSAGE(g.ok(), g.error().message);
  const Node* qkv = find_node(g->kinds[0].nodes, "qkv");
  CHECK(*qkv->weight_format == Format::bf16);
  CHECK(qkv->format_source == "safetensors header");
  CHECK(g->kinds.size() == 1);
}

TEST_CASE("declared with headers: F8_E4M3 Linear tensors under an fp8 config are fp8-e4m3") {
  const TinyDims d;
  std::string cfg = tiny_llama_config(d);
  cfg.insert(1, "\"quantization_config\": {\"quant_method\": \"fp8\", \"fmt\": \"e4m3\", \"weight_block_size\": [128, 128]},");
  auto g = from_config("tiny", cfg, {{"model.safetensors", safetensors(tiny_llama_tensors(d, "F8_E4M3"))}});
  REQUIRE_MESSAGE(g.ok(), g.error().message);
  CHECK(*find_node(g->kinds[0].nodes, "gate_up")->weight_format == Format::fp8_e4m3);
  CHECK(*find_node(g->kinds[0].nodes, "mlp_norm")->weight_format == Format::bf16);
}

TEST_CASE("declared with headers: packed U8 under an NVFP4 config is nvfp4, shapes checked two per byte") {
  const TinyDims d;
  auto tensors = tiny_llama_tensors(d, "U8");
  for (auto& t : tensors)
    if (t.dtype == "U8") t.shape[1] /= 2;
  auto g = from_config("tiny", tiny_llama_config(d),
                       {{"model.safetensors", safetensors(tensors)},
                        {"hf_quant_config.json", R"({"quantization": {"quant_algo": "NVFP4", "exclude_modules": ["lm_head"]}})"}});
  REQUIRE_MESSAGE(g.ok(), g.error().message);
  CHECK(*find_node(g->kinds[0].nodes, "o")->weight_format == Format::nvfp4);
}

TEST_CASE("declared with headers: a node whose tensor the headers lack is an error") {
  const TinyDims d;
  auto tensors = tiny_llama_tensors(d);
  tensors.erase(std::remove_if(tensors.begin(), tensors.end(),
                               [](const FakeTensor& t) { return t.name == "model.layers.1.self_attn.v_proj.weight"; }),
                tensors.end());
  auto msg = error_of(from_config("tiny", tiny_llama_config(d), {{"model.safetensors", safetensors(tensors)}}));
  CHECK(msg.find("node 2 of kind 'full' layer 1: tensor 'model.layers.1.self_attn.v_proj.weight' is not in the "
                 "safetensors headers of tiny") != std::string::npos);
}

TEST_CASE("declared with headers: a fused tensor of the wrong shape is an error naming every tensor") {
  const TinyDims d;
  auto tensors = tiny_llama_tensors(d);
  for (auto& t : tensors)
    if (t.name == "model.layers.0.self_attn.k_proj.weight") t.shape[0] = 64;
  auto msg = error_of(from_config("tiny", tiny_llama_config(d), {{"model.safetensors", safetensors(tensors)}}));
  CAPTURE(msg);
  // Each tensor is named with the shard that holds it, so the user knows which file lies.
  CHECK(msg.find("layer 0: tensors 'model.layers.0.self_attn.q_proj.weight' [64, 64] in ") != std::string::npos);
  CHECK(msg.find("'model.layers.0.self_attn.k_proj.weight' [64, 64] in ") != std::string::npos);
  CHECK(msg.find("tiny/model.safetensors") != std::string::npos);
  CHECK(msg.find("disagree with the node's weight shape [128, 64] (stacked along the first dimension)") != std::string::npos);
}

TEST_CASE("declared with headers: fused tensors of different dtypes are an error") {
  const TinyDims d;
  auto tensors = tiny_llama_tensors(d);
  for (auto& t : tensors)
    if (t.name == "model.layers.0.mlp.up_proj.weight") t.dtype = "F16";
  auto msg = error_of(from_config("tiny", tiny_llama_config(d), {{"model.safetensors", safetensors(tensors)}}));
  CHECK(msg.find("fused tensors disagree in dtype: 'model.layers.0.mlp.gate_proj.weight' is BF16, "
                 "'model.layers.0.mlp.up_proj.weight' is F16") != std::string::npos);
}

TEST_CASE("declared with headers: U8 tensors without a 4-bit quantization config are refused") {
  const TinyDims d;
  auto tensors = tiny_llama_tensors(d, "U8");
  auto msg = error_of(from_config("tiny", tiny_llama_config(d), {{"model.safetensors", safetensors(tensors)}}));
  CHECK(msg.find("dtype U8 holds packed 4-bit weights, but no quantization config names a 4-bit format") != std::string::npos);
}

TEST_CASE("declared with headers: a sharded checkpoint reads every shard the index names") {
  const TinyDims d;
  auto tensors = tiny_llama_tensors(d);
  std::vector<FakeTensor> a(tensors.begin(), tensors.begin() + 5), b(tensors.begin() + 5, tensors.end());
  nlohmann::json index = {{"metadata", {{"total_size", 1}}}, {"weight_map", nlohmann::json::object()}};
  for (const auto& t : a) index["weight_map"][t.name] = "model-00001-of-00002.safetensors";
  for (const auto& t : b) index["weight_map"][t.name] = "model-00002-of-00002.safetensors";
  auto g = from_config("tiny", tiny_llama_config(d),
                       {{"model.safetensors.index.json", index.dump()},
                        {"model-00001-of-00002.safetensors", safetensors(a)},
                        {"model-00002-of-00002.safetensors", safetensors(b)}});
  REQUIRE_MESSAGE(g.ok(), g.error().message);
  CHECK(find_node(g->post, "lm_head")->format_source == "safetensors header");
}

TEST_CASE(
    "declared: NVFP4 (modelopt) fixes nvfp4 activations on the quantised nodes, none on excluded ones (catches a W4A4 checkpoint "
    "read as weight-only)") {
  auto g =
      from_config("x", tiny_llama_config({}),
                  {{"hf_quant_config.json", R"({"quantization": {"quant_algo": "NVFP4", "exclude_modules": ["lm_head"]}})"}});
  REQUIRE_MESSAGE(g.ok(), g.error().message);
  const Node* qkv = find_node(g->kinds[0].nodes, "qkv");
  CHECK(*qkv->weight_format == Format::nvfp4);
  REQUIRE(qkv->act_format.has_value());
  CHECK(*qkv->act_format == Format::nvfp4);
  CHECK_FALSE(find_node(g->kinds[0].nodes, "attn_norm")->act_format.has_value());
  CHECK_FALSE(find_node(g->post, "lm_head")->act_format.has_value());
  CHECK(std::find(g->notes.begin(), g->notes.end(), "nvfp4 weights, nvfp4 activations (modelopt, hf_quant_config.json)") !=
        g->notes.end());
}

TEST_CASE(
    "declared: compressed-tensors input_activations fix the activation format when static, leave it to the runtime when "
    "dynamic") {
  auto with_acts = [](bool dynamic) {
    std::string cfg = tiny_llama_config({});
    cfg.insert(1,
               std::string("\"quantization_config\": {\"quant_method\": \"compressed-tensors\", \"config_groups\": {\"group_0\": "
                           "{\"weights\": {\"num_bits\": 4, \"type\": \"float\", \"group_size\": 16}, \"input_activations\": "
                           "{\"num_bits\": 4, \"type\": \"float\", \"group_size\": 16, \"dynamic\": ") +
                   (dynamic ? "true" : "false") + "}, \"targets\": [\"Linear\"]}}, \"ignore\": [\"lm_head\"]},");
    return from_config("x", cfg);
  };
  auto fixed = with_acts(false);
  REQUIRE_MESSAGE(fixed.ok(), fixed.error().message);
  REQUIRE(find_node(fixed->kinds[0].nodes, "down")->act_format.has_value());
  CHECK(*find_node(fixed->kinds[0].nodes, "down")->act_format == Format::nvfp4);
  auto dynamic = with_acts(true);
  REQUIRE_MESSAGE(dynamic.ok(), dynamic.error().message);
  CHECK_FALSE(find_node(dynamic->kinds[0].nodes, "down")->act_format.has_value());
  bool noted = false;
  for (const auto& n : dynamic->notes) noted = noted || n.find("activations quantised to nvfp4 at run time") != std::string::npos;
  CHECK(noted);
}

TEST_CASE(
    "declared: fp8 activation_scheme dynamic leaves activations to the runtime with a note, static fixes fp8, another is "
    "refused") {
  auto with_scheme = [](const std::string& scheme) {
    std::string cfg = tiny_llama_config({});
    cfg.insert(1, "\"quantization_config\": {\"quant_method\": \"fp8\", \"activation_scheme\": \"" + scheme + "\"},");
    return from_config("x", cfg);
  };
  auto dynamic = with_scheme("dynamic");
  REQUIRE_MESSAGE(dynamic.ok(), dynamic.error().message);
  CHECK_FALSE(find_node(dynamic->kinds[0].nodes, "o")->act_format.has_value());
  auto fixed = with_scheme("static");
  REQUIRE_MESSAGE(fixed.ok(), fixed.error().message);
  REQUIRE(find_node(fixed->kinds[0].nodes, "o")->act_format.has_value());
  CHECK(*find_node(fixed->kinds[0].nodes, "o")->act_format == Format::fp8_e4m3);
  CHECK(error_of(with_scheme("sometimes")).find("unsupported activation_scheme 'sometimes'") != std::string::npos);
}
