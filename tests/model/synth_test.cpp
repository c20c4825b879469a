// Synthetic checkpoints (src/model/synth.cpp): determinism, the tensor list against an independent
// listing, instantiation of the produced directory with declared formats, fp8 block scales,
// sharding, and the bf16/fp8 encoders against their definitions.
#include <doctest/doctest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <nlohmann/json.hpp>
#include <map>
#include <set>

#include "../../src/model/safetensors_writer.hpp"
#include "model/instantiate.hpp"
#include "model/safetensors.hpp"
#include "model/safetensors_writer.hpp"  // tests/model/: the independent tiny-llama listing
#include "model/synth.hpp"
#include "tree/disk_tree.hpp"

namespace {

using namespace met;
using namespace met::model;

const DiskTree& tree() {
  static DiskTree t(std::string(MET_SOURCE_DIR) + "/kernels", "kernels/");
  return t;
}

const std::map<std::string, Circuit>& circuits() {
  static const auto c = [] {
    auto r = load_circuits(tree());
    REQUIRE_MESSAGE(r.ok(), (r.ok() ? "" : r.error().message));
    return std::move(r).value();
  }();
  return c;
}

std::string fixture(const std::string& name) {
  DiskCheckpoint d(std::string(MET_SOURCE_DIR) + "/tests/model/fixtures/" + name);
  auto r = d.read("config.json");
  REQUIRE_MESSAGE(r.ok(), (r.ok() ? "" : r.error().message));
  return *r;
}

SynthPlan plan(const std::string& name, std::uint64_t seed, Format dtype = Format::bf16) {
  auto p = plan_synth(circuits(), fixture(name), name + "/config.json", SynthOptions{seed, dtype});
  REQUIRE_MESSAGE(p.ok(), (p.ok() ? "" : p.error().message));
  return std::move(p).value();
}

std::map<std::string, std::string> files(const SynthPlan& p, std::uint64_t shard = kDefaultShardBytes) {
  auto f = synth_files(p, shard);
  REQUIRE_MESSAGE(f.ok(), (f.ok() ? "" : f.error().message));
  return std::move(f).value();
}

ModelGraph instantiate_files(const std::string& name, std::map<std::string, std::string> fs) {
  MemCheckpoint src(name, std::move(fs));
  auto g = instantiate_checkpoint(tree(), circuits(), src);
  REQUIRE_MESSAGE(g.ok(), (g.ok() ? "" : g.error().message));
  return std::move(g).value();
}

std::vector<const Node*> weight_nodes_of(const ModelGraph& g) {
  std::vector<const Node*> out;
  for (const auto& n : g.pre) if (n.weight_format) out.push_back(&n);
  for (const auto& k : g.kinds) for (const auto& n : k.nodes) if (n.weight_format) out.push_back(&n);
  for (const auto& n : g.post) if (n.weight_format) out.push_back(&n);
  return out;
}

std::vector<std::byte> tensor_bytes(const SynthPlan& p, std::size_t t) {
  std::vector<std::byte> b(p.tensors[t].bytes);
  synth_bytes(p, t, 0, b);
  return b;
}

}  // namespace

TEST_CASE("same seed gives identical files, another seed changes every tensor (catches a generator that ignores the seed)") {
  const auto a = files(plan("tiny-llama", 7));
  const auto b = files(plan("tiny-llama", 7));
  CHECK(a == b);
  const SynthPlan p7 = plan("tiny-llama", 7), p8 = plan("tiny-llama", 8);
  REQUIRE(p7.tensors.size() == p8.tensors.size());
  for (std::size_t t = 0; t < p7.tensors.size(); ++t) {
    CAPTURE(p7.tensors[t].name);
    CHECK(tensor_bytes(p7, t) != tensor_bytes(p8, t));
  }
}

TEST_CASE("bytes do not depend on how a tensor is chunked (catches a generator keyed by chunk or buffer offset)") {
  for (Format f : {Format::bf16, Format::fp8_e4m3}) {
    const SynthPlan p = plan("tiny-qwen3", 3, f);
    for (std::size_t t = 0; t < p.tensors.size(); ++t) {
      CAPTURE(p.tensors[t].name);
      const auto whole = tensor_bytes(p, t);
      std::vector<std::byte> pieces(whole.size());
      constexpr std::size_t kOddChunk = 7;  // splits bf16 and f32 elements
      for (std::size_t at = 0; at < pieces.size(); at += kOddChunk) {
        const std::size_t n = std::min(kOddChunk, pieces.size() - at);
        synth_bytes(p, t, at, std::span<std::byte>(pieces.data() + at, n));
      }
      CHECK(whole == pieces);
    }
  }
}

TEST_CASE("tiny llama: the tensor list is the checkpoint's, and the directory instantiates with declared bf16 (catches a missing or misshaped tensor)") {
  const SynthPlan p = plan("tiny-llama", 1);
  testing::TinyDims d;  // hidden 64, heads 4, kv 2, head_dim 16, inter 128, vocab 256, 2 layers
  std::map<std::string, std::vector<std::uint64_t>> want, have;
  for (const auto& t : testing::tiny_llama_tensors(d)) want[t.name] = t.shape;
  for (const auto& t : p.tensors) {
    CHECK(t.dtype == "BF16");
    have[t.name] = t.shape;
  }
  CHECK(have == want);
  const ModelGraph g = instantiate_files("tiny-llama", files(p));
  CHECK(g.formats_basis == "declared");
  CHECK(g.notes.empty());
  for (const Node* n : weight_nodes_of(g)) {
    CAPTURE(n->weight);
    CHECK(*n->weight_format == Format::bf16);
    CHECK(n->format_source == "safetensors header");
  }
}

