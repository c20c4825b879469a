// Circuit loading: the reference circuit loads, and each mutation of it that the loader must
// refuse is refused with a located message (file:line, which node, what is wrong).
#include <doctest/doctest.h>

#include <string>

#include "model/circuit.hpp"
#include "tree/disk_tree.hpp"

using namespace met;
using namespace met::model;

namespace {
const DiskTree& real_tree() {
  static DiskTree tree(std::string(MET_SOURCE_DIR) + "/kernels", "kernels/");
  return tree;
}
std::string dense_text() {
  auto t = real_tree().read("circuits/dense-gqa.toml");
  REQUIRE(t.ok());
  return *t;
}
// Replaces the first occurrence of `from` (which must exist) and loads the result.
Expected<Circuit> load_mutated(const std::string& from, const std::string& to) {
  std::string text = dense_text();
  const auto at = text.find(from);
  REQUIRE_MESSAGE(at != std::string::npos, from);
  text.replace(at, from.size(), to);
  MemTree tree({{"circuits/dense-gqa.toml", text}});
  return load_circuit(tree, "circuits/dense-gqa.toml");
}
int line_of(const std::string& needle) {
  const std::string text = dense_text();
  const auto at = text.find(needle);
  REQUIRE(at != std::string::npos);
  return 1 + static_cast<int>(std::count(text.begin(), text.begin() + static_cast<std::ptrdiff_t>(at), '\n'));
}
std::string error_of(const Expected<Circuit>& c) { return c ? std::string("no error") : c.error().message; }
}  // namespace

TEST_CASE("dense-gqa loads: parameters ordered after their dependencies, one layer kind, fused qkv") {
  auto c = load_circuit(real_tree(), "circuits/dense-gqa.toml");
  REQUIRE_MESSAGE(c.ok(), c.error().message);
  CHECK(c->id == "dense-gqa");
  CHECK(c->kinds.count("full") == 1);
  const auto& order = c->param_order;
  auto pos = [&](const std::string& p) { return std::find(order.begin(), order.end(), p) - order.begin(); };
  CHECK(pos("hidden") < pos("head_dim"));
  CHECK(pos("sliding_window") < pos("window"));
  const auto& qkv = c->kinds.at("full")[1];
  CHECK(qkv.role == "qkv");
  CHECK(qkv.weight.size() == 3);
  CHECK(qkv.where == "kernels/circuits/dense-gqa.toml:" + std::to_string(line_of("role = \"qkv\"") - 2));
}

TEST_CASE("an unknown op is refused with its location and the known ops") {
  const int line = line_of("op = \"rope\"");
  auto msg = error_of(load_mutated("op = \"rope\"", "op = \"rope2\""));
  CHECK(msg.rfind("kernels/circuits/dense-gqa.toml:" + std::to_string(line) +
                      ": node 5 of kind 'full': 'op': unknown op 'rope2' (known: embed, rmsnorm, linear, rope,", 0) == 0);
}

TEST_CASE("a node missing a required op param is refused") {
  auto msg = error_of(load_mutated("op = \"kv_append\"\nkv_heads = \"kv_heads\"\n", "op = \"kv_append\"\n"));
  CHECK(msg == "kernels/circuits/dense-gqa.toml:" + std::to_string(line_of("op = \"kv_append\"") - 1) +
                   ": node 6 of kind 'full': op 'kv_append' needs param 'kv_heads' (params: kv_heads, head_dim, v_head_dim)");
}

TEST_CASE("a param key the op does not take is refused, not ignored") {
  auto msg = error_of(load_mutated("op = \"silu_mul\"\n", "op = \"silu_mul\"\nalpha = \"1\"\n"));
  CHECK(msg.find(": node 12 of kind 'full': 'alpha': unknown param of op 'silu_mul' (params: dim)") != std::string::npos);
}

TEST_CASE("a schedule naming a kind without nodes is refused") {
  auto msg = error_of(load_mutated("default = \"full\"", "default = \"fulll\""));
  CHECK(msg.find("[layers]: 'default' names kind 'fulll', which has no [[kind.fulll]] nodes (known: full)") !=
        std::string::npos);
}

TEST_CASE("an expression reading an undefined parameter is refused at load time") {
  auto msg = error_of(load_mutated("out = \"2 * inter\"", "out = \"2 * intermediate\""));
  CHECK(msg.find("node 11 of kind 'full' ('linear') param 'out': '2 * intermediate': unknown name 'intermediate'") !=
        std::string::npos);
}

