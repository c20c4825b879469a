// The emit entry point: for each prefill bucket and decode rung, the planner's Plan at that mode and
// row count becomes a program (bind.cpp binds each group's kernels, slice.cpp cuts the slices,
// schedule.cpp places them on the streams); the KV caches are shared by every program, and
// build_info.cpp writes the record of the emit.
#include "emit/emit.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <string>
#include <vector>

#include "emit/bind.hpp"
#include "emit/build_info.hpp"
#include "emit/builder.hpp"
#include "emit/config.hpp"
#include "emit/schedule.hpp"
#include "emit/slice.hpp"
#include "emit/tensor_parallel.hpp"
#include "kernels/common/interp/smem.h"
#include "model/kv_ring.hpp"

namespace met::emit {

using namespace detail;

namespace {

constexpr std::int64_t kKeysPerSplit = 512;  // decode attention: one split per this many keys of context
constexpr std::int64_t kMaxSplits = 16;
constexpr std::uint32_t kDefaultCpuThreads = 4;


// The loader computes a scaled rope's inv_freq table from build.json's one rope, so every scaled
// rope node must share its base; a node's own base (Gemma-3's global rope_theta) becomes that rope's.
Expected<void> settle_scaled_rope(Config& cfg, const model::ModelGraph& graph) {
  if (!cfg.rope.scaled()) return {};
  double theta = 0;
  for (const auto& kind : graph.kinds)
    for (const auto& n : kind.nodes) {
      if (n.op != "rope") continue;
      const RopeConfig r = node_rope(cfg, n);
      if (!r.scaled()) continue;
      if (theta > 0 && r.theta != theta)
        return fail(n.where + ": scaled ropes with bases " + std::to_string(theta) + " and " + std::to_string(r.theta) +
                    "; met carries one scaled rope per emit");
      theta = r.theta;
    }
  if (theta > 0) {
    cfg.rope.theta = theta;
    cfg.theta = static_cast<float>(theta);
  }
  return {};
}

// Why a gap no candidate rule was blocked on has none: the rules over its op (role included) whose
// modes or row range leave this program (mode, rows) out, e.g. "rules over linear:qkv take other
// cases: gemv_rmsnorm_qkv_rope (decode, batch; 1 to 16 rows), gemm_bf16_wgmma (batch, prefill; 17
// to 1048576 rows)".
std::string rules_for_other_cases(const planner::RuleSet& rules, const model::Node& n, planner::Mode mode, std::int64_t rows) {
  std::vector<std::string> seen, cases;
  for (const auto& r : rules.rules) {
    const bool over =
        std::any_of(r.pattern.begin(), r.pattern.end(), [&](const planner::PatternElem& e) { return e.matches(n.op, n.role); });
    if (!over || r.takes(mode, rows) || std::find(seen.begin(), seen.end(), r.id) != seen.end()) continue;
    seen.push_back(r.id);
    std::vector<std::string> modes;
    for (auto m : r.modes) modes.emplace_back(planner::mode_name(m));
    std::string range = fmt::format("{} to {} rows", r.rows.min, r.rows.max);
    if (r.prefill_rows) range += fmt::format(", prefill {} to {}", r.prefill_rows->min, r.prefill_rows->max);
    cases.push_back(fmt::format("{} ({}; {})", r.id, fmt::join(modes, ", "), range));
    if (cases.size() == 4) break;
  }
  if (cases.empty()) return "no rule covers it";
  return fmt::format("no rule covers it here; rules over {}{} take other cases: {}", n.op, n.role.empty() ? "" : ":" + n.role,
                     fmt::join(cases, ", "));
}

}  // namespace

std::vector<std::string> plan_group_rules(const planner::Plan& plan, const model::ModelGraph& graph) {
  std::vector<std::string> out;
  auto scope_rules = [&](const planner::Scope& s) {
    for (const auto& g : s.groups) out.push_back(g.gap ? "gap" : g.rule);
  };
  const std::size_t first_kind = graph.pre.empty() ? 0 : 1;
  if (!graph.pre.empty()) scope_rules(plan.scopes.front());
  for (std::size_t l = 0; l < graph.layer_kinds.size(); ++l)
    scope_rules(plan.scopes[first_kind + static_cast<std::size_t>(graph.layer_kinds[l])]);
  if (!graph.post.empty()) scope_rules(plan.scopes.back());
  return out;
}

namespace {

// The packet of one rank (the whole emit without --tp): graph is the graph that rank runs,
// kv_groups the slices of the KV heads across ranks (tensor_parallel.hpp).
Expected<Assets> emit_rank(const planner::Library& lib, const planner::Target& target, const model::ModelGraph& graph,
                           const CheckpointLayout& layout, const EmitOptions& options, int rank, int kv_groups) {
  const auto& cls = target.chain.leaf();
  const bool cpu = cls.vendor == "host";
  if (cls.gemm_k_split && cls.gemm_k_split->first > MET_GEMM_MAX_KSPLITS)
    return fail(fmt::format("emit: class '{}' ({}) splits a GEMM's K into up to {} parts; the GEMM body takes at most {} "
                            "(kernels/common/interp/smem.h)",
                            cls.id, cls.location, cls.gemm_k_split->first, MET_GEMM_MAX_KSPLITS));
  Assets a;
  MET_TRY(Config cfg, read_config(options.config_json));
  MET_CHECK(settle_scaled_rope(cfg, graph));
  std::vector<std::int64_t> rungs = options.decode_rungs, buckets = options.prefill_buckets;
  if (rungs.empty())
    for (int r : cls.defaults.decode_rungs) rungs.push_back(r);
  if (buckets.empty())
    for (int r : cls.defaults.prefill_buckets) buckets.push_back(r);
  std::sort(rungs.begin(), rungs.end());
  std::sort(buckets.begin(), buckets.end());
  rungs.erase(std::unique(rungs.begin(), rungs.end()), rungs.end());
  buckets.erase(std::unique(buckets.begin(), buckets.end()), buckets.end());
  if (rungs.empty() || rungs.front() < 1) return fail("emit: --decode-rungs: need at least one rung >= 1");
  if (buckets.empty() || buckets.front() < 1) return fail("emit: --prefill-buckets: need at least one bucket >= 1");
  if (options.max_ctx < 1) return fail("emit: --max-ctx must be >= 1");
  if (buckets.back() > options.max_ctx)
    return fail("emit: prefill bucket " + std::to_string(buckets.back()) + " exceeds --max-ctx " +
                std::to_string(options.max_ctx));
  const bool gpu = !cpu;
  const std::uint32_t sm = options.sm_count ? options.sm_count
                           : cpu            ? kDefaultCpuThreads
                                            : static_cast<std::uint32_t>(std::max(1, target.device->units));
  a.max_ctx = options.max_ctx;
  a.max_seqs = options.max_seqs > 0 ? options.max_seqs : rungs.back();
  if (a.max_seqs < rungs.back())
    return fail("emit: max_seqs " + std::to_string(a.max_seqs) + " is below the largest decode rung");
  a.pad_slots = buckets.back();

  a.packet.target_class = cls.id;
  a.packet.sm_count = sm;
  a.packet.tp_ranks = static_cast<std::uint32_t>(options.tp);
  a.packet.tp_rank = static_cast<std::uint32_t>(rank);
  a.weights.network = options.network;
  a.weights.checkpoint = options.checkpoint;
  Shared sh;
  sh.file = &a.packet;
  sh.manifest = &a.weights;
  sh.layout = &layout;
  sh.display = options.checkpoint.empty() ? graph.id : options.checkpoint;
  sh.kv_slots = a.max_seqs * a.max_ctx + a.pad_slots;
  sh.tp = options.tp;
  sh.rank = rank;
  sh.kv_groups = kv_groups;

  // KV caches: one k and one v tensor per attention layer, shared by every program, in the graph's
  // KV format: bf16, or e4m3 with one per-tensor scale per cache: the checkpoint's calibrated scale
  // (modelopt's k_proj.k_scale / v_proj.v_scale) where it carries them, else 1 (docs/arch/formats.md,
  // The fp8 KV cache). With bf16 caches the calibrated scales are unused.
  if (graph.kv != Format::bf16 && graph.kv != Format::fp8_e4m3) {
    return fail("emit: a " + std::string(format_name(graph.kv)) + " KV cache is not emitted (bf16, fp8-e4m3)");
  }
  const bool kv_fp8 = graph.kv == Format::fp8_e4m3;
  std::map<int, KvScale> calibrated;
  if (kv_fp8) {
    MET_TRY(calibrated, calibrated_kv_scales(layout, sh.display));
  }
  sh.kv_fp8 = kv_fp8 ? 1 : 0;
  const std::uint64_t kv_elem = kv_fp8 ? 1 : 2;
  // A sliding-window layer's cache is a ring where that is smaller (model/kv_ring.hpp).
  a.kv_ring = cls.defaults.kv_ring ? model::model_kv_ring(graph, buckets.back(), a.max_ctx) : 0;
  const std::int64_t ring_slots = a.max_seqs * model::kv_rows_per_seq(a.kv_ring, a.max_ctx) + a.pad_slots;
  for (std::size_t l = 0; l < graph.layer_kinds.size(); ++l) {
    const auto& kind = graph.kinds[static_cast<std::size_t>(graph.layer_kinds[l])];
    const std::int64_t ring = model::kind_window(kind) > 0 ? a.kv_ring : 0;
    for (const auto& n : kind.nodes) {
      if (n.op != "kv_append") continue;
      const std::int64_t kvh = param(n, "kv_heads"), hd = param(n, "head_dim");
      const std::int64_t vhd = param(n, "v_head_dim") > 0 ? param(n, "v_head_dim") : hd;
      auto make = [&](const char* which, std::int64_t dim) {
        TensorDesc t;
        t.name = "kv.L" + std::to_string(l) + "." + which;
        t.dtype = kv_fp8 ? MET_DTYPE_FP8_E4M3 : MET_DTYPE_BF16;
        t.shape = {static_cast<std::uint64_t>(ring > 0 ? ring_slots : sh.kv_slots), static_cast<std::uint64_t>(kvh),
                   static_cast<std::uint64_t>(dim)};
        t.bytes = kv_elem * t.shape[0] * t.shape[1] * t.shape[2];
        t.source = MET_SOURCE_KV;
        t.ref = l;
        return add_tensor(a.packet, std::move(t));
      };
      const auto kh = make("k", hd);
      sh.kv[static_cast<int>(l)] = {kh, make("v", vhd)};
      sh.kv_scale[static_cast<int>(l)] = {1.0f, 1.0f};
      if (!calibrated.empty()) {
        // Every cache of a calibrated checkpoint encodes with its own layer's scales, never 1.
        auto it = calibrated.find(static_cast<int>(l));
        if (it == calibrated.end()) {
          return fail(fmt::format("emit: {}: the checkpoint carries calibrated KV scales, but none for layer {} ('layers.{}{}')",
                                  sh.display, l, l, kKScaleSuffix));
        }
        sh.kv_scale[static_cast<int>(l)] = {it->second.k_scale, it->second.v_scale};
        a.weights.kv_scales.push_back(it->second);
      }
      sh.kv_ring[static_cast<int>(l)] = ring;
    }
  }

  struct Want {
    planner::Mode mode;
    std::int64_t rows;
    std::string name;
  };
  std::vector<Want> wants;
  for (auto t : buckets) wants.push_back({planner::Mode::prefill, t, "prefill_" + std::to_string(t)});
  for (auto c : rungs) wants.push_back({c == 1 ? planner::Mode::decode : planner::Mode::batch, c, "decode_" + std::to_string(c)});

  const std::int64_t splits = std::clamp<std::int64_t>(options.max_ctx / kKeysPerSplit, 1, kMaxSplits);
  for (const auto& want : wants) {
    planner::PlanInput in;
    in.tree = lib.tree;
    in.registry = &lib.registry;
    in.device = target.device;
    in.chain = &target.chain;
    in.availability = &target.availability;
    in.rules = &target.rules;
    in.model = &graph;
    in.mode = want.mode;
    in.rows = want.rows;
    const bool prefill = want.mode == planner::Mode::prefill;
    const std::int64_t head_rows = prefill ? planner::prefill_head_rows(want.rows) : want.rows;
    const planner::Plan plan = planner::build_plan(in);
    if (plan.gap_groups > 0) {
      std::string gaps;
      for (const auto& s : plan.scopes)
        for (const auto& g : s.groups) {
          if (!g.gap) continue;
          std::string ops;
          for (int i : g.nodes) {
            const auto& n = s.nodes[static_cast<std::size_t>(i)];
            ops += (ops.empty() ? "" : " ") + n.op + (n.role.empty() ? "" : ":" + n.role);
          }
          std::string why = g.blocked.empty() ? rules_for_other_cases(target.rules, s.nodes[static_cast<std::size_t>(g.nodes.front())], s.mode, s.rows)
                                              : g.blocked.front().rule + ": " + g.blocked.front().why;
          gaps += "\n  " + s.name + ": " + ops + " (" + why + ")";
        }
      return fail("emit: program " + want.name + " (" + std::string(planner::mode_name(want.mode)) + ", " +
                  std::to_string(want.rows) + " rows) on class '" + cls.id + "' has " + std::to_string(plan.gap_groups) +
                  " gap group(s); emit only runs a plan without gaps:" + gaps);
    }
    Builder b;
    b.sh = &sh;
    b.prog.name = want.name;
    b.prog.kind = want.mode == planner::Mode::prefill ? MET_PROGRAM_PREFILL : MET_PROGRAM_DECODE;
    b.prog.rows = static_cast<std::uint32_t>(want.rows);
    b.rows = want.rows;
    b.cfg = cfg;
    b.max_ctx = options.max_ctx;
    // A GPU decode splits each row's keys across the streams, at most one split per
    // `--split-keys` keys (options.split_keys; 0 takes kDefaultSplitKeys; bind_attention divides
    // the streams); the cpu keeps one split per kKeysPerSplit keys of context.
    const std::int64_t split_keys = options.split_keys > 0 ? options.split_keys : kDefaultSplitKeys;
    b.splits_max = gpu ? std::max<std::int64_t>(1, options.max_ctx / split_keys) : splits;
    b.split_keys = gpu ? split_keys : 0;
    b.streams = gpu ? static_cast<std::int64_t>(sm) : 0;
    std::vector<std::uint32_t> scope_base;  // flat index of each scope's first group
    std::uint32_t flat = 0;
    for (const auto& s : plan.scopes) {
      scope_base.push_back(flat);
      flat += static_cast<std::uint32_t>(s.groups.size());
    }
    b.prog.plan_group_count = flat;
    ProgramInfo info;
    info.name = want.name;
    info.mode = std::string(planner::mode_name(want.mode));
    info.rows = want.rows;
    info.digest = plan.digest;
    auto run_scope = [&](std::size_t si, int layer, int first_layer, const std::string& label) -> Expected<void> {
      const auto& s = plan.scopes[si];
      const bool head = s.name == "post";
      // A prefill head reads the last row of each prompt the launch finishes: gathered by the
      // host's head_rows into a buffer of its own, in the head's first group.
      std::uint32_t head_x = MET_NO_TENSOR;
      if (head && prefill && !s.groups.empty()) {
        const auto hidden = static_cast<std::int64_t>(graph.params.at("hidden"));
        head_x = b.act("head.x", head_rows, hidden);
        MET_CHECK(b.add("gather_rows", scope_base[si], label,
                        {b.act("x", want.rows, hidden), b.io(IoField::head_rows, head_rows), head_x},
                        {head_rows, /*src_rows=*/want.rows, /*width=*/hidden}, {}));
      }
      for (std::size_t gi = 0; gi < s.groups.size(); ++gi) {
        ScopeCtx c;
        c.scope = &s;
        c.group = &s.groups[gi];
        c.group_index = scope_base[si] + static_cast<std::uint32_t>(gi);
        c.label = label;
        c.layer = layer;
        c.first_layer = first_layer;
        c.rows = s.rows;
        c.head = head;
        c.x = head_x;
        MET_CHECK(emit_group(b, c, graph));
        info.groups.push_back(s.groups[gi].rule);
      }
      if (b.partial != MET_NO_TENSOR)  // a row-parallel op's partial sums no residual all-reduced
        return fail(fmt::format("emit: {}: --tp {}: a row-parallel op's fp32 partial sums reach no residual add in scope '{}'",
                                sh.display, options.tp, label));
      return {};
    };
    std::size_t si = 0;
    if (!graph.pre.empty()) MET_CHECK(run_scope(si++, 0, 0, "pre"));
    for (std::size_t l = 0; l < graph.layer_kinds.size(); ++l) {
      const auto k = static_cast<std::size_t>(graph.layer_kinds[l]);
      const auto& kind = graph.kinds[k];
      MET_CHECK(run_scope(si + k, static_cast<int>(l), kind.layers.empty() ? 0 : kind.layers.front(),
                          plan.scopes[si + k].name + " L" + std::to_string(l)));
    }
    if (!graph.post.empty()) MET_CHECK(run_scope(plan.scopes.size() - 1, 0, 0, "post"));
    // Sampling on the device, after the head (same group): non-greedy rows draw their token from
    // the logits with the host's per-step parameters; greedy rows skip it and read the argmax.
    if (auto it = b.bufs.find("io.logits"); it != b.bufs.end() && !b.prog.instrs.empty()) {
      const auto& lt = sh.file->tensors[it->second];
      const auto logit_rows = static_cast<std::int64_t>(lt.shape[0]), vocab = static_cast<std::int64_t>(lt.shape[1]);
      const auto& last = b.prog.instrs.back();
      MET_CHECK(b.add("sample", last.group, last.scope,
                      {it->second, b.io(IoField::sample_params, logit_rows, 4), b.io(IoField::sampled_tokens, logit_rows)},
                      {logit_rows, /*in_row0=*/0, vocab}, {}));
    }
    if (gpu && cls.gemm_k_split)
      split_gemms(b.prog, a.packet, sm, *cls.gemm_k_split, [&](std::uint64_t slices) {
        return b.buffer("gemm.part", MET_DTYPE_F32, {slices, static_cast<std::uint64_t>(MET_GEMM_PART_FLOATS)});
      });
    slice_program(b.prog, a.packet, sm, gpu);
    schedule(b.prog, sm);
    a.packet.programs.push_back(std::move(b.prog));
    a.programs.push_back(std::move(info));
  }

  BuildRecord rec;
  rec.options = &options;
  rec.target_class = cls.id;
  rec.device = target.device->id;
  rec.model = graph.id;
  rec.sm_count = sm;
  rec.max_ctx = a.max_ctx;
  rec.max_seqs = a.max_seqs;
  rec.pad_slots = a.pad_slots;
  rec.kv_ring = a.kv_ring;
  rec.decode_rungs = rungs;
  rec.prefill_buckets = buckets;
  rec.attn_splits = splits;
  rec.cfg = cfg;
  rec.programs = &a.programs;
  a.build_json = write_build_json(rec);
  return a;
}

// The ops tensor parallelism adds to a rank's programs (kernels/common/ops.def): the collectives
// (an int `ranks`) and the projections whose sums stay fp32 for the all-reduce (`_f32`). The class
// chain must define a body for each one: availability, not the vendor, decides (the cpu class's
// bodies, the hopper interpreter's under MET_HAS_NCCL_DEVICE). Before the emit, the collectives
// every TP program runs (the residual all-reduce, the logits' gather); after rank 0's emit, every
// such op its programs use.
Expected<void> check_tp_body(const planner::Target& target, const std::string& op, const std::string& used_by, int tp,
                             const std::string& display) {
  const avail::KernelStatus st = target.availability.status("met_" + op);
  if (st.available) return {};
  return fail(
      fmt::format("{}: --tp {}: {} '{}', which class '{}' has no body for ({}); tensor-parallel programs run where the "
                  "class chain defines the collectives and the fp32 projections they use",
                  display, tp, used_by, op, target.chain.leaf().id, st.why));
}

Expected<void> check_tp_collectives(const planner::Target& target, int tp, const std::string& display) {
  for (const char* op : {"allreduce_residual", "allgather_cols"})
    MET_CHECK(check_tp_body(target, op, "every tensor-parallel program runs", tp, display));
  return {};
}

Expected<void> check_tp_bodies(const planner::Target& target, const PacketFile& f, int tp, const std::string& display) {
  for (const auto& p : f.programs)
    for (std::size_t i = 0; i < p.instrs.size(); ++i) {
      const OpcodeInfo* op = find_opcode(p.instrs[i].opcode);
      if (!op || (int_index(*op, "ranks") < 0 && !op->name.ends_with("_f32"))) continue;
      MET_CHECK(check_tp_body(target, op->name, fmt::format("program {} instruction {} ({}) is", p.name, i, p.instrs[i].scope),
                              tp, display));
    }
  return {};
}

}  // namespace

Expected<Assets> emit(const planner::Library& lib, const planner::Target& target, const model::ModelGraph& graph,
                      const CheckpointLayout& layout, const EmitOptions& options) {
  if (options.tp == 1) return emit_rank(lib, target, graph, layout, options, 0, 1);
  const std::string display = options.checkpoint.empty() ? graph.id : options.checkpoint;
  if (options.tp < 1 || options.tp > static_cast<int>(kMaxTpRanks) || (options.tp & (options.tp - 1)) != 0)
    return fail(fmt::format("{}: --tp {} is not one of 1, 2, 4, 8", display, options.tp));
  MET_CHECK(check_tp_collectives(target, options.tp, display));
  MET_TRY(const model::ModelGraph rg, rank_graph(graph, options.tp, display));
  const int groups = kv_groups(graph, options.tp);
  MET_TRY(Assets a, emit_rank(lib, target, rg, layout, options, 0, groups));
  MET_CHECK(check_tp_bodies(target, a.packet, options.tp, display));
  for (int r = 1; r < options.tp; ++r) {
    MET_TRY(Assets ar, emit_rank(lib, target, rg, layout, options, r, groups));
    // One weights.json for every rank: the rank's entries join rank 0's (a replicated entry is
    // shared by name), and its packet's checkpoint tensors are renumbered to match.
    for (auto& t : ar.packet.tensors) {
      if (t.source != MET_SOURCE_CHECKPOINT) continue;
      const WeightEntry& e = ar.weights.tensors[t.ref];
      std::size_t k = 0;
      while (k < a.weights.tensors.size() && a.weights.tensors[k].name != e.name) ++k;
      if (k == a.weights.tensors.size()) a.weights.tensors.push_back(e);
      t.ref = k;
    }
    for (std::size_t p = 0; p < ar.programs.size(); ++p)
      if (ar.programs[p].groups != a.programs[p].groups)
        return fail(fmt::format("{}: --tp {}: rank {} program {} fuses differently from rank 0", display, options.tp, r,
                                ar.programs[p].name));
    a.other_ranks.push_back(std::move(ar.packet));
  }
  return a;
}

}  // namespace met::emit