TEST_CASE("tiny qwen3: q/k norms present, tied lm_head stores no tensor (catches writing lm_head.weight for a tied model)") {
  const SynthPlan p = plan("tiny-qwen3", 1);
  std::map<std::string, std::vector<std::uint64_t>> have;
  for (const auto& t : p.tensors) have[t.name] = t.shape;
  CHECK(have.count("lm_head.weight") == 0);
  CHECK(have.at("model.layers.1.self_attn.q_norm.weight") == std::vector<std::uint64_t>{32});
  CHECK(have.at("model.layers.1.self_attn.k_norm.weight") == std::vector<std::uint64_t>{32});
  CHECK(have.at("model.layers.0.self_attn.q_proj.weight") == std::vector<std::uint64_t>{128, 128});
  CHECK(have.at("model.layers.0.self_attn.k_proj.weight") == std::vector<std::uint64_t>{64, 128});
  CHECK(have.at("model.layers.0.self_attn.v_proj.weight") == std::vector<std::uint64_t>{64, 128});
  CHECK(have.at("model.layers.0.self_attn.o_proj.weight") == std::vector<std::uint64_t>{128, 128});
  CHECK(have.at("model.layers.0.mlp.gate_proj.weight") == std::vector<std::uint64_t>{256, 128});
  CHECK(have.at("model.layers.0.mlp.down_proj.weight") == std::vector<std::uint64_t>{128, 256});
  CHECK(have.size() == 1 + 2 * 11 + 1);
  const ModelGraph g = instantiate_files("tiny-qwen3", files(p));
  CHECK(g.tied_embeddings);
  for (const Node* n : weight_nodes_of(g)) CHECK(*n->weight_format == Format::bf16);
}

TEST_CASE("fp8 synth: Linear weights are F8_E4M3 with 128x128 F32 scales, the rest bf16, and it instantiates as declared fp8 (catches quantizing norms or lm_head)") {
  for (const char* name : {"tiny-llama", "tiny-qwen3"}) {
    CAPTURE(name);
    const SynthPlan p = plan(name, 5, Format::fp8_e4m3);
    std::map<std::string, const SynthTensor*> by;
    for (const auto& t : p.tensors) by[t.name] = &t;
    for (const auto& t : p.tensors) {
      CAPTURE(t.name);
      const bool linear = t.name.find("_proj.weight") != std::string::npos && t.name.find("_scale_inv") == std::string::npos;
      if (linear) {
        CHECK(t.dtype == "F8_E4M3");
        const SynthTensor* s = by.at(t.name + "_scale_inv");
        CHECK(s->dtype == "F32");
        CHECK(s->shape == std::vector<std::uint64_t>{(t.shape[0] + 127) / 128, (t.shape[1] + 127) / 128});
      } else if (t.name.find("_scale_inv") == std::string::npos) {
        CHECK(t.dtype == "BF16");
      }
    }
    const auto fs = files(p);
    CHECK(fs.at("config.json").find("\"weight_block_size\"") != std::string::npos);
    const ModelGraph g = instantiate_files(name, fs);
    for (const Node* n : weight_nodes_of(g)) {
      CAPTURE(n->weight);
      const bool linear = n->op == "linear" && n->role != "lm_head";
      CHECK(*n->weight_format == (linear ? Format::fp8_e4m3 : Format::bf16));
    }
  }
}

TEST_CASE("fp8 dequantized weights stay in U(-1/sqrt(in), 1/sqrt(in)) scaled by at most 1.25 and are not constant (catches a scale per tensor instead of per block)") {
  const SynthPlan p = plan("tiny-qwen3", 9, Format::fp8_e4m3);
  std::size_t w = 0;
  while (p.tensors[w].name != "model.layers.0.mlp.down_proj.weight") ++w;
  const auto& t = p.tensors[w];  // [128, 256]: scales [1, 2]
  const auto data = tensor_bytes(p, w);
  const auto sb = tensor_bytes(p, w + 1);
  REQUIRE(p.tensors[w + 1].name == t.name + "_scale_inv");
  float scales[2];
  std::memcpy(scales, sb.data(), sizeof scales);
  CHECK(scales[0] != scales[1]);
  const double a = 1.0 / std::sqrt(256.0);
  double sum2 = 0;
  for (std::size_t k = 0; k < data.size(); ++k) {
    const float v = fp8_e4m3_value(static_cast<std::uint8_t>(data[k])) * scales[(k % 256) / 128];
    CHECK(std::fabs(v) <= 1.25 * a + 1e-6);
    sum2 += double(v) * v;
  }
  const double rms = std::sqrt(sum2 / static_cast<double>(data.size()));
  CHECK(rms > 0.3 * a);
}

TEST_CASE("bf16 linear weights have the planned range: |w| <= 1/sqrt(in), rms near 1/sqrt(3 in); norms near 1 (catches a degenerate model)") {
  const SynthPlan p = plan("tiny-llama", 2);
  for (std::size_t t = 0; t < p.tensors.size(); ++t) {
    const auto& s = p.tensors[t];
    CAPTURE(s.name);
    const auto b = tensor_bytes(p, t);
    double lo = 1e9, hi = -1e9, sum2 = 0;
    const std::size_t n = b.size() / 2;
    for (std::size_t k = 0; k < n; ++k) {
      std::uint32_t bits = (static_cast<std::uint32_t>(b[2 * k]) | static_cast<std::uint32_t>(b[2 * k + 1]) << 8) << 16;
      float v;
      std::memcpy(&v, &bits, 4);
      lo = std::min<double>(lo, v);
      hi = std::max<double>(hi, v);
      sum2 += double(v) * v;
    }
    if (s.kind == TensorKind::norm) {
      CHECK(lo >= 0.89);
      CHECK(hi <= 1.11);
    } else if (s.kind == TensorKind::linear) {
      const double a = 1.0 / std::sqrt(double(s.shape[1]));
      CHECK(hi <= a * 1.01);
      CHECK(lo >= -a * 1.01);
      CHECK(std::sqrt(sum2 / double(n)) == doctest::Approx(a / std::sqrt(3.0)).epsilon(0.1));
    }
  }
}