TEST_CASE("a cycle between parameter defaults is refused") {
  std::string text = dense_text();
  text.replace(text.find("default = \"heads\""), 17, "default = \"head_dim\"");
  text.replace(text.find("default = \"hidden // heads\""), 27, "default = \"kv_heads * 2\"");
  MemTree tree({{"circuits/dense-gqa.toml", text}});
  auto msg = error_of(load_circuit(tree, "circuits/dense-gqa.toml"));
  CHECK(msg.find("parameter cycle: head_dim -> kv_heads -> head_dim") != std::string::npos);
}

TEST_CASE("linear needs a role from the documented list") {
  auto msg = error_of(load_mutated("role = \"down\"", "role = \"dwn\""));
  CHECK(msg.find("'role': unknown role 'dwn' of op 'linear'") != std::string::npos);
}

TEST_CASE("an op with a weight must name its tensor; an op without one must not") {
  auto a = error_of(load_mutated("weight = \"model.norm.weight\"\n", ""));
  CHECK(a.find("[[post]]: op 'rmsnorm' has a weight: name its tensor with 'weight'") != std::string::npos);
  auto b = error_of(load_mutated("op = \"silu_mul\"\n", "op = \"silu_mul\"\nweight = \"x\"\n"));
  CHECK(b.find("'weight': op 'silu_mul' has no weight") != std::string::npos);
}

TEST_CASE("unknown keys anywhere in the circuit are refused") {
  CHECK(error_of(load_mutated("[circuit]\n", "[circuit]\nversion = 2\n")).find("[circuit]: 'version': unknown key") !=
        std::string::npos);
  CHECK(error_of(load_mutated("[layers]\n", "[layers]\nkinds = 1\n")).find("[layers]: 'kinds': unknown key") !=
        std::string::npos);
}

TEST_CASE("the circuit id must match its file name") {
  CHECK(error_of(load_mutated("id = \"dense-gqa\"", "id = \"dense\"")) ==
        "kernels/circuits/dense-gqa.toml: circuit id 'dense' differs from the file name");
}

TEST_CASE("two circuits claiming one architecture are refused") {
  std::string text = dense_text();
  std::string other = text;
  other.replace(other.find("id = \"dense-gqa\""), 16, "id = \"copy\"");
  MemTree tree({{"circuits/dense-gqa.toml", text}, {"circuits/copy.toml", other}, {"circuits/INSTANCES.toml", ""}});
  auto all = load_circuits(tree);
  REQUIRE_FALSE(all.ok());
  CHECK(all.error().message.find("architecture 'LlamaForCausalLM' is claimed by circuit") != std::string::npos);
}

TEST_CASE("every circuit of the kernel tree loads (other circuits follow the same spec)") {
  auto all = load_circuits(real_tree());
  REQUIRE_MESSAGE(all.ok(), all.error().message);
  CHECK(all->count("dense-gqa") == 1);
}

TEST_CASE("strip_prefix drops an architecture's prefix from the tensor names (Gemma3ForCausalLM: model.*, the multimodal checkpoint keeps language_model.model.*); a prefix for an architecture the circuit does not claim is refused") {
  auto c = load_circuit(real_tree(), "circuits/gemma3.toml");
  REQUIRE_MESSAGE(c.ok(), c.error().message);
  const std::string norm = "language_model.model.layers.{i}.input_layernorm.weight";
  CHECK(tensor_name(*c, "Gemma3ForCausalLM", norm, 3) == "model.layers.3.input_layernorm.weight");
  CHECK(tensor_name(*c, "Gemma3ForCausalLM", "language_model.lm_head.weight", -1) == "lm_head.weight");
  CHECK(tensor_name(*c, "Gemma3ForConditionalGeneration", norm, 3) == "language_model.model.layers.3.input_layernorm.weight");
  auto text = real_tree().read("circuits/gemma3.toml");
  REQUIRE(text.ok());
  std::string bad = *text;
  const std::string from = "strip_prefix = { Gemma3ForCausalLM = ";
  const auto at = bad.find(from);
  REQUIRE(at != std::string::npos);
  bad.replace(at, from.size(), "strip_prefix = { LlamaForCausalLM = ");
  MemTree tree({{"circuits/gemma3.toml", bad}});
  const auto msg = error_of(load_circuit(tree, "circuits/gemma3.toml"));
  CHECK(msg.find("'LlamaForCausalLM' is not one of the circuit's architectures") != std::string::npos);
}
