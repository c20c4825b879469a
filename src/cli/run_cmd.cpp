// `met circuit emit|run`: thin wiring. emit: checkpoint + device -> assets directory (written
// atomically: a temporary directory renamed into place). run: assets -> backend -> generated ids.
#include <fmt/format.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <optional>

#include "cli/circuit.hpp"
#include "cli/commands.hpp"
#include "cli/version.hpp"
#include "core/numfmt.hpp"
#include "core/strings.hpp"
#include "device/identity.hpp"
#include "emit/emit.hpp"
#include "emit/verify.hpp"
#include "interp/assets.hpp"
#include "interp/backend_factory.hpp"
#include "interp/campaign.hpp"
#include "interp/cuda_backend.hpp"
#include "interp/generate.hpp"
#include "interp/optest.hpp"
#include "model/instantiate.hpp"
#include "text/tokenizer.hpp"
#include "tree/disk_tree.hpp"
#include "tree/checkpoint_dir.hpp"

namespace met::cli {
namespace {

namespace fs = std::filesystem;

struct EmitArgs {
  std::string hardware, checkpoint, out;
  std::int64_t max_ctx = 4096;
  std::string decode_rungs, prefill_buckets;
  std::uint32_t threads = 0;
  int tp = 1;
  std::string kv_dtype = "bf16";
  std::int64_t split_keys = emit::kDefaultSplitKeys;
};

struct RunArgs {
  std::string assets, backend = "cpu", logits_out;
  std::vector<std::string> prompts;
  std::vector<std::string> texts;  // --prompt: encoded with ASSETS/tokenizer.json
  std::int64_t max_tokens = 16;
  float temperature = 0.0f, top_p = 1.0f;
  std::int32_t top_k = 0;
  std::uint64_t seed = 0;
  std::uint32_t threads = 0;
  std::string follow;  // a transformers fixture whose tokens are fed back (teacher forcing)
  std::vector<std::string> campaigns;
  std::string perf_dir = "perf-data";
  int warmup = 3, repeats = 20;
};

// "1,2,4" -> {1, 2, 4}; every element a non-negative integer.
Expected<std::vector<std::int64_t>> int_list(const std::string& flag, const std::string& text) {
  std::vector<std::int64_t> out;
  for (const auto& item : split(text, ',')) {
    if (item.empty() || item.find_first_not_of("0123456789") != std::string::npos || item.size() > 12)
      return fail(flag + " '" + text + "': '" + item + "' is not a non-negative integer");
    out.push_back(std::stoll(item));
  }
  return out;
}

Expected<void> write_file(const fs::path& p, const std::string& bytes) {
  std::ofstream f(p, std::ios::binary);
  if (!f || !f.write(bytes.data(), static_cast<std::streamsize>(bytes.size())) || !f.flush())
    return fail(p.string() + ": cannot write");
  return {};
}

int run_emit(const LibraryFn& library, const EmitArgs& a) {
  const planner::Library* lib = library();
  if (!lib) return 1;
  if (a.hardware.empty() || a.checkpoint.empty() || a.out.empty()) return error("circuit emit needs --hardware, --checkpoint and --out");
  if (a.split_keys < 1 || a.split_keys > a.max_ctx)
    return error(fmt::format("--split-keys {}: expected 1 to --max-ctx ({})", a.split_keys, a.max_ctx));
  auto target = planner::resolve_target(*lib, a.hardware);
  if (!target) return error(target.error().message);
  DiskCheckpoint source(a.checkpoint);
  auto graph = model::instantiate_checkpoint(*lib->tree, lib->circuits, source);
  if (!graph) return error(graph.error().message);
  auto kv = kv_dtype_format(a.kv_dtype);
  if (!kv) return error(kv.error().message);
  graph->kv = *kv;  // the plan emit builds (its KV bytes and memory fit) and the caches it allocates
  auto layout = emit::read_checkpoint_layout(source);
  if (!layout) return error(layout.error().message);
  auto config = source.read("config.json");
  if (!config) return error(config.error().message);
  if (auto rope = emit::parse_rope(*config, (fs::path(a.checkpoint) / "config.json").string()); !rope)
    return error(rope.error().message);  // before any progress line: a refused rope type is the whole answer
  emit::EmitOptions o;
  o.max_ctx = a.max_ctx;
  if (!a.decode_rungs.empty()) {
    auto r = int_list("--decode-rungs", a.decode_rungs);
    if (!r) return error(r.error().message);
    o.decode_rungs = *r;
  }
  if (!a.prefill_buckets.empty()) {
    auto r = int_list("--prefill-buckets", a.prefill_buckets);
    if (!r) return error(r.error().message);
    o.prefill_buckets = *r;
  }
  o.sm_count = a.threads;
  o.tp = a.tp;
  o.split_keys = a.split_keys;
  o.config_json = *config;
  std::error_code ec;
  o.checkpoint = fs::absolute(a.checkpoint, ec).lexically_normal().string();
  o.network = emit::network_slug(source.name());
  o.git_commit = build_commit();
  o.gpu_interpreters = gpu_interpreters();
  o.flags = {{"hardware", a.hardware}, {"checkpoint", a.checkpoint}, {"out", a.out}, {"max_ctx", std::to_string(a.max_ctx)},
             {"decode_rungs", a.decode_rungs}, {"prefill_buckets", a.prefill_buckets}, {"threads", std::to_string(a.threads)}, {"tp", std::to_string(a.tp)},
             {"kv_dtype", a.kv_dtype}, {"split_keys", std::to_string(a.split_keys)}};
  std::fprintf(stderr, "emit: planning %s on %s\n", graph->id.c_str(), a.hardware.c_str());
  const auto t0 = std::chrono::steady_clock::now();
  auto assets = emit::emit(*lib, *target, *graph, *layout, o);
  if (!assets) return error(assets.error().message);
  auto problems = emit::verify(assets->packet, emit::opcode_table());
  for (std::size_t r = 0; r < assets->other_ranks.size(); ++r)
    for (const auto& p : emit::verify(assets->other_ranks[r], emit::opcode_table()))
      problems.push_back(fmt::format("rank {}: {}", r + 1, p));
  if (!problems.empty()) {
    std::string all;
    for (const auto& p : problems) all += "\n  " + p;
    return error("emit: the verifier refused the packets:" + all);
  }
  std::size_t instrs = 0;
  for (const auto& p : assets->packet.programs) instrs += p.instrs.size();
  std::fprintf(stderr, "emit: %zu programs, %zu instructions, %zu tensors, %zu weights in %.3f s\n",
               assets->packet.programs.size(), instrs, assets->packet.tensors.size(), assets->weights.tensors.size(),
               std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());

  const fs::path out(a.out);
  const fs::path tmp = out.string() + ".tmp-" + std::to_string(::getpid());
  fs::remove_all(tmp, ec);
  fs::create_directories(tmp, ec);
  if (ec) return error(tmp.string() + ": " + ec.message());
  std::map<std::string, std::string> files{{"model.pkt", emit::serialize(assets->packet)},
                                           {"weights.json", emit::to_json(assets->weights)},
                                           {"build.json", assets->build_json}};
  for (std::size_t r = 0; r < assets->other_ranks.size(); ++r)
    files[interp::rank_packet_name(static_cast<int>(r) + 1)] = emit::serialize(assets->other_ranks[r]);
  for (const auto& [name, bytes] : files) {
    if (auto w = write_file(tmp / name, bytes); !w) return error(w.error().message);
  }
  fs::create_directory_symlink(o.checkpoint, tmp / "checkpoint", ec);
  if (ec) return error((tmp / "checkpoint").string() + ": " + ec.message());
  if (fs::exists(fs::path(o.checkpoint) / "tokenizer.json")) fs::create_symlink(fs::path(o.checkpoint) / "tokenizer.json", tmp / "tokenizer.json", ec);
  const fs::path old = out.string() + ".old-" + std::to_string(::getpid());
  if (fs::exists(out)) fs::rename(out, old, ec);
  if (ec) return error(out.string() + ": " + ec.message());
  fs::rename(tmp, out, ec);
  if (ec) return error(out.string() + ": " + ec.message());
  fs::remove_all(old, ec);
  std::fprintf(stderr, "emit: wrote %s\n", a.out.c_str());
  return 0;
}

// The measured campaign: cases on the cuda backend, written to PERF/<device>/<model>/<stamp>.{json,md}.
int run_campaign_cmd(const LibraryFn& library, const RunArgs& a, const std::vector<interp::CampaignCase>& cases,
                     const interp::Assets& assets, interp::CudaBackend& backend) {
  const planner::Library* lib = library();
  if (!lib) return 1;
  auto target = planner::resolve_target(*lib, assets.build.device);
  if (!target) return error(target.error().message);
  // The ceilings, the bandwidth shares and the perf-data path are the emit's device's: a campaign
  // on another GPU (an H100 for assets emitted for an H200: same SMs, same arch) would file its
  // times as that device's, so it is refused, naming the device the GPU is.
  for (std::size_t r = 0; r < backend.ranks(); ++r) {
    const auto g = backend.gpu(r);
    const auto gpu = device::gpu_identity(g.name, g.sms, g.compute_major, g.compute_minor, static_cast<double>(g.total_bytes));
    auto same = device::check_gpu(*target->device, gpu);
    if (same) continue;
    const auto ids = device::devices_matching(lib->registry, gpu);
    return error(fmt::format("--campaign: {} were emitted for {} ({}), but {}runs on {}: the campaign's ceilings, bandwidth shares and "
                             "perf-data path would be another device's ({}). {}",
                             a.assets, target->device->id, target->device->name, backend.ranks() > 1 ? fmt::format("rank {} ", r) : "",
                             device::describe(gpu), same.error().message,
                             ids.empty() ? std::string("No device of the registry is this GPU (`met circuit probe --identify`)")
                                         : "Emit again with --hardware " + join(ids, " or ")));
  }
  DiskCheckpoint source(assets.checkpoint_dir);
  auto graph = model::instantiate_checkpoint(*lib->tree, lib->circuits, source);
  if (!graph) return error(graph.error().message);
  const auto sheet = estimate::make_basis(*target->device, estimate::BasisChoice::datasheet);
  const auto measured = estimate::make_basis(*target->device, estimate::BasisChoice::measured);
  auto estimate_of = [&](const interp::CampaignCase& c, const estimate::Basis& basis) {
    const bool decode = c.kind == "decode";
    const auto mode = !decode ? planner::Mode::prefill : c.rows == 1 ? planner::Mode::decode : planner::Mode::batch;
    return estimate::estimate_case(*lib, *target, *graph, basis, mode, c.rows, decode ? c.ctx : 0, 1);
  };
  auto ceiling = [&](const interp::CampaignCase& c) {
    return interp::Ceilings{estimate_of(c, sheet).ceiling_s, estimate_of(c, measured).ceiling_s};
  };
  interp::CampaignOptions o;
  o.warmup = a.warmup;
  o.repeats = a.repeats;
  o.seed = a.seed ? a.seed : 1;
  auto res = interp::run_campaign(backend, assets, cases, ceiling, o);
  if (!res) return error(res.error().message);
  // Every case against the device's measured read bandwidth (`met circuit probe`): the bytes the
  // planner counts for it (weights, KV cache, activations) over its median step.
  std::string read_line;
  const auto& probed = target->device->measured;
  if (probed && probed->read_gbs && (*res)["cases"].size() == cases.size()) {
    (*res)["measured_read_gbs"] = *probed->read_gbs;
    (*res)["measured_read_cite"] = probed->cite;
    for (std::size_t i = 0; i < cases.size(); ++i) {
      auto& c = (*res)["cases"][i];
      const auto e = estimate_of(cases[i], measured);
      const double bytes = e.weight_bytes + e.kv_bytes + e.other_bytes, median_ms = c["ms"]["median"].get<double>();
      c["bytes"] = bytes;
      c["read_bw_share"] = median_ms > 0 ? bytes / (median_ms * 1e-3) / (*probed->read_gbs * 1e9) : 0.0;
      read_line += fmt::format("{}{} {}{}: {}", read_line.empty() ? "" : ", ", cases[i].kind, cases[i].rows,
                               cases[i].kind == "decode" ? fmt::format(" ctx {}", cases[i].ctx) : "", fmt_fixed(c["read_bw_share"].get<double>(), 3));
    }
    read_line = fmt::format("\nShare of the measured read bandwidth ({} GB/s, {}; bytes the planner counts / median step): {}\n",
                            fmt_sig(*probed->read_gbs, 4), probed->cite, read_line);
  }
  const auto build = nlohmann::json::parse(assets.build_json, nullptr, false);
  const std::string model = build.is_object() ? build.value("network", build.value("model", "model")) : "model";
  const std::time_t now = std::time(nullptr);
  char stamp[32];
  std::strftime(stamp, sizeof stamp, "%Y%m%dT%H%M%SZ", std::gmtime(&now));
  (*res)["stamp"] = stamp;
  (*res)["model"] = model;
  (*res)["hardware"] = assets.build.device;
  std::string cmd = "met circuit run --assets " + a.assets + " --backend cuda";
  for (const auto& c : a.campaigns) cmd += " --campaign " + c;
  (*res)["command"] = cmd;
  const fs::path dir = fs::path(a.perf_dir) / assets.build.device / model;
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) return error(dir.string() + ": " + ec.message());
  const std::string md = interp::campaign_markdown(*res) + read_line + "\nCommand: `" + cmd + "`\n";
  for (const auto& [ext, bytes] : std::map<std::string, std::string>{{".json", res->dump(2) + "\n"}, {".md", md}}) {
    const fs::path p = dir / (std::string(stamp) + ext);
    const fs::path tmp = p.string() + ".tmp";
    if (auto w = write_file(tmp, bytes); !w) return error(w.error().message);
    fs::rename(tmp, p, ec);
    if (ec) return error(p.string() + ": " + ec.message());
  }
  std::printf("%s", md.c_str());
  std::fprintf(stderr, "run: wrote %s/%s.json and .md\n", dir.string().c_str(), stamp);
  return 0;
}

int run_run(const LibraryFn& library, const RunArgs& a) {
  if (auto known = interp::check_backend_name(a.backend); !known) return error(known.error().message);
  if (!a.campaigns.empty()) {
    if (a.backend != "cuda") return error("--campaign measures the cuda backend: add --backend cuda");
    std::vector<interp::CampaignCase> cases;
    for (const auto& spec : a.campaigns) {
      auto c = interp::parse_campaign(spec);
      if (!c) return error(c.error().message);
      cases.insert(cases.end(), c->begin(), c->end());
    }
    if (a.repeats < 1 || a.warmup < 0) return error("--repeats must be >= 1 and --warmup >= 0");
    auto assets = interp::load_assets(a.assets);
    if (!assets) return error(assets.error().message);
    auto backend = interp::make_backend("cuda", *assets);
    if (!backend) return error(backend.error().message);
    return run_campaign_cmd(library, a, cases, *assets, dynamic_cast<interp::CudaBackend&>(**backend));
  }
  if (a.prompts.empty() && a.texts.empty()) return error("circuit run needs --prompt-ids or --prompt (one per sequence)");
  interp::GenerateRequest req;
  // Text prompts go through the checkpoint's own tokenizer, which emit linked into the assets.
  std::optional<text::Tokenizer> tokenizer;
  if (!a.texts.empty()) {
    const std::string path = (std::filesystem::path(a.assets) / "tokenizer.json").string();
    auto bytes = read_file(path);
    if (!bytes) return error(fmt::format("--prompt needs a tokenizer: {} (emit links the checkpoint's tokenizer.json when it has one)", path));
    auto tok = text::Tokenizer::from_json(*bytes, path);
    if (!tok) return error(tok.error().message);
    tokenizer = std::move(tok).value();
    for (const auto& text : a.texts) req.prompts.push_back(tokenizer->encode(text, /*add_special_tokens=*/true));
  }
  for (const auto& p : a.prompts) {
    auto ids = int_list("--prompt-ids", p);
    if (!ids) return error(ids.error().message);
    std::vector<std::int32_t> v;
    for (auto id : *ids) {
      if (id > INT32_MAX) return error("--prompt-ids '" + p + "': id " + std::to_string(id) + " is too large");
      v.push_back(static_cast<std::int32_t>(id));
    }
    req.prompts.push_back(std::move(v));
  }
  req.max_tokens = a.max_tokens;
  req.sampling = {a.temperature, a.top_p, a.top_k, a.seed};
  if (a.top_p <= 0.0f || a.top_p > 1.0f) return error("--top-p must be in (0, 1]");
  if (a.top_k < 0) return error("--top-k must be >= 0 (0: off)");
  req.keep_logits = !a.logits_out.empty();
  if (!a.follow.empty()) {
    auto text = read_file(a.follow);
    if (!text) return error(text.error().message);
    const auto j = nlohmann::json::parse(*text, nullptr, false);
    if (!j.is_object() || !j.contains("cases") || !j["cases"].is_array())
      return error(a.follow + ": not a transformers fixture (expected an object with \"cases\")");
    if (j["cases"].size() != req.prompts.size())
      return error(fmt::format("{}: {} cases for {} prompts", a.follow, j["cases"].size(), req.prompts.size()));
    for (std::size_t k = 0; k < req.prompts.size(); ++k) {
      const auto& c = j["cases"][k];
      if (!c.contains("prompt") || !c.contains("tokens") || c["prompt"] != nlohmann::json(req.prompts[k]))
        return error(fmt::format("{}: case {} is not prompt {} of this run", a.follow, k, k));
      req.forced.push_back(c["tokens"].get<std::vector<std::int32_t>>());
    }
  }
  auto assets = interp::load_assets(a.assets);
  if (!assets) return error(assets.error().message);
  // Sampling happens on the backend: the cuda backend copies logits back only for --logits-out.
  auto backend = interp::make_backend(a.backend, *assets, {.threads = a.threads, .fetch_logits = req.keep_logits});
  if (!backend) return error(backend.error().message);
  if (const auto* cuda = dynamic_cast<const interp::CudaBackend*>(backend->get())) {
    // Under --tp: "2 tensor-parallel ranks on NVIDIA H200 x 2" (device r runs rank r).
    const std::string on = cuda->ranks() > 1 ? std::to_string(cuda->ranks()) + " tensor-parallel ranks on " +
                                                   cuda->device_name() + " x " + std::to_string(cuda->ranks())
                                             : cuda->device_name();
    std::fprintf(stderr, "run: cuda on %s, %.2f GB on the device%s\n", on.c_str(),
                 static_cast<double>(cuda->device_bytes()) / 1e9, cuda->ranks() > 1 ? "s" : "");
  }
  auto res = interp::generate(**backend, assets->packet, assets->build, req);
  if (!res) return error(res.error().message);
  for (const auto& seq : res->tokens) {
    std::string line;
    for (auto t : seq) line += (line.empty() ? "" : " ") + std::to_string(t);
    std::printf("%s\n", line.c_str());
    // The text, JSON-quoted so one sequence stays one line whatever it decodes to.
    if (tokenizer) std::printf("%s\n", nlohmann::json(tokenizer->decode(seq, /*skip_special_tokens=*/false)).dump().c_str());
  }
  const double toks = static_cast<double>(res->decode_steps) * static_cast<double>(req.prompts.size());
  std::fprintf(stderr, "run: prefill %.4f s; decode %lld steps x %zu seqs in %.4f s = %.1f tokens/s\n", res->prefill_seconds,
               static_cast<long long>(res->decode_steps), req.prompts.size(), res->decode_seconds,
               res->decode_seconds > 0 ? toks / res->decode_seconds : 0.0);
  if (!a.logits_out.empty()) {
    nlohmann::json j;
    j["schema"] = "met-logits/1";
    j["sequences"] = nlohmann::json::array();
    for (std::size_t s = 0; s < res->tokens.size(); ++s)
      j["sequences"].push_back({{"prompt", req.prompts[s]}, {"tokens", res->tokens[s]}, {"logits", res->logits[s]}});
    if (auto w = write_file(a.logits_out, j.dump() + "\n"); !w) return error(w.error().message);
  }
  return 0;
}

struct OptestArgs {
  std::string assets, backend = "cuda", filter, programs;
  std::uint64_t seed = 1;
  double tolerance = 1e-2;
};

int run_optest_cmd(const OptestArgs& a) {
  if (auto known = interp::check_backend_name(a.backend); !known) return error(known.error().message);
  auto assets = interp::load_assets(a.assets);
  if (!assets) return error(assets.error().message);
  // A tensor-parallel emit: rank 0's packet alone on one GPU (optest runs each instruction alone
  // and skips the collectives); the reference runs every simulated rank.
  interp::BackendOptions bo;
  bo.first_rank_only = true;
  auto test = interp::make_backend(a.backend, *assets, bo);
  if (!test) return error(test.error().message);
  // The reference: the same packets on the cpu bodies.
  auto ref = interp::make_backend("cpu-oracle", *assets);
  if (!ref) return error(ref.error().message);
  interp::OptestOptions o;
  o.filter = a.filter;
  o.seed = a.seed;
  o.tolerance = a.tolerance;
  if (!a.programs.empty()) o.programs = split(a.programs, ',');
  auto cases = interp::run_optest(**test, **ref, *assets, o);
  if (!cases) return error(cases.error().message);
  std::size_t failed = 0, skipped = 0;
  for (const auto& c : *cases) {
    if (c.skipped) {
      ++skipped;
      std::printf("SKIP  %s  %s\n", c.name.c_str(), c.detail.c_str());
      continue;
    }
    failed += c.pass ? 0 : 1;
    std::printf("%s  rel %.2e  max|d| %.3g  over %llu  %s%s%s\n", c.pass ? "PASS" : "FAIL", c.rel_err, c.max_abs,
                static_cast<unsigned long long>(c.elements), c.name.c_str(), c.detail.empty() ? "" : "  ", c.detail.c_str());
  }
  std::printf("optest: %zu cases, %zu failed%s (%s vs cpu bodies, seed %llu, tolerance %.1e)\n", cases->size(), failed,
              skipped ? (", " + std::to_string(skipped) + " not run").c_str() : "", a.backend.c_str(),
              static_cast<unsigned long long>(a.seed), a.tolerance);
  if (cases->empty()) return error("optest: no case matched");
  return failed == 0 ? 0 : 1;
}

}  // namespace

