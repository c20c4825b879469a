// weights.json (src/emit/weights_manifest.cpp): entries built from synthetic checkpoints point at
// the right bytes, stacking and scale rules are enforced, the text round-trips and the parser is
// strict about keys and types.
#include <doctest/doctest.h>

#include <nlohmann/json.hpp>

#include <cstring>
#include <span>

#include "emit/weights_manifest.hpp"
#include "model/checkpoint.hpp"
#include "model/instantiate.hpp"
#include "model/synth.hpp"
#include "tree/disk_tree.hpp"

namespace {

using namespace met;
using namespace met::emit;

const DiskTree& tree() {
  static DiskTree t(std::string(MET_SOURCE_DIR) + "/kernels", "kernels/");
  return t;
}

const std::map<std::string, model::Circuit>& circuits() {
  static const auto c = [] {
    auto r = model::load_circuits(tree());
    REQUIRE(r.ok());
    return std::move(r).value();
  }();
  return c;
}

std::map<std::string, std::string> synth(const std::string& name, Format dtype, std::uint64_t shard = model::kDefaultShardBytes) {
  DiskCheckpoint d(std::string(MET_SOURCE_DIR) + "/tests/model/fixtures/" + name);
  auto cfg = d.read("config.json");
  REQUIRE(cfg.ok());
  auto p = model::plan_synth(circuits(), *cfg, name, model::SynthOptions{11, dtype});
  REQUIRE_MESSAGE(p.ok(), (p.ok() ? "" : p.error().message));
  auto f = model::synth_files(*p, shard);
  REQUIRE(f.ok());
  return *f;
}

// A modelopt fp8 plan of a fixture, for tests that change its tensors before writing the files.
model::SynthPlan modelopt_plan(const std::string& name) {
  DiskCheckpoint d(std::string(MET_SOURCE_DIR) + "/tests/model/fixtures/" + name);
  auto cfg = d.read("config.json");
  REQUIRE(cfg.ok());
  auto p = model::plan_synth(circuits(), *cfg, name, model::SynthOptions{11, Format::fp8_e4m3, model::Fp8Layout::modelopt});
  REQUIRE_MESSAGE(p.ok(), (p.ok() ? "" : p.error().message));
  return *p;
}

std::map<std::string, std::string> files_of(const model::SynthPlan& p) {
  auto f = model::synth_files(p, model::kDefaultShardBytes);
  REQUIRE(f.ok());
  return *f;
}

// The manifest's error for a checkpoint (instantiation must succeed).
std::string manifest_error(const model::MemCheckpoint& src) {
  auto g = model::instantiate_checkpoint(tree(), circuits(), src);
  REQUIRE_MESSAGE(g.ok(), (g.ok() ? "" : g.error().message));
  auto m = build_weights_manifest(circuits().at(g->circuit), *g, src, "/ckpt/" + src.name());
  REQUIRE_FALSE(m.ok());
  return m.error().message;
}

WeightsManifest manifest_of(const model::MemCheckpoint& src) {
  auto g = model::instantiate_checkpoint(tree(), circuits(), src);
  REQUIRE_MESSAGE(g.ok(), (g.ok() ? "" : g.error().message));
  auto m = build_weights_manifest(circuits().at(g->circuit), *g, src, "/ckpt/" + src.name());
  REQUIRE_MESSAGE(m.ok(), (m.ok() ? "" : m.error().message));
  return *m;
}

const WeightEntry& entry(const WeightsManifest& m, const std::string& name) {
  for (const auto& e : m.tensors) {
    if (e.name == name) return e;
  }
  FAIL("no entry " << name);
  return m.tensors.front();
}

}  // namespace