TEST_CASE("sharding splits at --shard-bytes and the index maps every tensor to the shard holding it (catches a tensor left out of the index)") {
  const SynthPlan p = plan("tiny-llama", 4);
  constexpr std::uint64_t kLimit = 40'000;  // embedding (32 KiB) alone, then layer tensors
  auto shards = shard_synth(p, kLimit);
  REQUIRE(shards.ok());
  CHECK(shards->size() > 2);
  std::set<std::size_t> all;
  for (const auto& s : *shards) {
    CHECK(s.data_bytes <= kLimit);
    for (auto k : s.tensors) CHECK(all.insert(k).second);
  }
  CHECK(all.size() == p.tensors.size());
  const auto fs = files(p, kLimit);
  CHECK(fs.count("model.safetensors") == 0);
  CHECK(fs.count("model-00001-of-" + std::string(5 - std::to_string(shards->size()).size(), '0') + std::to_string(shards->size()) + ".safetensors") == 1);
  const auto idx = nlohmann::json::parse(fs.at("model.safetensors.index.json"));
  CHECK(idx["metadata"]["total_size"].get<std::uint64_t>() == p.total_bytes);
  CHECK(idx["weight_map"].size() == p.tensors.size());
  MemCheckpoint src("tiny-llama", fs);
  auto tensors = read_checkpoint_tensors(src);
  REQUIRE_MESSAGE(tensors.ok(), (tensors.ok() ? "" : tensors.error().message));
  CHECK((*tensors)->size() == p.tensors.size());
  instantiate_files("tiny-llama", fs);
  // Same bytes per tensor as the unsharded checkpoint.
  const auto one = files(p);
  MemCheckpoint single("tiny-llama", one);
  auto t1 = read_checkpoint_tensors(single);
  REQUIRE(t1.ok());
  for (const auto& [name, info] : **tensors) {
    auto h = read_safetensors_header(src, info.file);
    auto h1 = read_safetensors_header(single, kSingleFile);
    REQUIRE(h.ok());
    REQUIRE(h1.ok());
    const auto& i1 = (*t1)->at(name);
    CHECK(fs.at(info.file).substr(8 + h->header_length + info.begin, info.end - info.begin) ==
          one.at(kSingleFile).substr(8 + h1->header_length + i1.begin, i1.end - i1.begin));
  }
}

TEST_CASE("a config whose architecture no circuit claims is refused with the known ones listed (catches a silent default circuit)") {
  auto p = plan_synth(circuits(), R"({"architectures":["NopeForCausalLM"],"hidden_size":8})", "x/config.json", {});
  REQUIRE_FALSE(p.ok());
  CHECK(p.error().message.find("x/config.json: architecture 'NopeForCausalLM' has no circuit (known: ") == 0);
  CHECK(p.error().message.find("LlamaForCausalLM") != std::string::npos);
  auto bad = plan_synth(circuits(), "{", "y/config.json", {});
  REQUIRE_FALSE(bad.ok());
  CHECK(bad.error().message.find("y/config.json: invalid json") == 0);
}

TEST_CASE("fp8 e4m3 encoder: every finite code round-trips, halfway values round to the even code, big values saturate (catches truncation)") {
  for (int c = 0; c < 256; ++c) {
    if ((c & 0x7f) == 0x7f) continue;
    const float v = fp8_e4m3_value(static_cast<std::uint8_t>(c));
    if (c == 0x80) continue;  // -0 encodes as the sign of zero; both decode to 0
    CAPTURE(c);
    CHECK(f32_to_fp8_e4m3(v) == c);
  }
  CHECK(f32_to_fp8_e4m3(1.0625f) == f32_to_fp8_e4m3(1.0f));    // halfway 1.0 (even) / 1.125
  CHECK(f32_to_fp8_e4m3(1.1875f) == f32_to_fp8_e4m3(1.25f));   // halfway 1.125 / 1.25 (even)
  CHECK(f32_to_fp8_e4m3(1.1f) == f32_to_fp8_e4m3(1.125f));
  CHECK(f32_to_fp8_e4m3(1000.0f) == 0x7e);
  CHECK(f32_to_fp8_e4m3(-1000.0f) == 0xfe);
  CHECK(f32_to_bf16(1.0f) == 0x3f80);
  CHECK(f32_to_bf16(1.00390625f) == 0x3f80);  // halfway to 0x3f81: even stays
  CHECK(f32_to_bf16(1.01171875f) == 0x3f82);  // halfway 0x3f81/0x3f82: to even
  CHECK(f32_to_bf16(-2.0f) == 0xc000);
}

TEST_CASE("safetensors header writer: data starts 8-byte aligned after space padding and the reader accepts the layout (catches unpadded headers)") {
  for (std::size_t extra = 0; extra < 8; ++extra) {
    const std::string name = "t" + std::string(extra, 'x');
    auto h = write_safetensors_header({{name, "BF16", {3, 5}}, {"s", "F32", {2}}, {"f", "F8_E4M3", {7}}});
    REQUIRE(h.ok());
    CHECK(h->bytes.size() % 8 == 0);
    CHECK(h->bytes.back() != '\0');
    CHECK(h->data_bytes == 30 + 8 + 7);
    CHECK(h->begin == std::vector<std::uint64_t>{0, 30, 38});
    const std::string text = h->bytes.substr(8);
    auto parsed = parse_safetensors_header(text, h->data_bytes, "x.safetensors", "x.safetensors");
    REQUIRE_MESSAGE(parsed.ok(), (parsed.ok() ? "" : parsed.error().message));
    CHECK(parsed->tensors.at("s").begin == 30);
    CHECK(parsed->metadata.at("format") == "pt");
  }
  auto dup = write_safetensors_header({{"a", "BF16", {1}}, {"a", "BF16", {1}}});
  REQUIRE_FALSE(dup.ok());
  CHECK(dup.error().message == "safetensors header: duplicate tensor 'a'");
  auto bad = write_safetensors_header({{"a", "Q9", {1}}});
  REQUIRE_FALSE(bad.ok());
  CHECK(bad.error().message == "safetensors header: tensor 'a': unknown dtype 'Q9'");
}

namespace {

std::string oracle_config(const std::string& name) {
  DiskCheckpoint d(std::string(MET_SOURCE_DIR) + "/tests/oracle/configs");
  auto r = d.read(name + ".json");
  REQUIRE_MESSAGE(r.ok(), (r.ok() ? "" : r.error().message));
  return *r;
}

SynthPlan moe_plan(Format dtype = Format::bf16) {
  auto p = plan_synth(circuits(), oracle_config("tiny-qwen3-moe"), "tiny-qwen3-moe.json", SynthOptions{1, dtype});
  REQUIRE_MESSAGE(p.ok(), (p.ok() ? "" : p.error().message));
  return std::move(p).value();
}

// The synth files with config.json's `key` set to `value` (a config that disagrees with the tensors).
std::map<std::string, std::string> with_config(std::map<std::string, std::string> fs, const std::string& key,
                                               const nlohmann::ordered_json& value) {
  auto j = nlohmann::ordered_json::parse(fs.at("config.json"));
  j[key] = value;
  fs["config.json"] = j.dump(2);
  return fs;
}

std::string instantiate_error(const std::map<std::string, std::string>& fs, const std::string& name = "tiny-qwen3-moe") {
  MemCheckpoint src(name, fs);
  auto g = instantiate_checkpoint(tree(), circuits(), src);
  REQUIRE_FALSE(g.ok());
  return g.error().message;
}

}  // namespace