void add_run_commands(CLI::App& circuit, const LibraryFn& library, std::vector<Command>& out) {
  auto ea = std::make_shared<EmitArgs>();
  auto* emit = circuit.add_subcommand("emit", "emit the accepted plan of a checkpoint on a device as assets (model.pkt, weights.json, build.json)");
  emit->fallthrough();
  emit->add_option("--hardware", ea->hardware, "device id")->required();
  emit->add_option("--checkpoint", ea->checkpoint, "Hugging Face checkpoint directory")->required();
  emit->add_option("--out", ea->out, "assets directory (replaced atomically)")->required();
  emit->add_option("--max-ctx", ea->max_ctx, "tokens per sequence the KV cache holds")->capture_default_str();
  emit->add_option("--decode-rungs", ea->decode_rungs, "decode batch sizes, e.g. 1,2,4 (default: the class's)");
  emit->add_option("--prefill-buckets", ea->prefill_buckets, "prefill row counts, e.g. 64,128 (default: the class's)");
  emit->add_option("--threads", ea->threads, "cpu: worker threads (default 4); GPU: SMs (default: the device's)");
  emit->add_option("--tp", ea->tp, "tensor-parallel ranks: 1, 2, 4, 8 (one packet per rank; cpu and hopper classes, the cpu backend runs them)")
      ->capture_default_str();
  emit->add_option("--kv-dtype", ea->kv_dtype,
                   "KV cache: bf16 | fp8 (e4m3, one scale per cache: the checkpoint's calibrated k_scale/v_scale, else 1)")
      ->capture_default_str();
  emit->add_option("--split-keys", ea->split_keys,
                   "GPU decode attention: the fewest keys of a row's context one split of it takes (more: fewer splits, "
                   "each reading more of the cache, and less to merge)")
      ->capture_default_str();
  out.push_back({emit, [library, ea] { return run_emit(library, *ea); }});

  auto ra = std::make_shared<RunArgs>();
  auto* run = circuit.add_subcommand("run", "run emitted assets: prefill the prompts, decode, print the generated ids");
  run->fallthrough();
  run->add_option("--assets", ra->assets, "assets directory from `met circuit emit`")->required();
  run->add_option("--backend", ra->backend, "cpu | cuda | cpu-oracle (a GPU emit on the cpu bodies)")->capture_default_str();
  run->add_option("--prompt-ids", ra->prompts, "comma-separated token ids; repeat for several sequences");
  run->add_option("--prompt", ra->texts, "prompt text, encoded with ASSETS/tokenizer.json; repeat for several sequences");
  run->add_option("--max-tokens", ra->max_tokens, "tokens to generate per sequence")->capture_default_str();
  run->add_option("--temperature", ra->temperature, "0 = greedy")->capture_default_str();
  run->add_option("--top-p", ra->top_p, "nucleus sampling mass")->capture_default_str();
  run->add_option("--top-k", ra->top_k, "keep the k most likely tokens (0: off)")->capture_default_str();
  run->add_option("--seed", ra->seed, "sampling seed")->capture_default_str();
  run->add_option("--threads", ra->threads, "cpu worker threads (must equal the emit's --threads)");
  run->add_option("--logits-out", ra->logits_out, "write the last-position logits of the prompt and each step as JSON");
  run->add_option("--follow", ra->follow,
                  "teacher forcing: feed back the tokens of this transformers fixture (same prompts) instead of met's own");
  run->add_option("--campaign", ra->campaigns,
                  "measure on cuda: decode:C,..[@ctx=N] or prefill:T,.. (repeatable); writes PERF/<device>/<model>/<stamp>.json and .md");
  run->add_option("--perf-dir", ra->perf_dir, "where --campaign writes its results")->capture_default_str();
  run->add_option("--warmup", ra->warmup, "--campaign: untimed runs per case")->capture_default_str();
  run->add_option("--repeats", ra->repeats, "--campaign: timed runs per case")->capture_default_str();
  out.push_back({run, [library, ra] { return run_run(library, *ra); }});

  auto oa = std::make_shared<OptestArgs>();
  auto* ot = circuit.add_subcommand(
      "optest", "run every distinct instruction of the assets alone on a backend and on the cpu bodies, from the same random inputs, and compare");
  ot->fallthrough();
  ot->add_option("--assets", oa->assets, "assets directory from `met circuit emit`")->required();
  ot->add_option("--backend", oa->backend, "cuda | cpu-oracle or cpu (the harness checking itself)")->capture_default_str();
  ot->add_option("--filter", oa->filter, "only the cases whose name contains this");
  ot->add_option("--programs", oa->programs, "comma-separated program names (default: all)");
  ot->add_option("--seed", oa->seed, "random inputs seed")->capture_default_str();
  ot->add_option("--tol", oa->tolerance, "relative L2 tolerance over written elements")->capture_default_str();
  out.push_back({ot, [oa] { return run_optest_cmd(*oa); }});
}

}  // namespace met::cli
