// met_run_bench: how long emit takes and how fast the cpu backend runs, printed (a benchmark
// reports; it never fails the build). Emit: plan + emit of a checkpoint for host-cpu and h200-sxm,
// then serialize + verify. Run: prefill and decode tokens/s of greedy generation on the cpu
// backend, per worker-thread count, after a warm-up, median of the repeats.
//
//   met_run_bench                         the oracle's tiny models (synthesised into a temp dir)
//   met_run_bench --emit DIR              emit timings of the checkpoint DIR (e.g. Llama-3.1-8B shape)
//   met_run_bench --run DIR               emit timings and cpu tokens/s of DIR (e.g. Llama-3.2-1B shape)
// Options: --threads 1,2  --repeats 3  --prompt 32  --decode 16  --source DIR (the checkout whose
// kernels/ and tests/oracle/configs/ are read; default: the one it was built from)
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <optional>
#include <string>
#include <thread>
#include <unistd.h>
#include <vector>

#include "emit/emit.hpp"
#include "emit/opcodes.hpp"
#include "emit/verify.hpp"
#include "interp/assets.hpp"
#include "interp/cpu_backend.hpp"
#include "interp/generate.hpp"
#include "model/instantiate.hpp"
#include "model/synth.hpp"
#include "planner/library.hpp"
#include "tree/checkpoint_dir.hpp"
#include "tree/disk_tree.hpp"

namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

constexpr std::int64_t kMaxCtx = 512;         // run: KV per sequence; prompt + decode fit with room
constexpr std::int64_t kEmitMaxCtx = 4096;    // emit timings: `met circuit emit`'s default
constexpr int kEmitRepeats = 3;
constexpr const char* kTinyModels[] = {"tiny-llama3", "tiny-qwen3"};  // tests/oracle/configs

double since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n == 0 ? 0 : n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

struct Args {
  std::vector<std::string> emit_only, run;
  std::vector<std::uint32_t> threads = {1, 2};
  int repeats = 3;
  std::int64_t prompt = 32, decode = 16;
  std::string source = MET_SOURCE_DIR;
};

bool write_file(const fs::path& p, const std::string& bytes) {
  std::ofstream f(p, std::ios::binary);
  return f.write(bytes.data(), static_cast<std::streamsize>(bytes.size())) && f.flush();
}

struct Emitted {
  met::emit::Assets assets;
  double emit_s = 0, verify_s = 0;
};

// Plans and emits `ckpt` for `device` as `met circuit emit` does; bucket 0: the class's default
// rungs and buckets at the default context. nullopt on an error (printed).
std::optional<Emitted> emit_once(const met::planner::Library& lib, const std::string& ckpt, const std::string& device,
                                 std::uint32_t threads, std::int64_t bucket) {
  auto target = met::planner::resolve_target(lib, device);
  if (!target) return fmt::print(stderr, "error: {}\n", target.error().message), std::nullopt;
  met::DiskCheckpoint src(ckpt);
  const auto t0 = Clock::now();
  auto graph = met::model::instantiate_checkpoint(*lib.tree, lib.circuits, src);
  if (!graph) return fmt::print(stderr, "error: {}\n", graph.error().message), std::nullopt;
  auto layout = met::emit::read_checkpoint_layout(src);
  if (!layout) return fmt::print(stderr, "error: {}\n", layout.error().message), std::nullopt;
  auto config = src.read("config.json");
  if (!config) return fmt::print(stderr, "error: {}\n", config.error().message), std::nullopt;
  met::emit::EmitOptions o;
  o.max_ctx = bucket ? kMaxCtx : kEmitMaxCtx;
  if (bucket) {
    o.decode_rungs = {1};
    o.prefill_buckets = {bucket};
  }
  o.sm_count = threads;
  o.config_json = *config;
  std::error_code ec;
  o.checkpoint = fs::absolute(ckpt, ec).lexically_normal().string();
  o.network = met::emit::network_slug(src.name());
  auto a = met::emit::emit(lib, *target, *graph, *layout, o);
  if (!a) return fmt::print(stderr, "error: {}\n", a.error().message), std::nullopt;
  Emitted e;
  e.emit_s = since(t0);
  const auto t1 = Clock::now();
  const std::string pkt = met::emit::serialize(a->packet);
  const auto problems = met::emit::verify(a->packet, met::emit::opcode_table());
  e.verify_s = since(t1);
  if (!problems.empty()) return fmt::print(stderr, "error: verify: {}\n", problems.front()), std::nullopt;
  e.assets = std::move(*a);
  return e;
}