TEST_CASE("tiny qwen3-moe: experts are Hugging Face's per-expert tensors, mlp.gate is [experts, hidden], mlp_only_layers keeps layer 2 dense, and it instantiates as declared (catches stacked or missing expert tensors)") {
  const SynthPlan p = moe_plan();
  std::map<std::string, std::vector<std::uint64_t>> have;
  for (const auto& t : p.tensors) have[t.name] = t.shape;
  using Shape = std::vector<std::uint64_t>;
  for (int layer : {0, 1, 3}) {
    const std::string mlp = "model.layers." + std::to_string(layer) + ".mlp.";
    CHECK(have.at(mlp + "gate.weight") == Shape{8, 128});
    for (int e = 0; e < 8; ++e) {
      const std::string x = mlp + "experts." + std::to_string(e) + ".";
      CHECK(have.at(x + "gate_proj.weight") == Shape{64, 128});
      CHECK(have.at(x + "up_proj.weight") == Shape{64, 128});
      CHECK(have.at(x + "down_proj.weight") == Shape{128, 64});
    }
    CHECK(have.count(mlp + "experts.8.gate_proj.weight") == 0);
    CHECK(have.count(mlp + "gate_proj.weight") == 0);
  }
  CHECK(have.at("model.layers.2.mlp.gate_proj.weight") == Shape{256, 128});
  CHECK(have.at("model.layers.2.mlp.down_proj.weight") == Shape{128, 256});
  CHECK(have.count("model.layers.2.mlp.gate.weight") == 0);
  CHECK(have.at("lm_head.weight") == Shape{1024, 128});
  // per MoE layer: 2 norms, q k v o, q/k norms, router, 8 x 3 experts; the dense layer: 11
  CHECK(have.size() == 1 + 3 * (8 + 1 + 24) + 11 + 1 + 1);
  const ModelGraph g = instantiate_files("tiny-qwen3-moe", files(p));
  REQUIRE(g.layer_kinds.size() == 4);
  CHECK(g.kinds[static_cast<std::size_t>(g.layer_kinds[2])].kind == "dense");
  for (int layer : {0, 1, 3}) CHECK(g.kinds[static_cast<std::size_t>(g.layer_kinds[static_cast<std::size_t>(layer)])].kind == "moe");
  for (const Node* n : weight_nodes_of(g)) {
    CAPTURE(n->weight);
    CHECK(*n->weight_format == Format::bf16);
    if (n->op == "moe_gate_up") CHECK(n->weights.size() == 16);  // 8 experts x (gate, up)
    if (n->op == "moe_router") CHECK(n->params.at("renormalize") == 1);  // norm_topk_prob: true
  }
}

TEST_CASE("tiny qwen3-moe fp8: expert projections are F8_E4M3 with their own scales, the router stays bf16, and it instantiates as declared fp8") {
  const SynthPlan p = moe_plan(Format::fp8_e4m3);
  std::map<std::string, std::string> dtype;
  for (const auto& t : p.tensors) dtype[t.name] = t.dtype;
  CHECK(dtype.at("model.layers.0.mlp.experts.5.up_proj.weight") == "F8_E4M3");
  CHECK(dtype.at("model.layers.0.mlp.experts.5.up_proj.weight_scale_inv") == "F32");
  CHECK(dtype.at("model.layers.0.mlp.gate.weight") == "BF16");
  const ModelGraph g = instantiate_files("tiny-qwen3-moe", files(p));
  for (const Node* n : weight_nodes_of(g))
    if (n->op == "moe_gate_up" || n->op == "moe_down") CHECK(*n->weight_format == Format::fp8_e4m3);
}

TEST_CASE("a Qwen3-MoE checkpoint whose expert tensors disagree with config.json is refused naming the layer, the expert, the tensors and their file (catches a loader that reads expert shapes unchecked)") {
  const auto fs = files(moe_plan());
  // moe_intermediate_size 32: every expert's gate/up stack to 128 rows where 64 are wanted.
  const std::string inter = instantiate_error(with_config(fs, "moe_intermediate_size", 32));
  CHECK(inter.find("layer 0: expert 0: tensors 'model.layers.0.mlp.experts.0.gate_proj.weight' [64, 128] in") != std::string::npos);
  CHECK(inter.find("model.safetensors") != std::string::npos);
  CHECK(inter.find("disagree with the expert's weight shape [64, 128] (stacked along the first dimension)") != std::string::npos);
  // A checkpoint with 9 experts (router resized to 8) under a config naming 8: expert 8 is extra.
  auto p9 = plan_synth(circuits(), with_config({{"config.json", oracle_config("tiny-qwen3-moe")}}, "num_experts", 9).at("config.json"),
                       "nine.json", SynthOptions{1, Format::bf16});
  REQUIRE(p9.ok());
  SynthPlan nine = std::move(p9).value();
  for (auto& t : nine.tensors)
    if (t.name.ends_with("mlp.gate.weight")) t.shape[0] = 8, t.bytes = 8 * 128 * 2;
  const std::string extra = instantiate_error(with_config(files(nine), "num_experts", 8));
  CHECK(extra.find("holds 'model.layers.0.mlp.experts.8.gate_proj.weight', past the 8 experts config.json names") != std::string::npos);
  // The router resized to 16 under a config naming 16: expert 8 is missing.
  SynthPlan short_plan = moe_plan();
  for (auto& t : short_plan.tensors)
    if (t.name.ends_with("mlp.gate.weight")) t.shape[0] = 16, t.bytes = 16 * 128 * 2;
  const std::string missing = instantiate_error(with_config(files(short_plan), "num_experts", 16));
  CHECK(missing.find("tensor 'model.layers.0.mlp.experts.8.gate_proj.weight' is not in the safetensors headers") != std::string::npos);
  CHECK(missing.find("(config.json names 16 experts)") != std::string::npos);
  // The router itself is checked like any 2-d weight.
  const std::string router = instantiate_error(with_config(fs, "num_experts", 16));
  CHECK(router.find("tensor 'model.layers.0.mlp.gate.weight' [8, 128] in") != std::string::npos);
  CHECK(router.find("disagrees with the node's weight shape [16, 128]") != std::string::npos);
  // An expert count past any int (config_fuzz found one) is refused at the weight shape, before any
  // name is expanded or count converted.
  const std::string huge = instantiate_error(with_config(fs, "num_experts", 1.3e51));
  CHECK(huge.find("is not made of positive integers below 2^31") != std::string::npos);
  const std::string wide = instantiate_error(with_config(with_config(fs, "vocab_size", 2147483647), "hidden_size", 1 << 20));
  CHECK(wide.find("past 2^48") != std::string::npos);
  // mlp_only_layers must be a list of layer indices.
  const std::string scalar = instantiate_error(with_config(fs, "mlp_only_layers", 7));
  CHECK(scalar.find("'mlp_only_layers' is an integer, expected a list of layer indices") != std::string::npos);
}

