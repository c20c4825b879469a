// `met model synth`: writes a Hugging Face checkpoint directory with seeded weights. The model
// layer plans tensors and generates bytes by element range; this file only streams them to disk
// (into DIR.tmp-<pid>, renamed to DIR at the end), generating each chunk on several threads.
#include <fmt/format.h>

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>
#include <thread>

#include "cli/commands.hpp"
#include "cli/embedded_tree.hpp"
#include "core/suggest.hpp"
#include "model/circuit.hpp"
#include "model/quant.hpp"
#include "model/safetensors.hpp"
#include "model/synth.hpp"
#include "tree/kernel_tree.hpp"

namespace met::cli {
namespace {

namespace fs = std::filesystem;

constexpr std::uint64_t kChunkBytes = 64ull << 20;      // generated then written per step
constexpr std::uint64_t kProgressFrom = 1ull << 30;     // models this big report progress
constexpr std::uint64_t kProgressEvery = 1ull << 30;

struct SynthArgs {
  std::string config, out, dtype = "bf16";
  std::uint64_t seed = 0;
  std::uint64_t shard_bytes = model::kDefaultShardBytes;
  unsigned threads = 0;
  bool force = false;
};

Expected<std::string> read_text(const std::string& path) {
  std::error_code ec;
  if (!fs::is_regular_file(path, ec)) return fail(fmt::format("{}: no such file", path));
  std::ifstream in(path, std::ios::binary);
  if (!in) return fail(fmt::format("{}: cannot read", path));
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Streams the planned shards, config and index into dir.
class Writer {
 public:
  Writer(const model::SynthPlan& plan, unsigned threads) : plan_(plan), threads_(std::max(1u, threads)) {}

  Expected<void> write_file(const fs::path& path, const std::string& bytes) {
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    out.close();
    if (!out) return fail(fmt::format("{}: write failed", path.string()));
    return {};
  }

  Expected<void> write_shard(const fs::path& path, const model::SynthShard& shard) {
    std::FILE* f = std::fopen(path.c_str(), "wb");
    if (!f) return fail(fmt::format("{}: cannot create", path.string()));
    std::unique_ptr<std::FILE, int (*)(std::FILE*)> guard(f, &std::fclose);
    if (std::fwrite(shard.header.data(), 1, shard.header.size(), f) != shard.header.size()) {
      return fail(fmt::format("{}: write failed", path.string()));
    }
    std::vector<std::byte> buf;
    for (auto t : shard.tensors) {
      const std::uint64_t total = plan_.tensors[t].bytes;
      for (std::uint64_t at = 0; at < total; at += kChunkBytes) {
        const std::uint64_t n = std::min(kChunkBytes, total - at);
        buf.resize(n);
        generate(t, at, buf);
        if (std::fwrite(buf.data(), 1, n, f) != n) return fail(fmt::format("{}: write failed", path.string()));
        progress(n, path);
      }
    }
    if (std::fflush(f) != 0) return fail(fmt::format("{}: write failed", path.string()));
    return {};
  }

 private:
  // Splits one chunk among the threads; bytes depend only on (tensor, offset).
  void generate(std::size_t t, std::uint64_t at, std::vector<std::byte>& buf) {
    const std::uint64_t n = buf.size();
    constexpr std::uint64_t kMinPerThread = 1u << 20;
    const auto workers = static_cast<unsigned>(std::min<std::uint64_t>(threads_, std::max<std::uint64_t>(1, n / kMinPerThread)));
    if (workers <= 1) {
      model::synth_bytes(plan_, t, at, buf);
      return;
    }
    std::vector<std::thread> pool;
    const std::uint64_t step = (n + workers - 1) / workers;
    for (unsigned w = 0; w < workers; ++w) {
      const std::uint64_t b = std::min(n, w * step), e = std::min(n, b + step);
      if (b == e) continue;
      pool.emplace_back([&, b, e] { model::synth_bytes(plan_, t, at + b, std::span<std::byte>(buf.data() + b, e - b)); });
    }
    for (auto& th : pool) th.join();
  }

  void progress(std::uint64_t n, const fs::path& file) {
    done_ += n;
    if (plan_.total_bytes < kProgressFrom) return;
    if (done_ - reported_ < kProgressEvery && done_ != plan_.total_bytes) return;
    reported_ = done_;
    std::fprintf(stderr, "synth: %s: %.1f of %.1f GB\n", file.filename().c_str(), static_cast<double>(done_) / 1e9,
                 static_cast<double>(plan_.total_bytes) / 1e9);
  }

  const model::SynthPlan& plan_;
  unsigned threads_;
  std::uint64_t done_ = 0, reported_ = 0;
};

int run_synth(const SynthArgs& a) {
  const auto dtype = model::parse_synth_dtype(a.dtype);
  if (!dtype) {
    return error(fmt::format("--dtype: unknown dtype '{}': {}", a.dtype, suggest(a.dtype, model::synth_dtype_names())));
  }
  if (a.shard_bytes == 0) return error("--shard-bytes: must be positive");
  auto text = read_text(a.config);
  if (!text) return error(text.error().message);

  MemTree tree(embedded_kernel_files(), "kernels/");
  auto circuits = model::load_circuits(tree);
  if (!circuits) return error(circuits.error().message);
  auto plan = model::plan_synth(*circuits, *text, a.config, model::SynthOptions{a.seed, dtype->dtype, dtype->layout});
  if (!plan) return error(plan.error().message);
  auto shards = model::shard_synth(*plan, a.shard_bytes);
  if (!shards) return error(shards.error().message);

  std::string out = a.out;
  while (out.size() > 1 && out.back() == '/') out.pop_back();
  std::error_code ec;
  if (fs::exists(out, ec)) {
    if (!fs::is_directory(out, ec)) return error(fmt::format("{}: exists and is not a directory", out));
    if (!fs::is_empty(out, ec) && !a.force) {
      return error(fmt::format("{}: directory is not empty (--force replaces it)", out));
    }
  }
  const fs::path tmp = fmt::format("{}.tmp-{}", out, ::getpid());
  fs::remove_all(tmp, ec);
  if (!fs::create_directories(tmp, ec)) return error(fmt::format("{}: cannot create: {}", tmp.string(), ec.message()));
  auto cleanup = [&](const std::string& message) {
    std::error_code ignored;
    fs::remove_all(tmp, ignored);
    return error(message);
  };

  Writer w(*plan, a.threads ? a.threads : std::thread::hardware_concurrency());
  if (auto r = w.write_file(tmp / "config.json", plan->config_json); !r) return cleanup(r.error().message);
  if (!plan->hf_quant_config_json.empty()) {
    if (auto r = w.write_file(tmp / model::kHfQuantFile, plan->hf_quant_config_json); !r) return cleanup(r.error().message);
  }
  for (const auto& s : *shards) {
    if (auto r = w.write_shard(tmp / s.file, s); !r) return cleanup(r.error().message);
  }
  if (shards->size() > 1) {
    if (auto r = w.write_file(tmp / model::kIndexFile, model::index_json(*plan, *shards)); !r) return cleanup(r.error().message);
  }
  if (fs::exists(out, ec)) {
    fs::remove_all(out, ec);
    if (ec) return cleanup(fmt::format("{}: cannot replace: {}", out, ec.message()));
  }
  fs::rename(tmp, out, ec);
  if (ec) return cleanup(fmt::format("{}: cannot rename {} into place: {}", out, tmp.string(), ec.message()));
  std::fprintf(stderr, "synth: wrote %s (%zu tensors, %zu file%s, %.3f GB, %s, seed %llu)\n", out.c_str(),
               plan->tensors.size(), shards->size(), shards->size() == 1 ? "" : "s",
               static_cast<double>(plan->total_bytes) / 1e9, a.dtype.c_str(), static_cast<unsigned long long>(a.seed));
  return 0;
}

}  // namespace

void add_model_commands(CLI::App& model, std::vector<Command>& out) {
  auto args = std::make_shared<SynthArgs>();
  auto* synth = model.add_subcommand("synth", "write a Hugging Face checkpoint directory with seeded random weights");
  synth->add_option("--config", args->config, "config.json of the model (its architecture picks the circuit)")->required();
  synth->add_option("--seed", args->seed, "generator seed: same seed, same bytes")->required();
  synth->add_option("--dtype", args->dtype, "bf16 | fp8-block128 (Qwen3-FP8: 128x128 block scales, dynamic activations) | fp8-modelopt (nvidia "
                    "modelopt FP8: per-tensor weight and input scales, fp8 KV scales) | fp8-e4m3 (= fp8-block128)")->capture_default_str();
  synth->add_option("--out", args->out, "checkpoint directory to write")->required();
  synth->add_option("--shard-bytes", args->shard_bytes, "split into model-0000k-of-0000n.safetensors past this many bytes")
      ->capture_default_str();
  synth->add_option("--threads", args->threads, "generator threads (default: every core; bytes do not depend on it)");
  synth->add_flag("--force", args->force, "replace a non-empty --out directory");
  out.push_back({synth, [args] { return run_synth(*args); }});
}

}  // namespace met::cli