void bench_emit(const met::planner::Library& lib, const std::string& ckpt) {
  for (const char* device : {"host-cpu", "h200-sxm"}) {
    std::vector<double> emit_s, verify_s;
    std::size_t instrs = 0;
    for (int k = 0; k < kEmitRepeats; ++k) {
      auto e = emit_once(lib, ckpt, device, /*threads=*/0, /*bucket=*/0);  // as `met circuit emit` without flags
      if (!e) return;
      emit_s.push_back(e->emit_s);
      verify_s.push_back(e->verify_s);
      instrs = 0;
      for (const auto& p : e->assets.packet.programs) instrs += p.instrs.size();
    }
    fmt::print("emit {:<9} {:<40} plan+emit median {:7.3f} s   serialize+verify {:7.3f} s   ({} instructions)\n", device,
               fs::path(ckpt).filename().string(), median(emit_s), median(verify_s), instrs);
  }
}

void bench_run(const met::planner::Library& lib, const std::string& ckpt, const Args& args, const fs::path& tmp) {
  for (auto threads : args.threads) {
    auto e = emit_once(lib, ckpt, "host-cpu", threads, args.prompt);
    if (!e) return;
    const fs::path dir = tmp / fmt::format("assets-{}-t{}", fs::path(ckpt).filename().string(), threads);
    fs::create_directories(dir);
    if (!write_file(dir / "model.pkt", met::emit::serialize(e->assets.packet)) ||
        !write_file(dir / "weights.json", met::emit::to_json(e->assets.weights)) ||
        !write_file(dir / "build.json", e->assets.build_json)) {
      fmt::print(stderr, "error: {}: cannot write\n", dir.string());
      return;
    }
    auto assets = met::interp::load_assets(dir.string());
    if (!assets) return (void)fmt::print(stderr, "error: {}\n", assets.error().message);
    auto backend = met::interp::CpuBackend::create(*assets, threads);
    if (!backend) return (void)fmt::print(stderr, "error: {}\n", backend.error().message);
    met::interp::GenerateRequest req;
    std::vector<std::int32_t> prompt;
    for (std::int64_t i = 0; i < args.prompt; ++i) prompt.push_back(static_cast<std::int32_t>((i * 37 + 11) % 200));
    req.prompts = {prompt};
    req.max_tokens = args.decode + 1;  // the first token comes from prefill
    std::vector<double> prefill, decode;
    std::vector<std::int32_t> first;
    for (int k = 0; k <= args.repeats; ++k) {  // k == 0: warm-up (page faults of the mapped weights)
      auto r = met::interp::generate(**backend, assets->packet, assets->build, req);
      if (!r) return (void)fmt::print(stderr, "error: {}\n", r.error().message);
      if (k == 0) {
        first = r->tokens[0];
        continue;
      }
      if (r->tokens[0] != first) fmt::print(stderr, "warning: tokens differ between repeats\n");
      prefill.push_back(static_cast<double>(args.prompt) / r->prefill_seconds);
      decode.push_back(static_cast<double>(r->decode_steps) / r->decode_seconds);
    }
    fmt::print("run  {:<40} threads {}  prefill {:>4} tokens {:9.1f} tokens/s   decode {:8.2f} tokens/s  (median of {})\n",
               fs::path(ckpt).filename().string(), threads, args.prompt, median(prefill), median(decode), args.repeats);
  }
}