TEST_CASE("fused qkv entry stacks q, k, v in order and each part's offset points at that tensor's bytes (catches offsets relative to the header end)") {
  model::MemCheckpoint src("Tiny-Llama", synth("tiny-llama", Format::bf16, 40'000));
  const WeightsManifest m = manifest_of(src);
  CHECK(m.network == "tiny-llama");
  CHECK(m.checkpoint == "/ckpt/Tiny-Llama");
  const WeightEntry& qkv = entry(m, "model.layers.1.self_attn.qkv");
  CHECK(qkv.dtype == "bf16");
  CHECK(qkv.shape == std::vector<std::uint64_t>{128, 64});
  REQUIRE(qkv.parts.size() == 3);
  CHECK(qkv.parts[0].tensor == "model.layers.1.self_attn.q_proj.weight");
  CHECK(qkv.parts[1].tensor == "model.layers.1.self_attn.k_proj.weight");
  CHECK(qkv.parts[2].tensor == "model.layers.1.self_attn.v_proj.weight");
  CHECK(qkv.parts[1].shape == std::vector<std::uint64_t>{32, 64});
  CHECK(qkv.scale_parts.empty());
  CHECK(entry(m, "model.layers.0.mlp.gate_up").shape == std::vector<std::uint64_t>{256, 64});
  CHECK(entry(m, "lm_head.weight").parts[0].tensor == "lm_head.weight");
  CHECK(m.tensors.size() == 1 + 2 * 6 + 2);
  // Offsets address the tensor bytes in the (sharded) files: compare with a re-synthesis.
  DiskCheckpoint d(std::string(MET_SOURCE_DIR) + "/tests/model/fixtures/tiny-llama");
  auto p = model::plan_synth(circuits(), *d.read("config.json"), "tiny-llama", model::SynthOptions{11, Format::bf16});
  REQUIRE(p.ok());
  for (const auto& e : m.tensors) {
    for (const auto& part : e.parts) {
      std::size_t t = 0;
      while (p->tensors[t].name != part.tensor) ++t;
      std::string want(part.bytes, '\0');
      model::synth_bytes(*p, t, 0, std::span<std::byte>(reinterpret_cast<std::byte*>(want.data()), want.size()));
      CAPTURE(part.tensor);
      CHECK(src.files().at(part.file).substr(part.offset, part.bytes) == want);
    }
  }
}

TEST_CASE("tied lm_head gets an entry over the embedding's bytes; qwen3 q/k norms are entries (catches a tied head without weights)") {
  model::MemCheckpoint src("tiny-qwen3", synth("tiny-qwen3", Format::bf16));
  const WeightsManifest m = manifest_of(src);
  const WeightEntry& head = entry(m, "lm_head.weight");
  REQUIRE(head.parts.size() == 1);
  CHECK(head.parts[0].tensor == "model.embed_tokens.weight");
  CHECK(head.parts[0].offset == entry(m, "model.embed_tokens.weight").parts[0].offset);
  CHECK(entry(m, "model.layers.0.self_attn.q_norm.weight").shape == std::vector<std::uint64_t>{32});
  CHECK(m.tensors.size() == 1 + 2 * 8 + 2);
}

TEST_CASE("fp8 entries carry one 128x128 F32 scale part per weight part (catches scales left out of a fused entry)") {
  model::MemCheckpoint src("tiny-qwen3-fp8", synth("tiny-qwen3", Format::fp8_e4m3));
  const WeightsManifest m = manifest_of(src);
  const WeightEntry& qkv = entry(m, "model.layers.0.self_attn.qkv");
  CHECK(qkv.dtype == "fp8-e4m3");
  CHECK(qkv.shape == std::vector<std::uint64_t>{256, 128});
  REQUIRE(qkv.scale_parts.size() == 3);
  CHECK(qkv.scale_parts[1].tensor == "model.layers.0.self_attn.k_proj.weight_scale_inv");
  CHECK(qkv.scale_parts[1].shape == std::vector<std::uint64_t>{1, 1});
  CHECK(qkv.block == std::vector<std::uint64_t>{128, 128});
  CHECK(entry(m, "model.norm.weight").scale_parts.empty());
  CHECK(entry(m, "model.norm.weight").block.empty());
  const auto again = parse_weights_manifest(to_json(m), "weights.json");
  REQUIRE_MESSAGE(again.ok(), (again.ok() ? "" : again.error().message));
  CHECK(to_json(*again) == to_json(m));
}

TEST_CASE("make_entry refuses parts that do not stack, mixed dtypes, fp8 without scales (catches stacking q_proj with down_proj)") {
  auto fs = synth("tiny-llama", Format::bf16);
  model::MemCheckpoint src("t", fs);
  auto layout = read_checkpoint_layout(src);
  REQUIRE(layout.ok());
  auto bad = make_entry("x", {"model.layers.0.self_attn.q_proj.weight", "model.layers.0.mlp.down_proj.weight"}, *layout, "t");
  REQUIRE_FALSE(bad.ok());
  CHECK(bad.error().message ==
        "t: weight 'x': parts do not stack along dim 0: 'model.layers.0.self_attn.q_proj.weight' is [64, 64], "
        "'model.layers.0.mlp.down_proj.weight' is [64, 128]");
  auto missing = make_entry("y", {"model.layers.9.self_attn.q_proj.weight"}, *layout, "t");
  REQUIRE_FALSE(missing.ok());
  CHECK(missing.error().message == "t: weight 'y': no tensor 'model.layers.9.self_attn.q_proj.weight' in the safetensors headers");

  CheckpointLayout l2 = *layout;
  l2.tensors.at("model.layers.0.self_attn.k_proj.weight").dtype = "F16";
  auto mixed = make_entry("z", {"model.layers.0.self_attn.q_proj.weight", "model.layers.0.self_attn.k_proj.weight"}, l2, "t");
  REQUIRE_FALSE(mixed.ok());
  CHECK(mixed.error().message.find("parts disagree in dtype") != std::string::npos);

  auto f8 = synth("tiny-llama", Format::fp8_e4m3);
  model::MemCheckpoint src8("t8", f8);
  auto l8 = read_checkpoint_layout(src8);
  REQUIRE(l8.ok());
  auto ok = make_entry("o", {"model.layers.0.self_attn.o_proj.weight"}, *l8, "t8");
  REQUIRE(ok.ok());
  CHECK(ok->scale_parts.size() == 1);
  l8->tensors.erase("model.layers.0.self_attn.o_proj.weight_scale_inv");
  auto noscale = make_entry("o", {"model.layers.0.self_attn.o_proj.weight"}, *l8, "t8");
  REQUIRE_FALSE(noscale.ok());
  CHECK(noscale.error().message.find("F8_E4M3 tensor 'model.layers.0.self_attn.o_proj.weight' has no scale: neither "
                                     "'model.layers.0.self_attn.o_proj.weight_scale_inv'") != std::string::npos);
  l8->tensors.at("model.layers.0.self_attn.q_proj.weight_scale_inv").shape = {2, 1};
  auto wrong = make_entry("q", {"model.layers.0.self_attn.q_proj.weight"}, *l8, "t8");
  REQUIRE_FALSE(wrong.ok());
  CHECK(wrong.error().message.find("expected F32 [1, 1]") != std::string::npos);
}

TEST_CASE("the parser is strict: unknown keys, wrong types, bad schema, parts that disagree with the shape (catches silently defaulted fields)") {
  model::MemCheckpoint src("tiny-llama", synth("tiny-llama", Format::bf16));
  const std::string good = to_json(manifest_of(src));
  REQUIRE(parse_weights_manifest(good, "w.json").ok());
  auto mutate = [&](auto fn) {
    auto j = nlohmann::json::parse(good);
    fn(j);
    auto r = parse_weights_manifest(j.dump(), "w.json");
    REQUIRE_FALSE(r.ok());
    return r.error().message;
  };
  CHECK(mutate([](auto& j) { j["extra"] = 1; }) ==
        "w.json: unknown key 'extra' (known: checkpoint, kv_scales, network, schema, tensors)");
  CHECK(mutate([](auto& j) { j["schema"] = "met-weights/2"; }) == "w.json: schema 'met-weights/2', this met reads 'met-weights/1'");
  CHECK(mutate([](auto& j) { j["tensors"][1]["dtype"] = 3; }) ==
        "w.json: tensors 1 'model.layers.0.input_layernorm.weight': 'dtype' is an integer, expected a string");
  CHECK(mutate([](auto& j) { j["tensors"][2]["parts"][1]["bytes"] = -1; }) ==
        "w.json: tensors 2 'model.layers.0.self_attn.qkv': parts 1: 'bytes' is an integer, expected a non-negative integer");
  CHECK(mutate([](auto& j) { j["tensors"][2]["parts"][1]["colour"] = "red"; }).find("parts 1: unknown key 'colour'") !=
        std::string::npos);
  CHECK(mutate([](auto& j) { j["tensors"][2]["shape"][0] = 129; }) ==
        "w.json: tensors 2 'model.layers.0.self_attn.qkv': shape [129, 64] but the parts stack to [128, 64]");
  CHECK(mutate([](auto& j) { j["tensors"][2]["parts"][0]["bytes"] = 10; }).find("needs 8192 bytes, the part says 10") !=
        std::string::npos);
  CHECK(mutate([](auto& j) { j["tensors"][2]["parts"][0]["file"] = "../x.safetensors"; }).find("is not a file name inside the checkpoint") !=
        std::string::npos);
  CHECK(mutate([](auto& j) { j["tensors"][3] = j["tensors"][2]; }).find("duplicate name 'model.layers.0.self_attn.qkv'") !=
        std::string::npos);
  CHECK(mutate([](auto& j) { j["tensors"][2].erase("scale_parts"); }).find("missing key 'scale_parts'") != std::string::npos);
  CHECK(mutate([](auto& j) { j["tensors"][2]["block"] = {128, 128}; }).find("'block' without 'scale_parts'") != std::string::npos);
}

TEST_CASE("network slug is the lower-cased directory name, trailing slashes ignored (catches a slug from the full path)") {
  CHECK(network_slug("/models/Meta-Llama-3.1-8B/") == "meta-llama-3.1-8b");
  CHECK(network_slug("Qwen3-0.6B") == "qwen3-0.6b");
  CHECK(entry_name({"a.b.q_proj.weight", "a.b.k_proj.weight"}, "qkv") == "a.b.qkv");
  CHECK(entry_name({"a.b.weight"}, "norm") == "a.b.weight");
}

TEST_CASE("a role-less node's entry is named by its op: a layer's expert gate/up and down get two names (catches both named 'fused', which the manifest refuses as shared)") {
  const std::vector<std::string> gate_up = {"m.experts.0.gate_proj.weight", "m.experts.0.up_proj.weight",
                                            "m.experts.1.gate_proj.weight", "m.experts.1.up_proj.weight"};
  const std::vector<std::string> down = {"m.experts.0.down_proj.weight", "m.experts.1.down_proj.weight"};
  CHECK(entry_name(gate_up, "", "moe_gate_up") == "m.experts.moe_gate_up");
  CHECK(entry_name(down, "", "moe_down") == "m.experts.moe_down");
}

TEST_CASE("modelopt fp8: per-tensor weight and input scales per fused part, lm_head bf16, and the manifest round-trips (catches a fused entry with one scale)") {
  const auto p = modelopt_plan("tiny-llama");
  model::MemCheckpoint src("tiny-llama-mo", files_of(p));
  const auto m = manifest_of(src);
  const auto& qkv = entry(m, "model.layers.0.self_attn.qkv");
  CHECK(qkv.dtype == "fp8-e4m3");
  CHECK(qkv.block.empty());
  REQUIRE(qkv.scale_parts.size() == 3);
  REQUIRE(qkv.input_scale_parts.size() == 3);
  CHECK(qkv.scale_parts[1].tensor == "model.layers.0.self_attn.k_proj.weight_scale");
  CHECK(qkv.scale_parts[1].shape.empty());
  CHECK(qkv.input_scale_parts[2].tensor == "model.layers.0.self_attn.v_proj.input_scale");
  CHECK(entry(m, "lm_head.weight").dtype == "bf16");
  auto back = parse_weights_manifest(to_json(m), "w.json");
  REQUIRE_MESSAGE(back.ok(), (back.ok() ? "" : back.error().message));
  CHECK(to_json(*back) == to_json(m));
}

TEST_CASE("modelopt fp8 checkpoints that disagree with hf_quant_config.json are refused with located errors (catches a missing KV or input scale, an excluded module in fp8, a wrong scale shape, a block/per-tensor mix-up)") {
  const auto base = modelopt_plan("tiny-llama");
  auto without = [&](const std::string& tensor) {
    model::SynthPlan p = base;
    const auto n = p.tensors.size();
    std::erase_if(p.tensors, [&](const model::SynthTensor& t) { return t.name == tensor; });
    REQUIRE(p.tensors.size() + 1 == n);
    return model::MemCheckpoint("ckpt", files_of(p));
  };
  CHECK(manifest_error(without("model.layers.1.self_attn.k_proj.k_scale")) ==
        "checkpoints/ckpt/: weight 'model.layers.1.self_attn.qkv': hf_quant_config.json declares kv_cache_quant_algo FP8, but there is "
        "no 'model.layers.1.self_attn.k_proj.k_scale'");
  CHECK(manifest_error(without("model.layers.0.mlp.down_proj.input_scale")) ==
        "checkpoints/ckpt/: weight 'model.layers.0.mlp.down_proj.weight': hf_quant_config.json declares static fp8 activations, but "
        "'model.layers.0.mlp.down_proj.weight' has no 'model.layers.0.mlp.down_proj.input_scale'");
  const std::string missing = manifest_error(without("model.layers.0.self_attn.o_proj.weight_scale"));
  CHECK(missing.find("F8_E4M3 tensor 'model.layers.0.self_attn.o_proj.weight' has no scale") != std::string::npos);

  auto files = files_of(base);
  files["hf_quant_config.json"] =
      R"({"quantization": {"quant_algo": "FP8", "kv_cache_quant_algo": "FP8", "exclude_modules": ["lm_head", "model.layers.0.mlp.down_proj"]}})";
  CHECK(manifest_error(model::MemCheckpoint("ckpt", files)) ==
        "checkpoints/ckpt/: weight 'model.layers.0.mlp.down_proj.weight': tensor 'model.layers.0.mlp.down_proj.weight' is F8_E4M3, but "
        "hf_quant_config.json keeps it unquantised (excluded by its exclude_modules)");

  files = files_of(base);
  files.erase("hf_quant_config.json");
  auto cfg = nlohmann::json::parse(files.at("config.json"));
  cfg["quantization_config"] = {{"quant_method", "fp8"}, {"fmt", "e4m3"}, {"activation_scheme", "dynamic"}, {"weight_block_size", {128, 128}}};
  files["config.json"] = cfg.dump();
  const std::string mixed = manifest_error(model::MemCheckpoint("ckpt", files));
  CHECK(mixed.find("config.json quantization_config declares quant_method fp8 with block scales "
                   "('model.layers.0.self_attn.q_proj.weight_scale_inv'), but 'model.layers.0.self_attn.q_proj.weight' has a "
                   "per-tensor 'model.layers.0.self_attn.q_proj.weight_scale'") != std::string::npos);

  model::SynthPlan bad = base;
  for (auto& t : bad.tensors) {
    if (t.name == "model.layers.0.self_attn.o_proj.weight_scale") t.shape = {1};
  }
  auto layout = read_checkpoint_layout(model::MemCheckpoint("ckpt", files_of(bad)));
  REQUIRE(layout.ok());
  auto wrong = make_entry("o", {"model.layers.0.self_attn.o_proj.weight"}, *layout, "ckpt");
  REQUIRE_FALSE(wrong.ok());
  CHECK(wrong.error().message == "ckpt: weight 'o': scale 'model.layers.0.self_attn.o_proj.weight_scale' is F32 [1], expected "
                                 "F32 [] (one scale per tensor)");
}

TEST_CASE("an unknown quant_algo in hf_quant_config.json is refused naming the file and the known ones") {
  auto files = files_of(modelopt_plan("tiny-llama"));
  files["hf_quant_config.json"] = R"({"quantization": {"quant_algo": "FP9", "exclude_modules": ["lm_head"]}})";
  model::MemCheckpoint src("ckpt", files);
  auto g = model::instantiate_checkpoint(tree(), circuits(), src);
  REQUIRE_FALSE(g.ok());
  CHECK(g.error().message.find("hf_quant_config.json: unsupported quant_algo 'FP9' (known: FP8, NVFP4, MXFP4)") != std::string::npos);
}

TEST_CASE("modelopt's calibrated KV scales are read from the weight bytes by layer, round-trip through weights.json, and bad ones are refused naming the tensor (catches a scale read from the wrong offset, or k and v swapped)") {
  const auto p = modelopt_plan("tiny-llama");
  model::MemCheckpoint src("ckpt", files_of(p));
  auto layout = read_checkpoint_layout(src);
  REQUIRE(layout.ok());
  auto value_of = [&](const std::string& name) {
    for (std::size_t t = 0; t < p.tensors.size(); ++t) {
      if (p.tensors[t].name != name) continue;
      float v = 0;
      model::synth_bytes(p, t, 0, std::span<std::byte>(reinterpret_cast<std::byte*>(&v), sizeof v));
      return v;
    }
    FAIL("no tensor " << name);
    return 0.0f;
  };
  auto scales = calibrated_kv_scales(*layout, "ckpt");
  REQUIRE_MESSAGE(scales.ok(), (scales.ok() ? "" : scales.error().message));
  REQUIRE(scales->size() == 2);
  for (const auto& [layer, s] : *scales) {
    const std::string attn = "model.layers." + std::to_string(layer);
    CHECK(s.layer == layer);
    CHECK(s.k.tensor == attn + kKScaleSuffix);
    CHECK(s.v.tensor == attn + kVScaleSuffix);
    CHECK(s.k_scale == value_of(s.k.tensor));
    CHECK(s.v_scale == value_of(s.v.tensor));
    CHECK(s.k_scale != s.v_scale);  // the synth draws each: a swap would show
  }
  WeightsManifest m;
  m.network = "ckpt";
  m.checkpoint = "ckpt";
  for (const auto& [layer, s] : *scales) m.kv_scales.push_back(s);
  const std::string text = to_json(m);
  auto back = parse_weights_manifest(text, "w.json");
  REQUIRE_MESSAGE(back.ok(), (back.ok() ? "" : back.error().message));
  REQUIRE(back->kv_scales.size() == 2);
  CHECK(back->kv_scales[1].k_scale == m.kv_scales[1].k_scale);
  CHECK(to_json(*back) == text);

  // weights.json: a scale that is not a positive f32, a layer twice.
  auto edited = [&](auto&& change) {
    auto j = nlohmann::json::parse(text);
    change(j);
    auto r = parse_weights_manifest(j.dump(), "w.json");
    REQUIRE_FALSE(r.ok());
    return r.error().message;
  };
  CHECK(edited([](auto& j) { j["kv_scales"][0]["k_scale"] = 0; }) ==
        "w.json: kv_scales 0: 'k_scale' is 0, expected a positive finite f32 value");
  CHECK(edited([](auto& j) { j["kv_scales"][1]["v_scale"] = 0.1; }) ==
        "w.json: kv_scales 1: 'v_scale' is 0.1, expected a positive finite f32 value");
  CHECK(edited([](auto& j) { j["kv_scales"][1]["layer"] = 0; }) == "w.json: kv_scales 1: a second entry for layer 0");
  CHECK(edited([](auto& j) { j["kv_scales"][0].erase("v"); }) == "w.json: kv_scales 0: missing key 'v'");

  // The checkpoint: a scale of 0, a v without its k.
  auto with_value = [&](const std::string& tensor, float v) {
    auto files = files_of(p);
    std::string& st = files.at("model.safetensors");
    const auto& t = layout->tensors.at(tensor);
    std::memcpy(st.data() + layout->data_start.at(t.file) + t.begin, &v, sizeof v);
    model::MemCheckpoint c("ckpt", files);
    auto l = read_checkpoint_layout(c);
    REQUIRE(l.ok());
    auto r = calibrated_kv_scales(*l, "ckpt");
    REQUIRE_FALSE(r.ok());
    return r.error().message;
  };
  CHECK(with_value("model.layers.1.self_attn.v_proj.v_scale", 0.0f) ==
        "ckpt: 'model.layers.1.self_attn.k_proj.k_scale': KV scale 'model.layers.1.self_attn.v_proj.v_scale' is 0; a cache "
        "scale must be finite and positive");
  model::SynthPlan lone = p;
  std::erase_if(lone.tensors, [](const model::SynthTensor& t) { return t.name == "model.layers.0.self_attn.k_proj.k_scale"; });
  model::MemCheckpoint c("ckpt", files_of(lone));
  auto l = read_checkpoint_layout(c);
  REQUIRE(l.ok());
  auto r = calibrated_kv_scales(*l, "ckpt");
  REQUIRE_FALSE(r.ok());
  CHECK(r.error().message ==
        "ckpt: 'model.layers.0.self_attn.v_proj.v_scale': no 'model.layers.0.self_attn.k_proj.k_scale' beside it");
}
