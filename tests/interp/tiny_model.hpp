// Test helpers for the emit and interp tests: a tiny Llama-style checkpoint written by the synth
// generator into a temporary directory, emitted into assets on disk the way `met circuit emit` does.
#pragma once

#include <doctest/doctest.h>

#include <filesystem>
#include <optional>
#include <fstream>
#include <iterator>
#include <string>
#include <unistd.h>

#include "emit/emit.hpp"
#include "emit/verify.hpp"
#include "model/instantiate.hpp"
#include "model/synth.hpp"
#include "planner/library.hpp"
#include "tree/checkpoint_dir.hpp"
#include "tree/disk_tree.hpp"

namespace met::testing {

// 2 layers, hidden 64, 4 heads of 16, 2 KV heads (GQA), inter 128, vocab 256, plain rope. A GPU
// class's plan needs hidden 128 (heads of 32, the smallest its attention bodies take; the rules'
// `requires` turn smaller heads into gaps).
inline std::string tiny_llama_config(int layers = 2, int hidden = 64) {
  return R"({"architectures": ["LlamaForCausalLM"], "hidden_size": )" + std::to_string(hidden) + R"(, "intermediate_size": 128,
  "num_attention_heads": 4, "num_hidden_layers": )" + std::to_string(layers) + R"(, "num_key_value_heads": 2,
  "rms_norm_eps": 1e-05, "rope_theta": 10000.0, "tie_word_embeddings": false, "vocab_size": 256,
  "max_position_embeddings": 2048, "torch_dtype": "bfloat16"})";
}

struct TreeLib {
  MemTree tree;
  planner::Library lib;
  TreeLib() : TreeLib(snapshot(DiskTree(std::string(MET_SOURCE_DIR) + "/kernels", "kernels/"))) {}
  explicit TreeLib(MemTree t) : tree(std::move(t)) {
    auto l = planner::load_library(tree);
    REQUIRE_MESSAGE(l.ok(), (l.ok() ? "" : l.error().message));
    lib = std::move(l).value();
    lib.tree = &tree;
  }
};

inline TreeLib& tree_lib() {
  static TreeLib t;
  return t;
}

inline std::filesystem::path temp_dir(const std::string& name) {
  auto p = std::filesystem::temp_directory_path() / ("met-test-" + std::to_string(::getpid()) + "-" + name);
  std::filesystem::remove_all(p);
  std::filesystem::create_directories(p);
  return p;
}

inline void write(const std::filesystem::path& p, const std::string& bytes) {
  std::ofstream f(p, std::ios::binary);
  f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  REQUIRE(f.good());
}

// A synth checkpoint directory (config.json + model.safetensors).
inline std::filesystem::path tiny_checkpoint(const std::string& name, const std::string& config, std::uint64_t seed = 7,
                                             Format dtype = Format::bf16,
                                             model::Fp8Layout layout = model::Fp8Layout::block128) {
  const auto dir = temp_dir(name) / "tiny-llama";
  std::filesystem::create_directories(dir);
  model::SynthOptions so;
  so.seed = seed;
  so.dtype = dtype;
  so.layout = layout;
  auto plan = model::plan_synth(tree_lib().lib.circuits, config, "config.json", so);
  REQUIRE_MESSAGE(plan.ok(), (plan.ok() ? "" : plan.error().message));
  auto files = model::synth_files(*plan, model::kDefaultShardBytes);
  REQUIRE_MESSAGE(files.ok(), (files.ok() ? "" : files.error().message));
  for (const auto& [f, bytes] : *files) write(dir / f, bytes);
  return dir;
}

// The text of a config under tests/oracle/configs/ ("tiny-qwen3.json").
inline std::string oracle_config(const std::string& name) {
  std::ifstream in(std::string(MET_SOURCE_DIR) + "/tests/oracle/configs/" + name);
  REQUIRE(in.good());
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

struct EmitSpec {
  std::string device = "host-cpu";
  std::uint32_t threads = 0;
  std::vector<std::int64_t> rungs = {1, 2, 4};
  std::vector<std::int64_t> buckets = {8, 32};
  std::int64_t max_ctx = 128;
  int tp = 1;  // tensor-parallel ranks (emit --tp)
  std::optional<Format> kv;  // the KV cache format (`met circuit emit --kv-dtype`); unset: bf16, as the CLI's default
  std::int64_t split_keys = 0;  // `met circuit emit --split-keys`; 0: the emit's default
};

inline Expected<emit::Assets> emit_checkpoint(const std::filesystem::path& ckpt, const EmitSpec& spec,
                                              const TreeLib& tl = tree_lib()) {
  MET_TRY(planner::Target target, planner::resolve_target(tl.lib, spec.device));
  DiskCheckpoint src(ckpt.string());
  MET_TRY(model::ModelGraph graph, model::instantiate_checkpoint(tl.tree, tl.lib.circuits, src));
  graph.kv = spec.kv.value_or(Format::bf16);
  MET_TRY(emit::CheckpointLayout layout, emit::read_checkpoint_layout(src));
  MET_TRY(std::string config, src.read("config.json"));
  emit::EmitOptions o;
  o.max_ctx = spec.max_ctx;
  o.decode_rungs = spec.rungs;
  o.prefill_buckets = spec.buckets;
  o.sm_count = spec.threads;
  o.tp = spec.tp;
  o.split_keys = spec.split_keys;
  o.config_json = config;
  o.checkpoint = ckpt.string();
  o.network = emit::network_slug(src.name());
  return emit::emit(tl.lib, target, graph, layout, o);
}

inline model::ModelGraph graph_of(const std::filesystem::path& ckpt, const TreeLib& tl = tree_lib()) {
  DiskCheckpoint src(ckpt.string());
  auto g = model::instantiate_checkpoint(tl.tree, tl.lib.circuits, src);
  REQUIRE_MESSAGE(g.ok(), (g.ok() ? "" : g.error().message));
  return std::move(g).value();
}

// Emits and writes model.pkt, weights.json, build.json and the checkpoint link into dir.
inline std::filesystem::path write_assets(const std::filesystem::path& ckpt, const EmitSpec& spec, const std::string& name) {
  auto a = emit_checkpoint(ckpt, spec);
  REQUIRE_MESSAGE(a.ok(), (a.ok() ? "" : a.error().message));
  std::vector<const emit::PacketFile*> ranks{&a->packet};
  for (const auto& p : a->other_ranks) ranks.push_back(&p);
  for (const auto* pf : ranks) {
    const auto problems = emit::verify(*pf, emit::opcode_table());
    std::string all;
    for (const auto& p : problems) all += p + "\n";
    REQUIRE_MESSAGE(problems.empty(), all);
  }
  const auto dir = temp_dir(name);
  write(dir / "model.pkt", emit::serialize(a->packet));
  for (std::size_t r = 0; r < a->other_ranks.size(); ++r)
    write(dir / ("model.rank" + std::to_string(r + 1) + ".pkt"), emit::serialize(a->other_ranks[r]));
  write(dir / "weights.json", emit::to_json(a->weights));
  write(dir / "build.json", a->build_json);
  std::filesystem::create_directory_symlink(std::filesystem::absolute(ckpt), dir / "checkpoint");
  return dir;
}

}  // namespace met::testing