bool parse_list(const std::string& text, std::vector<std::uint32_t>& out) {
  out.clear();
  std::size_t at = 0;
  while (at <= text.size()) {
    const auto comma = text.find(',', at);
    const std::string item = text.substr(at, comma == std::string::npos ? std::string::npos : comma - at);
    if (item.empty() || item.find_first_not_of("0123456789") != std::string::npos || item.size() > 4) return false;
    out.push_back(static_cast<std::uint32_t>(std::stoul(item)));
    if (comma == std::string::npos) break;
    at = comma + 1;
  }
  return !out.empty();
}

}  // namespace

int main(int argc, char** argv) {
  Args args;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    const bool has_value = i + 1 < argc;
    if (a == "--emit" && has_value) {
      args.emit_only.push_back(argv[++i]);
    } else if (a == "--source" && has_value) {
      args.source = argv[++i];
    } else if (a == "--run" && has_value) {
      args.run.push_back(argv[++i]);
    } else if (a == "--threads" && has_value) {
      if (!parse_list(argv[++i], args.threads)) return fmt::print(stderr, "error: --threads '{}': expected 1,2,...\n", argv[i]), 1;
    } else if ((a == "--repeats" || a == "--prompt" || a == "--decode") && has_value) {
      const std::string v = argv[++i];
      if (v.empty() || v.size() > 6 || v.find_first_not_of("0123456789") != std::string::npos || std::stol(v) < 1)
        return fmt::print(stderr, "error: {} '{}': expected a positive integer\n", a, v), 1;
      if (a == "--repeats") args.repeats = std::stoi(v);
      if (a == "--prompt") args.prompt = std::stol(v);
      if (a == "--decode") args.decode = std::stol(v);
    } else {
      return fmt::print(stderr, "error: argument '{}': usage: met_run_bench [--emit DIR]... [--run DIR]... [--threads 1,2] "
                                "[--repeats N] [--prompt N] [--decode N] [--source DIR]\n", a), 1;
    }
  }
  met::MemTree tree = met::snapshot(met::DiskTree(args.source + "/kernels", "kernels/"));
  auto lib = met::planner::load_library(tree);
  if (!lib) return fmt::print(stderr, "error: {}\n", lib.error().message), 1;
  lib->tree = &tree;
  const fs::path tmp = fs::temp_directory_path() / fmt::format("met-run-bench-{}", ::getpid());
  fs::create_directories(tmp);
  fmt::print("met_run_bench: {} hardware threads, prompt {} tokens, decode {} steps, {} repeats\n",
             std::max(1u, std::thread::hardware_concurrency()), args.prompt, args.decode, args.repeats);
  std::vector<std::string> run = args.run;
  if (args.emit_only.empty() && args.run.empty()) {
    for (const char* m : kTinyModels) {
      const std::string cfg_path = args.source + "/tests/oracle/configs/" + m + ".json";
      std::ifstream in(cfg_path);
      const std::string cfg((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
      auto plan = met::model::plan_synth(lib->circuits, cfg, cfg_path, met::model::SynthOptions{/*seed=*/1});
      if (!plan) return fmt::print(stderr, "error: {}\n", plan.error().message), 1;
      auto files = met::model::synth_files(*plan, met::model::kDefaultShardBytes);
      if (!files) return fmt::print(stderr, "error: {}\n", files.error().message), 1;
      const fs::path dir = tmp / (std::string(m) + "-bf16");
      fs::create_directories(dir);
      for (const auto& [f, bytes] : *files)
        if (!write_file(dir / f, bytes)) return fmt::print(stderr, "error: {}: cannot write\n", (dir / f).string()), 1;
      run.push_back(dir.string());
    }
  }
  for (const auto& c : args.emit_only) bench_emit(*lib, c);
  for (const auto& c : run) {
    bench_emit(*lib, c);
    bench_run(*lib, c, args, tmp);
  }
  std::error_code ec;
  fs::remove_all(tmp, ec);
  return 0;
}