TEST_CASE("Qwen3-30B-A3B's real config: synth lists 48 x 128 x 3 expert tensors and 30.5B parameters, as counted from config.json here (catches experts listed per layer kind, or once)") {
  DiskCheckpoint d(std::string(MET_SOURCE_DIR) + "/kernels/circuits/configs/Qwen--Qwen3-30B-A3B");
  auto cfg = d.read("config.json");
  REQUIRE(cfg.ok());
  auto p = plan_synth(circuits(), *cfg, "Qwen3-30B-A3B/config.json", SynthOptions{1, Format::bf16});
  REQUIRE_MESSAGE(p.ok(), (p.ok() ? "" : p.error().message));
  // config.json: hidden 2048, 48 layers, 32 heads, 4 KV heads of 128, 128 experts of 768, vocab 151936, untied.
  const double hidden = 2048, layers = 48, q = 32 * 128, kv = 4 * 128, experts = 128, inter = 768, vocab = 151936;
  const double per_layer = hidden * (q + 2 * kv) + q * hidden + 2 * 128 + 2 * hidden + experts * hidden + experts * 3 * inter * hidden;
  const double want = layers * per_layer + 2 * vocab * hidden + hidden;
  double have = 0;
  std::size_t expert_tensors = 0;
  for (const auto& t : p->tensors) {
    double e = 1;
    for (auto s : t.shape) e *= static_cast<double>(s);
    have += e;
    if (t.name.find(".mlp.experts.") != std::string::npos) ++expert_tensors;
  }
  CHECK(have == want);
  CHECK(expert_tensors == 48 * 128 * 3);
  CHECK(p->tensors.size() == 48 * (2 + 4 + 2 + 1 + 128 * 3) + 3);
}
TEST_CASE("tiny Gemma-3 (Gemma3ForCausalLM) is written with the text model's real tensor names (model.*, tied, sandwich and q/k norms) and its (1 + w) norms near 0, so 1 + w is near 1 (catches language_model.* names or norms stored as 1 + noise)") {
  DiskCheckpoint d(std::string(MET_SOURCE_DIR) + "/tests/oracle/configs");
  auto config = d.read("tiny-gemma3.json");
  REQUIRE(config.ok());
  auto p = plan_synth(circuits(), *config, "tiny-gemma3.json", SynthOptions{1, Format::bf16});
  REQUIRE_MESSAGE(p.ok(), (p.ok() ? "" : p.error().message));
  std::set<std::string> names;
  for (const auto& t : p->tensors) names.insert(t.name);
  for (const char* want : {"model.embed_tokens.weight", "model.norm.weight", "model.layers.0.input_layernorm.weight",
                           "model.layers.0.post_attention_layernorm.weight", "model.layers.0.pre_feedforward_layernorm.weight",
                           "model.layers.0.post_feedforward_layernorm.weight", "model.layers.5.self_attn.q_norm.weight",
                           "model.layers.5.self_attn.k_norm.weight", "model.layers.2.self_attn.q_proj.weight",
                           "model.layers.2.mlp.gate_proj.weight", "model.layers.2.mlp.down_proj.weight"}) {
    CHECK_MESSAGE(names.count(want), want);
  }
  for (const auto& n : names) {
    CHECK_MESSAGE(n.rfind("model.", 0) == 0, n);  // no language_model.*, no untied lm_head
  }
  for (std::size_t t = 0; t < p->tensors.size(); ++t) {
    const auto& s = p->tensors[t];
    if (s.name.find("norm") == std::string::npos) continue;
    CAPTURE(s.name);
    CHECK(s.kind == TensorKind::offset_norm);
    const auto b = tensor_bytes(*p, t);
    for (std::size_t k = 0; k + 1 < b.size(); k += 2) {
      std::uint32_t bits = (static_cast<std::uint32_t>(b[k]) | static_cast<std::uint32_t>(b[k + 1]) << 8) << 16;
      float v;
      std::memcpy(&v, &bits, 4);
      REQUIRE(std::fabs(v) <= 0.11f);
    }
  }
}

TEST_CASE("fp8-modelopt synth: hf_quant_config.json as nvidia's, F32 scalar weight_scale and input_scale per Linear, k_scale and v_scale per layer, lm_head bf16; it instantiates as W8A8 with an fp8 KV cache (catches block scales or a quantised lm_head)") {
  DiskCheckpoint d(std::string(MET_SOURCE_DIR) + "/tests/model/fixtures/tiny-llama");
  auto cfg = d.read("config.json");
  REQUIRE(cfg.ok());
  auto p = plan_synth(circuits(), *cfg, "tiny-llama", SynthOptions{5, Format::fp8_e4m3, Fp8Layout::modelopt});
  REQUIRE_MESSAGE(p.ok(), (p.ok() ? "" : p.error().message));
  CHECK(p->config_json.find("quantization_config") == std::string::npos);
  const auto hq = nlohmann::json::parse(p->hf_quant_config_json);
  CHECK(hq.at("quantization").at("quant_algo") == "FP8");
  CHECK(hq.at("quantization").at("kv_cache_quant_algo") == "FP8");
  CHECK(hq.at("quantization").at("exclude_modules") == nlohmann::json::array({"lm_head"}));
  std::map<std::string, const SynthTensor*> by;
  for (const auto& t : p->tensors) by[t.name] = &t;
  for (const char* name : {"model.layers.0.self_attn.q_proj.weight_scale", "model.layers.0.self_attn.q_proj.input_scale",
                           "model.layers.1.mlp.down_proj.input_scale", "model.layers.0.self_attn.k_proj.k_scale",
                           "model.layers.1.self_attn.v_proj.v_scale"}) {
    CAPTURE(name);
    REQUIRE(by.count(name) == 1);
    CHECK(by.at(name)->dtype == "F32");
    CHECK(by.at(name)->shape.empty());
  }
  CHECK(by.at("model.layers.0.mlp.gate_proj.weight")->dtype == "F8_E4M3");
  CHECK(by.at("lm_head.weight")->dtype == "BF16");
  CHECK(by.count("model.layers.0.self_attn.q_proj.weight_scale_inv") == 0);
  CHECK(by.count("model.layers.0.self_attn.q_proj.k_scale") == 0);
  auto files = synth_files(*p, kDefaultShardBytes);
  REQUIRE(files.ok());
  CHECK(files->count("hf_quant_config.json") == 1);
  MemCheckpoint src("tiny-llama-mo", *files);
  auto g = instantiate_checkpoint(tree(), circuits(), src);
  REQUIRE_MESSAGE(g.ok(), (g.ok() ? "" : g.error().message));
  CHECK(g->kv == Format::fp8_e4m3);
  const Node* o = nullptr;
  for (const auto& n : g->kinds[0].nodes) {
    if (n.role == "o") o = &n;
  }
  REQUIRE(o);
  CHECK(*o->weight_format == Format::fp8_e4m3);
  CHECK(o->act_format == Format::fp8_e4m3);
}

