#include "interp/campaign.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cstdio>
#include <map>
#include <random>

#include "core/strings.hpp"
#include "emit/opcodes.hpp"
#include "interp/collective_plan.hpp"
#include "interp/session.hpp"

namespace met::interp {

namespace {

Expected<std::vector<std::int64_t>> numbers(const std::string& spec, const std::string& text) {
  std::vector<std::int64_t> out;
  for (const auto& item : split(text, ',')) {
    if (item.empty() || item.size() > 9 || item.find_first_not_of("0123456789") != std::string::npos || std::stoll(item) < 1)
      return fail("--campaign '" + spec + "': '" + item + "' is not a positive integer");
    out.push_back(std::stoll(item));
  }
  return out;
}

struct Stats {
  double median = 0, p10 = 0, p90 = 0, min = 0;
};
Stats stats(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  auto q = [&](double f) { return v[static_cast<std::size_t>(f * static_cast<double>(v.size() - 1) + 0.5)]; };
  return {q(0.5), q(0.1), q(0.9), v.front()};
}

std::int64_t find_program(const emit::PacketFile& f, std::uint32_t kind, std::int64_t rows) {
  for (std::size_t i = 0; i < f.programs.size(); ++i)
    if (f.programs[i].kind == kind && f.programs[i].rows == rows) return static_cast<std::int64_t>(i);
  return -1;
}

std::string program_list(const emit::PacketFile& f, std::uint32_t kind) {
  std::string s;
  for (const auto& p : f.programs)
    if (p.kind == kind) s += (s.empty() ? "" : ", ") + std::to_string(p.rows);
  return s;
}

}  // namespace

Expected<std::vector<CampaignCase>> parse_campaign(const std::string& spec) {
  const auto colon = spec.find(':');
  if (colon == std::string::npos) return fail("--campaign '" + spec + "': expected decode:C,..[@ctx=N] or prefill:T,..");
  const std::string kind = spec.substr(0, colon);
  std::string list = spec.substr(colon + 1);
  std::int64_t ctx = 0;
  if (const auto at = list.find('@'); at != std::string::npos) {
    const std::string opt = list.substr(at + 1);
    list = list.substr(0, at);
    if (kind != "decode" || opt.rfind("ctx=", 0) != 0)
      return fail("--campaign '" + spec + "': only decode takes @ctx=N");
    MET_TRY(auto c, numbers(spec, opt.substr(4)));
    if (c.size() != 1) return fail("--campaign '" + spec + "': one context per decode campaign");
    ctx = c[0];
  } else if (kind == "decode") {
    ctx = 4096;
  }
  if (kind != "decode" && kind != "prefill") return fail("--campaign '" + spec + "': kind '" + kind + "' is not decode or prefill");
  MET_TRY(auto rows, numbers(spec, list));
  std::vector<CampaignCase> out;
  for (auto r : rows) out.push_back({kind, r, ctx});
  return out;
}

namespace {
// The kind of an instruction's plan scope: "layers:sliding L3" -> "layers:sliding"; "" -> "-".
std::string scope_kind(const std::string& scope) {
  const auto sp = scope.find(' ');
  const std::string k = sp == std::string::npos ? scope : scope.substr(0, sp);
  return k.empty() ? "-" : k;
}
}  // namespace

Expected<nlohmann::json> run_campaign(CudaBackend& backend, const Assets& a, const std::vector<CampaignCase>& cases,
                                      const CeilingFn& ceiling, const CampaignOptions& o) {
  const auto& f = a.packet;
  const std::size_t tp = backend.ranks();
  const std::int64_t max_ctx = a.build.max_ctx;
  std::mt19937_64 rng(o.seed);
  // The vocabulary: the logits width of any program.
  std::int64_t vocab = 0;
  for (const auto& t : f.tensors)
    if (t.source == MET_SOURCE_IO && t.ref == static_cast<std::uint64_t>(emit::IoField::logits) && t.shape.size() == 2)
      vocab = static_cast<std::int64_t>(t.shape[1]);
  if (vocab <= 0) return fail(a.dir + ": no logits in model.pkt");
  std::uniform_int_distribution<std::int32_t> token(0, static_cast<std::int32_t>(vocab - 1));

  // Decode cases read real keys and values: prefill each sequence they use with random tokens first.
  std::int64_t seqs = 0, ctx = 0;
  for (const auto& c : cases) {
    if (c.kind != "decode") continue;
    if (find_program(f, MET_PROGRAM_DECODE, c.rows) < 0)
      return fail(fmt::format("--campaign decode:{}: {} has no decode rung of {} rows (rungs: {})", c.rows, a.dir, c.rows,
                              program_list(f, MET_PROGRAM_DECODE)));
    if (c.ctx + 1 > max_ctx)
      return fail(fmt::format("--campaign decode at ctx={}: the assets' KV holds {} tokens per sequence (emit with a larger --max-ctx)",
                              c.ctx, max_ctx));
    seqs = std::max(seqs, c.rows);
    ctx = std::max(ctx, c.ctx);
  }
  // A prefill of T tokens runs its bucket of T rows, or else the launches a prompt of T tokens is
  // prefilled in (prefill_chunks: the later ones read the earlier ones' keys from the cache), which
  // needs T positions of one sequence's KV.
  const auto buckets = programs_by_rows(f, MET_PROGRAM_PREFILL);
  for (const auto& c : cases)
    if (c.kind == "prefill" && find_program(f, MET_PROGRAM_PREFILL, c.rows) < 0 && (buckets.empty() || c.rows > max_ctx))
      return fail(fmt::format("--campaign prefill:{}: {} has no prefill bucket of {} rows (buckets: {}) and its KV holds {} tokens "
                              "per sequence, too few to prefill {} in chunks (emit with a larger --max-ctx)",
                              c.rows, a.dir, c.rows, program_list(f, MET_PROGRAM_PREFILL), max_ctx, c.rows));
  const std::int64_t pad_base = a.build.max_seqs * max_ctx;  // padding rows' slots, as the session's
  backend.set_fetch_logits(false);
  if (seqs > 0) {
    // Said before it starts: many long sequences through small buckets take minutes.
    fmt::print(stderr, "run: prefilling {} sequence{} of {} random tokens (prefill buckets {}) before the decode cases\n", seqs,
               seqs == 1 ? "" : "s", ctx - 1, program_list(f, MET_PROGRAM_PREFILL));
    MET_TRY(Session session, Session::create(backend, f, a.build));
    for (std::int64_t s = 0; s < seqs; ++s) {
      std::vector<std::int32_t> prompt(static_cast<std::size_t>(ctx - 1));
      for (auto& t : prompt) t = token(rng);
      MET_TRY(auto added, session.add(prompt, Sampling{}));
      if (added.slot != s) return fail("campaign: expected slot " + std::to_string(s) + ", got " + std::to_string(added.slot));
    }
  }

  nlohmann::json out;
  out["schema"] = "met-campaign/1";
  if (tp > 1) out["tp_ranks"] = tp;
  out["device"] = backend.device_name();
  out["assets"] = a.dir;
  out["target"] = {{"class", f.target_class}, {"sm_count", f.sm_count}};
  out["warmup"] = o.warmup;
  out["repeats"] = o.repeats;
  out["cases"] = nlohmann::json::array();
  for (const auto& c : cases) {
    const bool decode = c.kind == "decode";
    const std::int64_t whole = find_program(f, decode ? MET_PROGRAM_DECODE : MET_PROGRAM_PREFILL, c.rows);
    // The case's launches: its program, or a long prefill's chunks.
    const std::vector<PrefillChunk> launches =
        whole >= 0 ? std::vector<PrefillChunk>{{static_cast<std::size_t>(whole), c.rows, 0, c.rows, 0}} : prefill_chunks(buckets, c.rows);
    auto fill = [&](const PrefillChunk& l) {
      const StepIo io = StepIo::of(backend, l.program, {a.build.max_ctx, a.build.max_seqs, a.build.kv_ring});
      for (std::int64_t r = 0; r < l.rows; ++r) {
        if (decode) {  // row r is sequence r at position ctx - 1
          const std::int64_t b = r * max_ctx, p = c.ctx - 1;
          io.set(r, token(rng), p, b + p, b);
        } else {  // one sequence at positions 0..T-1, padding rows (a short last chunk) after it in the padding slots
          const bool real = r < l.n;
          const std::int64_t p = real ? l.start + r : 0;
          io.set(r, token(rng), p, real ? p : pad_base + r, real ? 0 : pad_base);
        }
      }
      // The head reads the chunk's last row (a launch that finishes one prompt).
      if (auto* head = static_cast<std::int32_t*>(backend.io(l.program, emit::IoField::head_rows)); head && !decode)
        head[0] = static_cast<std::int32_t>(l.n - 1);
    };
    backend.set_timestamps(false);
    std::vector<double> ms;
    std::vector<std::vector<double>> rank_ms(tp > 1 ? tp : 0);  // under --tp: each rank's own events
    for (int i = 0; i < o.warmup + o.repeats; ++i) {
      double sum = 0;
      std::vector<double> rank_sum(rank_ms.size(), 0.0);
      for (const auto& l : launches) {
        fill(l);
        MET_CHECK(backend.run(l.program));
        sum += backend.last_run_ms();
        for (std::size_t r = 0; r < rank_sum.size(); ++r) rank_sum[r] += backend.rank_run_ms(r);
      }
      if (i >= o.warmup) {
        ms.push_back(sum);
        for (std::size_t r = 0; r < rank_ms.size(); ++r) rank_ms[r].push_back(rank_sum[r]);
      }
    }
    const Stats st = stats(ms);
    // One more run with in-kernel timestamps: wall time of each instruction, summed per family.
    std::map<std::string, double> family, kernel, kernel_slice, kernel_spread;
    std::map<std::string, std::map<std::string, double>> kernel_scope;  // kernel -> scope kind -> walls
    double wall_sum = 0, stamped_ms = 0;
    std::size_t instructions = 0;
    std::vector<double> collective_ms(rank_ms.size(), 0.0);  // per rank: walls of its collectives
    for (const auto& l : launches) {
      fill(l);
      backend.set_timestamps(true);
      MET_CHECK(backend.run(l.program));
      backend.set_timestamps(false);
      stamped_ms += backend.last_run_ms();
      const auto walls = backend.instr_times_ns(l.program);
      const auto slices = backend.slice_times_ns(l.program);
      for (std::size_t r = 0; r < collective_ms.size(); ++r) {
        const auto rank_walls = backend.instr_times_ns(l.program, r);
        for (std::size_t i = 0; i < rank_walls.size(); ++i)
          if (is_collective(f.programs[l.program].instrs[i].opcode)) collective_ms[r] += rank_walls[i] / 1e6;
      }
      instructions += f.programs[l.program].instrs.size();
      for (std::size_t i = 0; i < walls.size(); ++i) {
        const auto* op = emit::find_opcode(f.programs[l.program].instrs[i].opcode);
        const std::string name = op ? op->name : "?";
        family[op ? op->family : "?"] += walls[i] / 1e6;
        kernel[name] += walls[i] / 1e6;
        kernel_scope[name][scope_kind(f.programs[l.program].instrs[i].scope)] += walls[i] / 1e6;
        if (i < slices.size()) {
          kernel_slice[name] += slices[i].mean_ns / 1e6;
          kernel_spread[name] += slices[i].start_spread_ns / 1e6;
        }
        wall_sum += walls[i] / 1e6;
      }
    }
    // The programs the case ran: "prefill_4096" or, chunked, "prefill_4096 x 8" (+ a last bucket).
    std::string program;
    for (std::size_t i = 0; i < launches.size();) {
      std::size_t k = i;
      while (k < launches.size() && launches[k].program == launches[i].program) ++k;
      program += fmt::format("{}{}{}", program.empty() ? "" : " + ", f.programs[launches[i].program].name,
                             k - i > 1 ? fmt::format(" x {}", k - i) : "");
      i = k;
    }
    const Ceilings ceil = ceiling(c);
    const double ceil_ms = ceil.datasheet_s * 1e3;
    nlohmann::json j;
    j["kind"] = c.kind;
    j["rows"] = c.rows;
    if (decode) j["ctx"] = c.ctx;
    j["program"] = program;
    if (launches.size() > 1) j["launches"] = launches.size();
    // The program's plan digest (build.json): what `met circuit plan --measured` matches a case by
    // (a chunked prefill has none: no plan is one launch of it).
    if (launches.size() == 1)
      if (const auto d = a.build.program_digests.find(program); d != a.build.program_digests.end()) j["plan_digest"] = d->second;
    j["instructions"] = instructions;
    j["ms"] = {{"median", st.median}, {"p10", st.p10}, {"p90", st.p90}, {"min", st.min}};
    j["samples_ms"] = ms;
    j["ceiling_ms"] = ceil_ms;
    j["ceiling_share"] = st.median > 0 ? ceil_ms / st.median : 0.0;
    j["ceiling_measured_basis_ms"] = ceil.measured_s * 1e3;
    j["tokens_per_s"] = st.median > 0 ? static_cast<double>(c.rows) / (st.median / 1e3) : 0.0;
    if (decode) j["ms_per_token"] = st.median;
    j["timestamped_ms"] = stamped_ms;
    j["instr_wall_sum_ms"] = wall_sum;
    j["family_ms"] = family;
    j["kernel_ms"] = kernel;
    j["kernel_slice_mean_ms"] = kernel_slice;
    j["kernel_start_spread_ms"] = kernel_spread;
    j["kernel_scope_ms"] = kernel_scope;
    if (!rank_ms.empty()) {
      // Under --tp: each rank's step (its own events; `ms` is the slowest rank's per launch) and the
      // walls of its collective instructions in the timestamped run (waits at the barriers included).
      j["rank_ms"] = nlohmann::json::array();
      for (const auto& v : rank_ms) {
        const Stats rs = stats(v);
        j["rank_ms"].push_back({{"median", rs.median}, {"p10", rs.p10}, {"p90", rs.p90}, {"min", rs.min}});
      }
      j["collective_ms"] = collective_ms;
    }
    out["cases"].push_back(std::move(j));
  }
  return out;
}

std::string campaign_markdown(const nlohmann::json& j) {
  std::string s = fmt::format("# met campaign on {}\n\nassets `{}`, class {} on {} SMs; {} warm-up runs, {} timed runs per case "
                              "(CUDA events around the one launch).\n\n",
                              j.value("device", "?"), j.value("assets", "?"), j["target"].value("class", "?"),
                              j["target"].value("sm_count", 0), j.value("warmup", 0), j.value("repeats", 0));
  s += "| case | program | median ms | p10 | p90 | ceiling ms | ceiling / measured | tokens/s | time by family (timestamped run) |\n";
  s += "|---|---|---:|---:|---:|---:|---:|---:|---|\n";
  for (const auto& c : j["cases"]) {
    std::string fam;
    for (const auto& [k, v] : c["family_ms"].items()) fam += fmt::format("{}{} {:.3f}", fam.empty() ? "" : ", ", k, v.get<double>());
    const std::string name = c["kind"] == "decode" ? fmt::format("decode C={} ctx={}", c["rows"].get<int>(), c["ctx"].get<int>())
                                                   : fmt::format("prefill T={}", c["rows"].get<int>());
    s += fmt::format("| {} | {} | {:.3f} | {:.3f} | {:.3f} | {:.3f} | {:.2f} | {:.0f} | {} |\n", name,
                     c["program"].get<std::string>(), c["ms"]["median"].get<double>(), c["ms"]["p10"].get<double>(),
                     c["ms"]["p90"].get<double>(), c["ceiling_ms"].get<double>(), c["ceiling_share"].get<double>(),
                     c["tokens_per_s"].get<double>(), fam);
  }
  s += "\nTime by kernel (instruction walls of the timestamped run, ms):\n\n| program | kernels |\n|---|---|\n";
  for (const auto& c : j["cases"]) {
    if (!c.contains("kernel_ms")) continue;
    std::string ks;
    for (const auto& [k, v] : c["kernel_ms"].items()) ks += fmt::format("{}{} {:.3f}", ks.empty() ? "" : ", ", k, v.get<double>());
    const std::string at = c.contains("ctx") ? fmt::format(" ctx={}", c["ctx"].get<int>()) : "";
    s += fmt::format("| `{}`{} | {} |\n", c["program"].get<std::string>(), at, ks);
  }
  s += "\nThe same walls split (ms): wall = mean slice time + the rest (slices that started late or ran long); "
       "start spread = last slice start - first slice start, summed over the kernel's instructions.\n\n"
       "| program | kernel | wall | mean slice | start spread |\n|---|---|---:|---:|---:|\n";
  for (const auto& c : j["cases"]) {
    if (!c.contains("kernel_slice_mean_ms") || !c.contains("kernel_start_spread_ms")) continue;
    for (const auto& [k, v] : c["kernel_ms"].items())
      s += fmt::format("| `{}` | {} | {:.3f} | {:.3f} | {:.3f} |\n", c["program"].get<std::string>(), k, v.get<double>(),
                       c["kernel_slice_mean_ms"].value(k, 0.0), c["kernel_start_spread_ms"].value(k, 0.0));
  }
  // Kernels whose instructions sit in more than one kind of scope (Gemma's sliding and full layers):
  // their walls per kind.
  std::string scoped;
  for (const auto& c : j["cases"]) {
    if (!c.contains("kernel_scope_ms")) continue;
    for (const auto& [k, v] : c["kernel_scope_ms"].items()) {
      if (v.size() < 2) continue;
      std::string parts;
      for (const auto& [sk, ms] : v.items()) parts += fmt::format("{}{} {:.3f}", parts.empty() ? "" : ", ", sk, ms.get<double>());
      scoped += fmt::format("| `{}` | {} | {} |\n", c["program"].get<std::string>(), k, parts);
    }
  }
  if (!scoped.empty())
    s += "\nWalls by the kind of scope their instructions belong to (ms), for kernels found in more than one:\n\n"
         "| program | kernel | by scope |\n|---|---|---|\n" + scoped;
  bool ranked = false;
  for (const auto& c : j["cases"]) ranked = ranked || c.contains("rank_ms");
  if (ranked) {
    s += "\nTensor-parallel ranks (ms): each rank's median step (its own CUDA events; the table above holds the slowest "
         "rank's) and the walls of its collective instructions in the timestamped run, barrier waits included.\n\n"
         "| case | rank | median | p10 | p90 | collectives |\n|---|---:|---:|---:|---:|---:|\n";
    for (const auto& c : j["cases"]) {
      if (!c.contains("rank_ms")) continue;
      const std::string name = c["kind"] == "decode"
                                   ? fmt::format("decode C={} ctx={}", c["rows"].get<int>(), c["ctx"].get<int>())
                                   : fmt::format("prefill T={}", c["rows"].get<int>());
      for (std::size_t r = 0; r < c["rank_ms"].size(); ++r) {
        const auto& m = c["rank_ms"][r];
        s += fmt::format("| {} | {} | {:.3f} | {:.3f} | {:.3f} | {:.3f} |\n", name, r, m["median"].get<double>(),
                         m["p10"].get<double>(), m["p90"].get<double>(), c["collective_ms"][r].get<double>());
      }
    }
  }
  return s;
}

}  // namespace met::interp