TEST_CASE("synth --dtype names: fp8-e4m3 stays an alias of fp8-block128, unknown names are nullopt") {
  CHECK(parse_synth_dtype("fp8-e4m3")->layout == Fp8Layout::block128);
  CHECK(parse_synth_dtype("fp8-block128")->dtype == Format::fp8_e4m3);
  CHECK(parse_synth_dtype("fp8-modelopt")->layout == Fp8Layout::modelopt);
  CHECK(parse_synth_dtype("bf16")->dtype == Format::bf16);
  CHECK_FALSE(parse_synth_dtype("fp8"));
}

TEST_CASE("tiny Gemma-4 is written with Hugging Face's tensor names and shapes: Gemma4ForCausalLM model.*, Gemma4ForConditionalGeneration model.language_model.*, no v_proj on the full (attention_k_eq_v) layers, k_proj of the global KV heads and head size there, a [1] layer_scalar per layer, no v_norm weight (catches a v_proj written for K = V, or a prefix kept)") {
  DiskCheckpoint d(std::string(MET_SOURCE_DIR) + "/tests/oracle/configs");
  auto config = d.read("tiny-gemma4.json");
  REQUIRE(config.ok());
  const auto text = nlohmann::json::parse(*config);
  nlohmann::json multimodal = {{"architectures", {"Gemma4ForConditionalGeneration"}}, {"model_type", "gemma4"}};
  multimodal["text_config"] = text;
  multimodal["text_config"].erase("architectures");
  for (const auto& [cfg, prefix] : {std::pair{text.dump(), std::string("model.")}, std::pair{multimodal.dump(), std::string("model.language_model.")}}) {
    auto p = plan_synth(circuits(), cfg, "tiny-gemma4.json", SynthOptions{1, Format::bf16});
    REQUIRE_MESSAGE(p.ok(), (p.ok() ? "" : p.error().message));
    std::map<std::string, std::vector<std::uint64_t>> shapes;
    for (const auto& t : p->tensors) shapes[t.name] = t.shape;
    const std::map<std::string, std::vector<std::uint64_t>> want = {
        {"embed_tokens.weight", {1024, 320}},
        {"norm.weight", {320}},
        {"layers.0.self_attn.q_proj.weight", {4 * 64, 320}},
        {"layers.0.self_attn.k_proj.weight", {2 * 64, 320}},
        {"layers.0.self_attn.v_proj.weight", {2 * 64, 320}},
        {"layers.0.self_attn.q_norm.weight", {64}},
        {"layers.0.layer_scalar", {1}},
        {"layers.2.self_attn.q_proj.weight", {4 * 128, 320}},
        {"layers.2.self_attn.k_proj.weight", {1 * 128, 320}},
        {"layers.2.self_attn.k_norm.weight", {128}},
        {"layers.2.self_attn.o_proj.weight", {320, 4 * 128}},
        {"layers.2.mlp.gate_proj.weight", {640, 320}},
        {"layers.5.post_feedforward_layernorm.weight", {320}},
    };
    for (const auto& [name, shape] : want) {
      const std::string full = prefix + name;
      CAPTURE(full);
      REQUIRE(shapes.count(full));
      CHECK(shapes.at(full) == shape);
    }
    CHECK_FALSE(shapes.count(prefix + "layers.2.self_attn.v_proj.weight"));
    CHECK_FALSE(shapes.count(prefix + "layers.5.self_attn.v_proj.weight"));
    for (const auto& entry : shapes) {
      const std::string& name = entry.first;  // a plain reference: CAPTURE is a lambda (clang 14)
      CAPTURE(name);
      CHECK(name.rfind(prefix, 0) == 0);
      CHECK(name.find("v_norm") == std::string::npos);
    }
    CHECK(shapes.size() == 2 + 4 * 14 + 2 * 13);  // embed and norm; 14 a sliding layer, 13 a full one (no v_proj)
  }
}

namespace {

SynthPlan gpt_oss_plan(Format dtype) {
  auto p = plan_synth(circuits(), oracle_config("tiny-gpt-oss"), "tiny-gpt-oss.json", SynthOptions{1, dtype});
  REQUIRE_MESSAGE(p.ok(), (p.ok() ? "" : p.error().message));
  return std::move(p).value();
}

// The files with tensor `name`'s shape replaced (its bytes resized to match).
std::map<std::string, std::string> with_shape(SynthPlan p, const std::string& name, std::vector<std::uint64_t> shape) {
  for (auto& t : p.tensors)
    if (t.name == name) {
      std::uint64_t n = 1;
      for (auto d : shape) n *= d;
      t.bytes = t.bytes / [&] { std::uint64_t m = 1; for (auto d : t.shape) m *= d; return m; }() * n;
      t.shape = std::move(shape);
    }
  return files(p);
}

std::string gpt_oss_error(const std::map<std::string, std::string>& fs) { return instantiate_error(fs, "tiny-gpt-oss"); }

}  // namespace

TEST_CASE("tiny gpt-oss bf16: transformers' GptOss tensors (fused experts [experts, in, out], their biases, router weight and bias, q/k/v/o biases, sinks), no quantization_config, and it instantiates as declared bf16 (catches per-expert or [out, in] expert tensors)") {
  const SynthPlan p = gpt_oss_plan(Format::bf16);
  std::map<std::string, std::vector<std::uint64_t>> have;
  for (const auto& t : p.tensors) have[t.name] = t.shape;
  using Shape = std::vector<std::uint64_t>;
  const std::string l = "model.layers.1.";
  CHECK(have.at(l + "mlp.experts.gate_up_proj") == Shape{8, 128, 128});
  CHECK(have.at(l + "mlp.experts.gate_up_proj_bias") == Shape{8, 128});
  CHECK(have.at(l + "mlp.experts.down_proj") == Shape{8, 64, 128});
  CHECK(have.at(l + "mlp.experts.down_proj_bias") == Shape{8, 128});
  CHECK(have.at(l + "mlp.router.weight") == Shape{8, 128});
  CHECK(have.at(l + "mlp.router.bias") == Shape{8});
  CHECK(have.at(l + "self_attn.sinks") == Shape{4});
  CHECK(have.at(l + "self_attn.q_proj.bias") == Shape{128});
  CHECK(have.at(l + "self_attn.k_proj.bias") == Shape{64});
  CHECK(have.at(l + "self_attn.v_proj.bias") == Shape{64});
  CHECK(have.at(l + "self_attn.o_proj.bias") == Shape{128});
  CHECK_FALSE(have.count(l + "mlp.experts.0.gate_proj.weight"));
  CHECK(nlohmann::json::parse(p.config_json).count("quantization_config") == 0);
  const auto g = instantiate_files("tiny-gpt-oss", files(p));
  for (const auto* n : weight_nodes_of(g)) CHECK(*n->weight_format == Format::bf16);
}

TEST_CASE("tiny gpt-oss mxfp4: the experts as U8 *_blocks [experts, out, in / 32, 16] and *_scales [experts, out, in / 32], gpt-oss's quantization_config, the rest bf16; it instantiates with mxfp4 experts only (catches blocks in [in, out] order or quantised attention)") {
  const SynthPlan p = gpt_oss_plan(Format::mxfp4);
  std::map<std::string, const SynthTensor*> have;
  for (const auto& t : p.tensors) have[t.name] = &t;
  using Shape = std::vector<std::uint64_t>;
  const std::string e = "model.layers.0.mlp.experts.";
  CHECK(have.at(e + "gate_up_proj_blocks")->shape == Shape{8, 128, 4, 16});
  CHECK(have.at(e + "gate_up_proj_scales")->shape == Shape{8, 128, 4});
  CHECK(have.at(e + "down_proj_blocks")->shape == Shape{8, 128, 2, 16});
  CHECK(have.at(e + "down_proj_scales")->shape == Shape{8, 128, 2});
  CHECK(have.at(e + "down_proj_blocks")->dtype == "U8");
  CHECK_FALSE(have.count(e + "gate_up_proj"));
  CHECK(have.at(e + "gate_up_proj_bias")->dtype == "BF16");
  CHECK(have.at("model.layers.0.self_attn.q_proj.weight")->dtype == "BF16");
  const auto q = nlohmann::json::parse(p.config_json).at("quantization_config");
  CHECK(q.at("quant_method") == "mxfp4");
  CHECK(q.at("modules_to_not_convert").size() == 4);
  // Scales near 2^e with 6 * 2^e ~ 1 / sqrt(in): in = 128 gives e = -6, codes 120..122.
  const auto scales = tensor_bytes(p, static_cast<std::size_t>(have.at(e + "gate_up_proj_scales") - p.tensors.data()));
  for (auto b : scales) CHECK((static_cast<int>(b) >= 120 && static_cast<int>(b) <= 122));
  const auto g = instantiate_files("tiny-gpt-oss", files(p));
  int mx = 0;
  for (const auto* n : weight_nodes_of(g)) {
    const bool expert = n->op == "moe_gate_up" || n->op == "moe_down";
    CHECK(*n->weight_format == (expert ? Format::mxfp4 : Format::bf16));
    mx += expert;
  }
  CHECK(mx > 0);
  // A circuit without fused experts has nothing MXFP4 synth can write.
  auto llama = plan_synth(circuits(), fixture("tiny-llama"), "tiny-llama/config.json", SynthOptions{1, Format::mxfp4});
  REQUIRE_FALSE(llama.ok());
  CHECK(llama.error().message.find("synth writes MXFP4 for fused expert tensors (gpt-oss) only") != std::string::npos);
}

TEST_CASE("a gpt-oss checkpoint whose fused expert tensors disagree with config.json is refused naming the tensor, its shape, the file and config.json's geometry (catches an expert layout read unchecked)") {
  const std::string e = "model.layers.0.mlp.experts.";
  // bf16 stored [experts, out, in] (the transpose of transformers' parameter).
  const std::string t = gpt_oss_error(with_shape(gpt_oss_plan(Format::bf16), e + "down_proj", {8, 128, 64}));
  CHECK(t.find("tensor '" + e + "down_proj' (") != std::string::npos);
  CHECK(t.find("model.safetensors): shape [8, 128, 64] disagrees with [experts, in, out] = [8, 64, 128]") != std::string::npos);
  CHECK(t.find("8 experts, 128 outputs, 64 inputs from config.json") != std::string::npos);
  // MXFP4 blocks of the wrong group count and scales of the wrong shape.
  const std::string b = gpt_oss_error(with_shape(gpt_oss_plan(Format::mxfp4), e + "gate_up_proj_blocks", {8, 128, 2, 32}));
  CHECK(b.find("tensor '" + e + "gate_up_proj_blocks' (") != std::string::npos);
  CHECK(b.find("model.safetensors): shape [8, 128, 2, 32] disagrees with [8, 128, 4, 16]") != std::string::npos);
  const std::string s = gpt_oss_error(with_shape(gpt_oss_plan(Format::mxfp4), e + "down_proj_scales", {8, 2, 128}));
  CHECK(s.find("tensor '" + e + "down_proj_scales' (") != std::string::npos);
  CHECK(s.find("model.safetensors): shape [8, 2, 128] disagrees with [8, 128, 2]") != std::string::npos);
  // MXFP4 blocks under a config that declares no quantization.
  auto fs = files(gpt_oss_plan(Format::mxfp4));
  auto j = nlohmann::ordered_json::parse(fs.at("config.json"));
  j.erase("quantization_config");
  fs["config.json"] = j.dump(2);
  const std::string u = gpt_oss_error(fs);
  CHECK(u.find("dtype U8 holds packed 4-bit weights, but no quantization config names a 4-bit format") != std::string::npos);
  // Neither form present.
  SynthPlan none = gpt_oss_plan(Format::bf16);
  std::erase_if(none.tensors, [&](const SynthTensor& x) { return x.name == e + "gate_up_proj"; });
  const std::string n = gpt_oss_error(files(none));
  CHECK(n.find("neither '" + e + "gate_up_proj' nor the MXFP4 pair '" + e + "gate_up_proj_blocks' and '" + e +
               "gate_up_proj_scales' is in the safetensors headers") != std::string::npos);
}

namespace {

SynthPlan gemma4_moe_plan() {
  auto p = plan_synth(circuits(), oracle_config("tiny-gemma4-moe"), "tiny-gemma4-moe.json", SynthOptions{1, Format::bf16});
  REQUIRE_MESSAGE(p.ok(), (p.ok() ? "" : p.error().message));
  return std::move(p).value();
}

}  // namespace

TEST_CASE("tiny Gemma-4 MoE: transformers' Gemma4 tensors (router.proj [experts, hidden], router.scale [hidden], router.per_expert_scale [experts], experts.gate_up_proj [experts, 2 * moe_inter, hidden], experts.down_proj [experts, hidden, moe_inter], the three extra feed-forward norms), bf16, the scale vectors near 1, and it instantiates as declared (catches per-expert or [in, out] expert tensors, or scales drawn as projections)") {
  const SynthPlan p = gemma4_moe_plan();
  std::map<std::string, const SynthTensor*> have;
  for (const auto& t : p.tensors) have[t.name] = &t;
  using Shape = std::vector<std::uint64_t>;
  for (const std::string l : {"model.layers.0.", "model.layers.1."}) {  // a sliding and a full layer
    CAPTURE(l);
    CHECK(have.at(l + "router.proj.weight")->shape == Shape{8, 256});
    CHECK(have.at(l + "router.scale")->shape == Shape{256});
    CHECK(have.at(l + "router.per_expert_scale")->shape == Shape{8});
    CHECK(have.at(l + "experts.gate_up_proj")->shape == Shape{8, 256, 256});
    CHECK(have.at(l + "experts.down_proj")->shape == Shape{8, 256, 128});
    for (const char* norm : {"post_feedforward_layernorm_1", "pre_feedforward_layernorm_2", "post_feedforward_layernorm_2"})
      CHECK(have.at(l + norm + ".weight")->shape == Shape{256});
    CHECK_FALSE(have.count(l + "experts.0.gate_proj.weight"));
    for (const char* t : {"router.scale", "router.per_expert_scale", "experts.gate_up_proj", "experts.down_proj"})
      CHECK(have.at(l + t)->dtype == "BF16");
  }
  // The scale vectors near 1 (as norm weights), so routing turns on the projection, not on them.
  for (const char* t : {"model.layers.0.router.scale", "model.layers.0.router.per_expert_scale"}) {
    CAPTURE(t);
    const auto bytes = tensor_bytes(p, static_cast<std::size_t>(have.at(t) - p.tensors.data()));
    for (std::size_t k = 0; k + 1 < bytes.size(); k += 2) {
      const auto u = static_cast<std::uint32_t>(bytes[k]) | static_cast<std::uint32_t>(bytes[k + 1]) << 8;
      const float v = std::bit_cast<float>(u << 16);
      CHECK((v >= 0.89f && v <= 1.11f));
    }
  }
  // The router projection ~ U(-1, 1), not the linear range U(-1/16, 1/16) of its 256 inputs: its
  // input is scaled by hidden^-1/2, which this undoes (bf16 probabilities near 1/8 would tie).
  {
    const auto bytes = tensor_bytes(p, static_cast<std::size_t>(have.at("model.layers.0.router.proj.weight") - p.tensors.data()));
    float most = 0;
    for (std::size_t k = 0; k + 1 < bytes.size(); k += 2) {
      const auto u = static_cast<std::uint32_t>(bytes[k]) | static_cast<std::uint32_t>(bytes[k + 1]) << 8;
      const float v = std::abs(std::bit_cast<float>(u << 16));
      CHECK(v <= 1.0f);
      most = std::max(most, v);
    }
    CHECK(most > 0.9f);
  }
  const auto g = instantiate_files("tiny-gemma4-moe", files(p));
  int experts = 0;
  for (const auto* n : weight_nodes_of(g)) {
    CHECK(*n->weight_format == Format::bf16);
    experts += n->op == "moe_gate_up" || n->op == "moe_down";
  }
  CHECK(experts == 2 * 2);  // gate_up and down of each layer kind (sliding, full)
}

TEST_CASE("a Gemma-4 MoE checkpoint whose expert or router tensors disagree with config.json is refused naming the layer, the tensor, its shape and file and the shape config.json gives (catches an expert layout or a scale vector read unchecked)") {
  const std::string l = "model.layers.1.";
  const std::string gu = instantiate_error(with_shape(gemma4_moe_plan(), l + "experts.gate_up_proj", {8, 256, 128}), "tiny-gemma4-moe");
  CHECK(gu.find("layer 1") != std::string::npos);
  CHECK(gu.find("'" + l + "experts.gate_up_proj' [8, 256, 128] in") != std::string::npos);
  CHECK(gu.find("[8, 256, 256]") != std::string::npos);
  // down_proj stored [experts, in, out] (gpt-oss's orientation) is not Gemma-4's [experts, out, in].
  const std::string dn = instantiate_error(with_shape(gemma4_moe_plan(), l + "experts.down_proj", {8, 128, 256}), "tiny-gemma4-moe");
  CHECK(dn.find("'" + l + "experts.down_proj' [8, 128, 256] in") != std::string::npos);
  CHECK(dn.find("[8, 256, 128]") != std::string::npos);
  const std::string pes = instantiate_error(with_shape(gemma4_moe_plan(), l + "router.per_expert_scale", {4}), "tiny-gemma4-moe");
  CHECK(pes.find("'" + l + "router.per_expert_scale' [4] in") != std::string::npos);
  // More experts in config.json than the tensors hold.
  const std::string more = instantiate_error(with_config(files(gemma4_moe_plan()), "num_experts", 16), "tiny-gemma4-moe");
  CHECK(more.find("[16, 256") != std::string::npos);
}
