// analyze(): runs the planner at every case a report shows and costs each plan. Prefill models
// the emitted program: chunks at the class's bucket sizes (the remainder padded up to the
// smallest bucket that holds it), attention IO of a flash kernel, and in every launch the head over
// the rows of the prompts a packed launch can finish (planner::prefill_head_rows).
#include "estimate/analysis.hpp"

#include "model/tp_rules.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <set>

#include "core/strings.hpp"
#include "model/kv_ring.hpp"
#include "model/ops.hpp"
#include "planner/matrix_ops.hpp"

namespace met::estimate {
namespace {

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;
constexpr double kMiB = 1024.0 * 1024.0;
// Latency of one small all-reduce over NVLink/xGMI: an assumption until a campaign measures it.
constexpr double kAllReduceLatencyS = 10e-6;
constexpr double kLogitBytes = 4.0;
constexpr double kStateBytes = 4.0;
constexpr int kActivationBuffers = 2;  // ping-pong activation buffers of the widest node

double param(const model::ModelGraph& m, const char* key) {
  auto it = m.params.find(key);
  return it == m.params.end() ? 0 : it->second;
}

double node_param(const model::Node& n, const char* key) {
  auto it = n.params.find(key);
  return it == n.params.end() ? 0 : it->second;
}

std::string node_label(const model::Node& n) { return n.role.empty() ? n.op : n.op + ":" + n.role; }

std::string quantized_note(const planner::Exec& e) { return fmt::format("activations quantised to {} on the fly", e.act_math); }

// Weight shards under TP, as `met circuit emit --tp` splits them: matrices split (the head by
// vocabulary), the embedding table, the MoE router (every rank routes every row) and small
// parameters (norm scales, conv taps, sinks) replicated.
bool sharded(const model::Node& n) { return planner::is_matrix_op(n.op) && n.op != "embed" && n.op != "moe_router"; }

bool tied_head(const model::ModelGraph& m, const model::Node& n) {
  return m.tied_embeddings && n.op == "linear" && n.role == "lm_head";
}

std::vector<std::int64_t> prefill_chunks(std::int64_t T, const std::vector<int>& buckets) {
  std::vector<std::int64_t> out;
  if (buckets.empty()) {
    out.push_back(T);
    return out;
  }
  const std::int64_t biggest = *std::max_element(buckets.begin(), buckets.end());
  std::int64_t left = T;
  while (left > biggest) {
    out.push_back(biggest);
    left -= biggest;
  }
  std::int64_t pick = biggest;
  for (int b : buckets) {
    if (b >= left && b < pick) pick = b;
  }
  out.push_back(pick);
  return out;
}

struct ScopeSum {
  double ceiling = 0, prediction = 0, weight = 0, kv = 0, other = 0, flops = 0, gap = 0, memory_bound = 0;
  bool measured = false;
  std::set<std::string> evidence;  // campaign files, each once
  // A family's evidence names its campaigns comma-separated, and families share them.
  void cite(const std::string& campaigns) {
    for (const auto& f : split(campaigns, ','))
      if (auto t = trim(f); !t.empty()) evidence.insert(std::string(t));
  }
};

}  // namespace

std::int64_t gemm_k_parts(std::int64_t tiles, std::int64_t k, std::int64_t units,
                          const std::optional<std::pair<std::int64_t, std::int64_t>>& split) {
  if (!split || tiles <= 0 || units <= 0 || k <= 0) return 1;
  return std::max<std::int64_t>(1, std::min({split->first, units / tiles, k / split->second}));
}

namespace {

// fit_basis: the basis a family's measured efficiency is a share of (met circuit calibrate fits
// the measured time against the datasheet-basis ceiling). A prediction divides that same
// ceiling, whichever basis the report's ceiling uses: dividing a measured-basis ceiling by it would
// count the device's shortfall twice.
// The share of the SMs a GEMM group's output tiles keep busy: tiles / (waves x SMs), 1 where the
// class names no GEMM tile or the group is no GEMM. A short prompt's o projection on Llama-3.2-1B
// (T = 128, 2048 columns) is 16 tiles of 128 x 128 for 132 SMs: its products take the time of
// one tile, not a 132nd of the total. Gated GEMMs tile their activation's columns.
// A class whose body splits K (gemm_k_split) runs each tile's K in parts where the tiles leave SMs
// idle (gemm_k_parts; not a gated GEMM's, emit's split_gemms), so a tile and its parts count as that many.
double tile_occupancy(const planner::Group& g, const planner::Scope& scope, std::int64_t rows, const avail::ClassInfo& cls,
                      int units) {
  if (!cls.gemm_tile || units <= 0 || g.family != "gemm" || rows <= 0) return 1.0;
  std::int64_t cols = 0, k = 0;
  bool gated = false;
  for (int idx : g.nodes) {
    const auto& n = scope.nodes[static_cast<std::size_t>(idx)];
    if (n.op == "linear" && n.params.count("out")) cols = static_cast<std::int64_t>(n.params.at("out"));
    if (n.op == "linear" && n.params.count("in")) k = static_cast<std::int64_t>(n.params.at("in"));
    if (n.op == "silu_mul" || n.op == "gelu_mul") gated = true;
  }
  if (gated) cols /= 2;
  if (cols <= 0) return 1.0;
  const auto [tm, tn] = *cls.gemm_tile;
  const std::int64_t out_tiles = ((rows + tm - 1) / tm) * ((cols + tn - 1) / tn);
  const std::int64_t tiles = out_tiles * (gated ? 1 : gemm_k_parts(out_tiles, k, units, cls.gemm_k_split));
  const std::int64_t waves = (tiles + units - 1) / units;
  return static_cast<double>(tiles) / static_cast<double>(waves * units);
}

// The case a family's measured figures are looked up at: they are fitted per step (met circuit
// calibrate: a family's time in a campaign case against its groups' ceilings in that case), so every
// group of a step takes the step's point, the head of a prefill included (it runs on its few head
// rows, but its time was measured as part of the prefill step of the chunk's rows).
struct EvidenceKey {
  bool prefill = false;
  std::int64_t rows = 1;
};

void add_scope_cost(ScopeSum& sum, const planner::Plan& plan, const planner::Scope& scope, const StepShape& shape, const Basis& basis,
                    const Basis& fit_basis, const planner::RuleSet& rules, const avail::ClassInfo& cls, int units, EvidenceKey key,
                    std::vector<GroupRow>* rows) {
  for (const auto& g : scope.groups) {
    const GroupCost c = group_cost(g, scope, shape, basis);
    double pred = c.seconds;
    const GroupCost fc = basis.choice == fit_basis.choice ? c : group_cost(g, scope, shape, fit_basis);
    const double fit_seconds = std::max(fc.memory_seconds, fc.compute_seconds / tile_occupancy(g, scope, shape.rows, cls, units));
    bool measured = false;
    if (!g.gap) {
      auto fam = rules.families.find(g.family);
      const auto eff = fam != rules.families.end() ? fam->second.efficiency_at(key.prefill, key.rows) : std::nullopt;
      if (eff) {
        pred = fit_seconds / *eff;
        sum.measured = true;
        sum.cite(fam->second.evidence);
        // The family's fixed time per instruction, where it was fitted from two model sizes.
        const double fixed = fam->second.fixed_seconds_at(key.prefill, key.rows);
        if (fixed > 0) {
          pred += fixed;
          sum.cite(fam->second.fixed_evidence);
        }
      }
      measured = eff.has_value();
      // The interpreter's measured per-packet overhead (the class's own figure, never inherited):
      // from its EVIDENCE.toml, or a hand-carried HARDWARE.toml figure (never both).
      const auto overhead = rules.packet_overhead_us ? rules.packet_overhead_us : cls.packet_overhead_us;
      if (overhead) {
        pred += *overhead * 1e-6;
        sum.measured = true;
        sum.cite(rules.packet_overhead_us ? rules.packet_overhead_evidence : cls.packet_overhead_evidence);
      }
    }
    const double n = scope.count;
    sum.ceiling += n * c.seconds;
    sum.prediction += n * pred;
    sum.weight += n * c.weight_bytes;
    sum.kv += n * c.kv_bytes;
    sum.other += n * c.other_bytes;
    sum.flops += n * c.flops;
    if (g.gap) sum.gap += n * pred;
    if (c.bound == "memory") sum.memory_bound += n * c.seconds;
    if (rows) {
      GroupRow r;
      r.scope = scope.name;
      r.count = scope.count;
      r.group = g.gap ? "gap" : g.rule;
      std::vector<std::string> names;
      for (int idx : g.nodes) names.push_back(node_label(scope.nodes[static_cast<std::size_t>(idx)]));
      r.nodes = join(names, " ");
      r.kernels = g.gap ? "" : join(g.kernels, ", ");
      r.unit = g.unit;
      r.family = g.family;
      r.measured = measured;
      r.exec = g.exec ? exec_text(*g.exec, g.gap) : "";
      r.exec_detail = g.exec;
      r.cost = c;
      r.fit_seconds = fit_seconds;
      r.step_seconds = n * pred;
      rows->push_back(std::move(r));
    }
  }
  (void)plan;
}

// Bytes per element of what `met circuit emit --tp` all-reduces: the fp32 partial sums of the
// row-parallel projections (gemv_f32 / gemm_f32 into allreduce_residual, kernels/common/ops.def),
// rounded once after the sum as the unsplit projection rounds.
constexpr double kPartialSumBytes = 4.0;

// `count` collectives of `bytes` each, of which every device moves `share` over the interconnect,
// plus the assumed latency per collective.
double collective_seconds(const Basis& basis, std::int64_t count, double bytes, double share) {
  if (basis.interconnect.value <= 0) return std::numeric_limits<double>::infinity();
  return static_cast<double>(count) * (share * bytes / basis.interconnect.value + kAllReduceLatencyS);
}

// The step's all-reduces of `rows` hidden vectors (a ring moves 2 (tp - 1) / tp of each) and the
// gather of the vocabulary-parallel logits of `rows` rows (allgather_cols, in the activations'
// format; each device receives the other (tp - 1) / tp).
double allreduce_seconds(const model::ModelGraph& m, const Basis& basis, std::int64_t rows, int tp) {
  if (tp <= 1) return 0;
  return collective_seconds(basis, tp_collectives(m, tp).all_reduces, static_cast<double>(rows) * param(m, "hidden") * kPartialSumBytes,
                            2.0 * (tp - 1) / tp);
}
double gather_seconds(const model::ModelGraph& m, const Basis& basis, std::int64_t rows, int tp) {
  if (tp <= 1) return 0;
  return collective_seconds(basis, tp_collectives(m, tp).gathers,
                            static_cast<double>(rows) * param(m, "vocab") * format_bytes(m.activation), static_cast<double>(tp - 1) / tp);
}

planner::Plan make_plan(const planner::Library& lib, const planner::Target& t, const model::ModelGraph& m, planner::Mode mode,
                        std::int64_t rows) {
  planner::PlanInput in;
  in.tree = lib.tree;
  in.registry = &lib.registry;
  in.device = t.device;
  in.chain = &t.chain;
  in.availability = &t.availability;
  in.rules = &t.rules;
  in.model = &m;
  in.mode = mode;
  in.rows = rows;
  return planner::build_plan(in);
}

}  // namespace

TpCollectives tp_collectives(const model::ModelGraph& m, int tp) {
  TpCollectives c;
  if (tp <= 1) return c;
  // A row-parallel projection (the split rules' row and expert_row; a projection back to the
  // hidden size the rules do not name, as an architecture the emit does not split yet, counts as
  // one) leaves partial sums, all-reduced where the next norm or residual add reads them: at most
  // one all-reduce per such reader, so a routed and a shared expert feeding one residual share it.
  const auto it = m.params.find("hidden");
  const double hidden = it == m.params.end() ? 0.0 : it->second;
  for (const auto& k : m.kinds) {
    bool pending = false;
    for (const auto& n : k.nodes) {
      const model::TpRule* rule = model::tp_rule(n);
      const auto out = n.params.find("out");
      if (rule ? (*rule == model::TpRule::row || *rule == model::TpRule::expert_row)
               : n.op == "linear" && out != n.params.end() && out->second == hidden) {
        pending = true;
      } else if (pending && (n.op == "rmsnorm" || n.op == "residual")) {
        c.all_reduces += static_cast<std::int64_t>(k.layers.size());
        pending = false;
      }
    }
  }
  for (const auto& n : m.post)
    if (n.op == "linear" && n.role == "lm_head") ++c.gathers;
  return c;
}

std::string exec_text(const planner::Exec& e, bool gap) {
  if (gap) return fmt::format("{} {} x {} {}", e.path, e.weight, e.act_math, e.how);
  std::string s = fmt::format("{} {} x {} {} ({})", e.path, e.weight, e.act, e.how, e.math);
  if (e.quantizes_act()) s += ", " + quantized_note(e);
  return s;
}

CaseEstimate estimate_case(const planner::Library& lib, const planner::Target& target, const model::ModelGraph& model,
                           const Basis& basis, planner::Mode mode, std::int64_t rows, std::int64_t context, int tp,
                           std::vector<GroupRow>* groups, planner::Plan* plan_out) {
  CaseEstimate ce;
  ce.mode = std::string(planner::mode_name(mode));
  ce.rows = rows;
  ce.context = context;
  ce.tp = tp;
  ScopeSum sum;
  const Basis fit_basis = make_basis(*target.device, BasisChoice::datasheet);
  StepShape shape;
  shape.tp = tp;
  shape.act = model.activation;
  shape.kv = model.kv;
  shape.moe_block = target.chain.leaf().moe_gemm_block;
  shape.moe_sorted = target.chain.leaf().moe_gemm_sorted;
  shape.units = target.device->units;
  if (mode != planner::Mode::prefill) {
    const planner::Plan plan = make_plan(lib, target, model, mode, rows);
    shape.rows = rows;
    shape.seqs = rows;
    shape.context = context;
    for (const auto& s : plan.scopes) {
      StepShape sh = shape;
      if (mode == planner::Mode::verify) {
        // K draft tokens of one sequence: the layers a prefill chunk of K rows after the cache of
        // `context` tokens (each row attends to the cache and the rows before it), the head on
        // every row.
        sh.seqs = 1;
        sh.prefill = s.name != "post";
        sh.prior = context;
        sh.context = context + rows;
      }
      // verify: the layers take the prefill figures at K rows, the head the decode ones at K
      const EvidenceKey key{sh.prefill, rows};
      add_scope_cost(sum, plan, s, sh, basis, fit_basis, target.rules, target.chain.leaf(), target.device->units, key, groups);
    }
    ce.gaps = plan.gap_groups;
    ce.digest = plan.digest;
    ce.allreduce_s = allreduce_seconds(model, basis, rows, tp);
    ce.gather_s = gather_seconds(model, basis, rows, tp);
    if (plan_out) *plan_out = plan;
  } else {
    const auto chunks = prefill_chunks(rows, target.chain.leaf().defaults.prefill_buckets);
    std::map<std::int64_t, planner::Plan> plans;
    for (auto c : chunks) {
      if (!plans.count(c)) plans.emplace(c, make_plan(lib, target, model, planner::Mode::prefill, c));
    }
    std::int64_t prior = 0;
    for (std::size_t i = 0; i < chunks.size(); ++i) {
      const planner::Plan& plan = plans.at(chunks[i]);
      std::int64_t head_rows = 0;  // the plan's head scope's rows
      for (const auto& s : plan.scopes) {
        StepShape sh = shape;
        if (s.name == "post") {
          // Every launch runs its program's head, on the rows of the prompts a packed launch can
          // finish (the plan's head scope: planner::prefill_head_rows), whether a prompt ends in
          // this chunk or not: a long prompt's earlier chunks read the head's weights too.
          head_rows = s.rows;
          sh.rows = s.rows;
          sh.seqs = 1;
          sh.context = prior + chunks[i];
        } else {
          sh.rows = chunks[i];
          sh.seqs = 1;
          sh.prefill = true;
          sh.prior = prior;
        }
        add_scope_cost(sum, plan, s, sh, basis, fit_basis, target.rules, target.chain.leaf(), target.device->units,
                       EvidenceKey{true, chunks[i]}, i == 0 ? groups : nullptr);
      }
      ce.allreduce_s += allreduce_seconds(model, basis, chunks[i], tp);
      ce.gather_s += gather_seconds(model, basis, head_rows, tp);  // the head's logits, every launch
      prior += chunks[i];
    }
    const planner::Plan& first = plans.at(chunks.front());
    ce.gaps = first.gap_groups;
    ce.digest = first.digest;
    if (plan_out) *plan_out = first;
  }
  ce.ceiling_s = sum.ceiling + ce.allreduce_s + ce.gather_s;
  ce.prediction_s = sum.prediction + ce.allreduce_s + ce.gather_s;
  ce.evidence.assign(sum.evidence.begin(), sum.evidence.end());
  ce.prediction_basis = sum.measured ? "measured: " + join(ce.evidence, ", ") : "unmeasured";
  ce.weight_bytes = sum.weight;
  ce.kv_bytes = sum.kv;
  ce.other_bytes = sum.other;
  ce.flops = sum.flops;
  ce.gap_s = sum.gap;
  ce.memory_bound_share = sum.ceiling > 0 ? sum.memory_bound / sum.ceiling : 0;
  ce.tokens_per_s = ce.ceiling_s > 0 ? static_cast<double>(rows) / ce.ceiling_s : 0;
  ce.predicted_tokens_per_s = ce.prediction_s > 0 ? static_cast<double>(rows) / ce.prediction_s : 0;
  if (groups) {
    const double total = ce.prediction_s > 0 ? ce.prediction_s : 1;
    for (auto& g : *groups) g.share = g.step_seconds / total;
  }
  return ce;
}

MemoryFit memory_fit(const planner::Library& lib, const device::Device& d, const avail::ClassInfo& cls,
                     const model::ModelGraph& m, std::int64_t seqs, std::int64_t context, int tp) {
  (void)lib;
  MemoryFit f;
  f.tp = tp;
  f.seqs = seqs;
  f.context = context;
  const double a = format_bytes(m.activation);
  const double kvb = format_bytes(m.kv);
  double widest = param(m, "hidden");
  double kv_per_seq = 0, state_per_seq = 0;
  auto weights_of = [&](const model::Node& n, double count, const std::vector<model::Node>& layer) {
    const model::OpInfo* op = model::find_op(n.op);
    if (!op || tied_head(m, n)) return;
    const double elems = model::weight_elems(n);
    const double bytes = elems * (n.weight_format ? format_bytes(*n.weight_format) : a);
    const double share = n.op == "linear" && n.role == "qkv" ? qkv_rank_share(layer, n, tp) : 1.0 / tp;
    f.weights += count * (sharded(n) ? bytes * share : bytes);
  };
  for (const auto& n : m.pre) weights_of(n, 1, m.pre);
  for (const auto& n : m.post) weights_of(n, 1, m.post);
  // The longest launch a sequence's prefill writes at once: the class's largest bucket.
  const auto& buckets = cls.defaults.prefill_buckets;
  const std::int64_t chunk = buckets.empty() ? 1 : *std::max_element(buckets.begin(), buckets.end());
  // A sliding-window layer keeps its keys in a ring where the class's bodies read one and that is
  // smaller, as the emit allocates it (model/kv_ring.hpp); elsewhere a full-length cache.
  const std::int64_t ring = cls.defaults.kv_ring ? model::model_kv_ring(m, chunk, context) : 0;
  for (const auto& k : m.kinds) {
    const double count = static_cast<double>(k.layers.size());
    const double tokens = static_cast<double>(model::kind_window(k) > 0 ? model::kv_rows_per_seq(ring, context) : context);
    for (const auto& n : k.nodes) {
      weights_of(n, count, k.nodes);
      double kv = model::kv_elems_per_token(n) * kvb;
      if (n.op == "kv_append" && n.params.count("kv_heads") && n.params.at("kv_heads") > 0)  // a rank's KV heads
        kv *= rank_kv_heads(n.params.at("kv_heads"), tp) / n.params.at("kv_heads");
      kv_per_seq += count * kv * tokens;
      const double st = model::state_elems_per_seq(n);
      state_per_seq += count * st * (n.op == "conv1d" ? a : kStateBytes) / tp;
      for (const char* key : {"out", "dim"}) {
        auto it = n.params.find(key);
        if (it != n.params.end()) widest = std::max(widest, it->second / (n.op == "linear" ? tp : 1));
      }
      // The routed experts' buffers: moe.h holds top_k * inter per row, and the grouped down
      // projection's moe.acc holds hidden fp32 sums per row (two activation widths); a class that
      // sorts the slots first holds their rows and their projections, top_k * hidden a row each.
      if (n.op == "moe_gate_up" || n.op == "moe_down")
        widest = std::max({widest, node_param(n, "top_k") * node_param(n, "inter"), 2 * node_param(n, "hidden"),
                           cls.moe_gemm_sorted ? node_param(n, "top_k") * node_param(n, "hidden") : 0.0});
    }
  }
  f.kv = kv_per_seq * static_cast<double>(seqs);
  f.state = state_per_seq * static_cast<double>(seqs);
  f.activations = cls.defaults.workspace_mib * kMiB + kActivationBuffers * static_cast<double>(chunk) * widest * a +
                  static_cast<double>(seqs) * param(m, "vocab") * kLogitBytes;
  f.reserve = cls.defaults.runtime_reserve_gib * kGiB;
  f.total = f.weights + f.kv + f.state + f.activations + f.reserve;
  f.usable = d.visible_gib * kGiB * d.usable_fraction;
  f.fits = f.total <= f.usable;
  const double per_seq = kv_per_seq + state_per_seq;
  const double room = f.usable - f.weights - f.activations - f.reserve;
  f.max_seqs = per_seq > 0 && room > 0 ? static_cast<std::int64_t>(std::floor(room / per_seq)) : 0;
  return f;
}

Expected<Analysis> analyze(const planner::Library& lib, const planner::Target& target, const model::ModelGraph& model,
                           const Options& options) {
  Analysis an;
  an.model = &model;
  an.device = target.device;
  an.chain = target.chain.ids();
  an.options = options;
  an.context = options.context > 0 ? options.context : model.default_context;
  an.basis = make_basis(*target.device, options.basis);
  const int tp = options.tp;
  if (tp > 1 && target.device->interconnect.gbs <= 0) {
    return fail(fmt::format("device '{}' has no interconnect: tensor parallelism {} is not possible", target.device->id, tp));
  }

  an.requested = estimate_case(lib, target, model, an.basis, options.mode, options.rows, an.context, tp, &an.groups, &an.plan);

  std::map<std::tuple<std::string, std::string, std::string>, PortRow> ports;
  std::set<std::tuple<std::string, std::string, std::string>> tc_seen;
  auto collect = [&](const planner::Plan& plan, const std::string& label) {
    for (const auto& p : plan.ports) {
      auto key = std::make_tuple(p.kernel, p.rule, p.op);
      auto it = ports.find(key);
      if (it == ports.end()) it = ports.emplace(key, PortRow{p, {}}).first;
      it->second.item.nodes = std::max(it->second.item.nodes, p.nodes);
      if (std::find(it->second.modes.begin(), it->second.modes.end(), label) == it->second.modes.end()) it->second.modes.push_back(label);
    }
    for (const auto& f : plan.tc_audit) {
      if (tc_seen.insert(std::make_tuple(f.scope, f.group, f.op)).second) an.tc_audit.push_back(f);
    }
  };
  collect(an.plan, fmt::format("{} {}", planner::mode_name(options.mode), options.rows));

  for (auto c : options.decode_c) {
    planner::Plan plan;
    const auto mode = c == 1 ? planner::Mode::decode : planner::Mode::batch;
    an.decode.push_back(estimate_case(lib, target, model, an.basis, mode, c, an.context, tp, nullptr, &plan));
    collect(plan, fmt::format("{} {}", planner::mode_name(mode), c));
  }
  for (auto T : options.prefill_t) {
    planner::Plan plan;
    an.prefill.push_back(estimate_case(lib, target, model, an.basis, planner::Mode::prefill, T, an.context, tp, nullptr, &plan));
    collect(plan, fmt::format("prefill {}", T));
  }
  if (target.device->interconnect.gbs > 0) {
    for (int t : options.tps) {
      an.tp.push_back(estimate_case(lib, target, model, an.basis, options.mode, options.rows, an.context, t));
    }
  }
  for (auto& [key, row] : ports) an.ports.push_back(row);
  std::stable_sort(an.ports.begin(), an.ports.end(), [](const PortRow& a, const PortRow& b) {
    if (a.item.nodes != b.item.nodes) return a.item.nodes > b.item.nodes;
    if (a.item.kernel != b.item.kernel) return a.item.kernel < b.item.kernel;
    return a.item.op < b.item.op;
  });

  // Gaps of the requested case, and the groups that run a kernel off the tensor-core policy or
  // without a measured efficiency in a measured prediction, ranked by their share of the step.
  const bool prediction_measured = an.requested.prediction_basis != "unmeasured";
  for (const auto& g : an.groups) {
    GapRow r;
    r.scope = g.scope;
    r.op = g.nodes;
    r.count = g.count;
    r.step_seconds = g.step_seconds;
    r.share = g.share;
    if (g.group != "gap") {
      r.kernel = g.kernels;
      for (const auto& f : an.plan.tc_audit) {
        if (f.scope == g.scope && f.group == g.group && r.klass.empty()) {
          r.klass = "tensor-core policy";
          r.why = f.message;
        }
      }
      if (r.klass.empty() && prediction_measured && !g.measured) {
        r.klass = "unmeasured";
        r.why =
            fmt::format("family '{}' has no measured efficiency on class '{}': its time is the ceiling", g.family, an.plan.klass);
      }
      if (!r.klass.empty()) an.gaps.push_back(std::move(r));
      continue;
    }
    for (const auto& s : an.plan.scopes) {
      if (s.name != g.scope) continue;
      for (const auto& grp : s.groups) {
        if (!grp.gap || node_label(s.nodes[static_cast<std::size_t>(grp.nodes.front())]) != g.nodes) continue;
        if (!grp.blocked.empty()) {
          r.why = grp.blocked.front().why;
          r.kernel = join(grp.blocked.front().kernels, "+");
          const bool format_only = std::all_of(grp.blocked.begin(), grp.blocked.end(), [](const planner::Blocked& b) { return b.format; });
          r.klass = format_only ? "no format path" : "no kernel";
        } else {
          r.why = fmt::format("no rule of class chain {} covers this op in mode {} at {} rows", join(an.chain, ">"),
                              planner::mode_name(s.mode), s.rows);
          r.klass = "no kernel";
        }
      }
    }
    an.gaps.push_back(std::move(r));
  }
  std::stable_sort(an.gaps.begin(), an.gaps.end(), [](const GapRow& a, const GapRow& b) {
    if (a.share != b.share) return a.share > b.share;
    if (a.scope != b.scope) return a.scope < b.scope;
    return a.op < b.op;
  });

  // Format paths: each weighted matrix node at decode (C = 1) and at the largest prefill bucket.
  {
    planner::Plan dec, pre;
    estimate_case(lib, target, model, an.basis, planner::Mode::decode, 1, an.context, 1, nullptr, &dec);
    const auto& buckets = target.chain.leaf().defaults.prefill_buckets;
    const std::int64_t bucket = buckets.empty() ? 512 : *std::max_element(buckets.begin(), buckets.end());
    estimate_case(lib, target, model, an.basis, planner::Mode::prefill, bucket, an.context, 1, nullptr, &pre);
    // The node's group in a plan: its exec text, the exec itself and the rule ("" for a gap).
    auto exec_of = [](const planner::Plan& plan, const std::string& scope, std::size_t node, std::optional<planner::Exec>& exec,
                      std::string& rule) -> std::string {
      for (const auto& s : plan.scopes) {
        if (s.name != scope) continue;
        for (const auto& g : s.groups) {
          if (std::find(g.nodes.begin(), g.nodes.end(), static_cast<int>(node)) == g.nodes.end()) continue;
          exec = g.exec;
          rule = g.rule;
          if (g.gap) return g.exec ? fmt::format("{} {}", g.exec->path, g.exec->how) : "no kernel";
          if (!g.exec) return g.rule;
          std::string text = fmt::format("{} {} ({}, {}", g.exec->path, g.exec->how, g.exec->math, g.rule);
          if (g.exec->quantizes_act()) text += "; " + quantized_note(*g.exec);
          return text + ")";
        }
      }
      return "";
    };
    for (const auto& s : dec.scopes) {
      for (std::size_t i = 0; i < s.nodes.size(); ++i) {
        const auto& n = s.nodes[i];
        if (!planner::is_matrix_op(n.op) || !n.weight_format) continue;
        FormatRow r;
        r.node = s.name + " " + node_label(n);
        r.weight = std::string(format_name(*n.weight_format));
        r.act = std::string(format_name(n.act_format.value_or(model.activation)));
        r.source = n.format_source;
        r.decode = exec_of(dec, s.name, i, r.decode_exec, r.decode_rule);
        r.prefill = exec_of(pre, s.name, i, r.prefill_exec, r.prefill_rule);
        an.formats.push_back(std::move(r));
      }
    }
  }

  // Key figures, recomputed from the graph (not from a plan).
  const double a = format_bytes(model.activation);
  auto weigh = [&](const model::Node& n, double count) {
    if (tied_head(model, n)) return;
    const double elems = model::weight_elems(n);
    an.key.parameters += count * elems;
    an.key.weight_bytes += count * elems * (n.weight_format ? format_bytes(*n.weight_format) : a);
  };
  for (const auto& n : model.pre) weigh(n, 1);
  for (const auto& n : model.post) weigh(n, 1);
  for (const auto& k : model.kinds) {
    for (const auto& n : k.nodes) {
      weigh(n, static_cast<double>(k.layers.size()));
      an.key.kv_bytes_per_token += static_cast<double>(k.layers.size()) * model::kv_elems_per_token(n) * format_bytes(model.kv);
      an.key.state_bytes_per_seq +=
          static_cast<double>(k.layers.size()) * model::state_elems_per_seq(n) * (n.op == "conv1d" ? a : kStateBytes);
    }
  }
  if (!an.decode.empty() && an.decode.front().rows == 1) an.key.decode_weight_bytes_read = an.decode.front().weight_bytes;
  const double per_token = options.mode == planner::Mode::prefill
                               ? an.requested.prediction_s / static_cast<double>(options.rows)
                               : an.requested.prediction_s / static_cast<double>(options.rows);
  an.key.energy_j_per_token = target.device->tdp_w * per_token;

  const auto& cls = target.chain.leaf();
  const bool one_sequence = options.mode == planner::Mode::prefill || options.mode == planner::Mode::verify;
  const std::int64_t seqs = one_sequence ? 1 : options.rows;
  an.fit = memory_fit(lib, *target.device, cls, model, seqs, an.context, tp);
  if (!an.fit.fits) {
    if (target.device->interconnect.gbs > 0) {
      for (int t : {2, 4, 8}) {
        if (t <= tp) continue;
        if (memory_fit(lib, *target.device, cls, model, seqs, an.context, t).fits) {
          an.fit.smallest_tp = t;
          break;
        }
      }
    }
    if (!an.fit.smallest_tp) {
      for (const auto& d : lib.registry.devices) {
        auto c = lib.classes.find(d.klass);
        if (c == lib.classes.end() || d.id == target.device->id) continue;
        if (memory_fit(lib, d, c->second, model, seqs, an.context, 1).fits) an.fit.devices_that_fit.push_back(d.id);
      }
    }
  }
  an.notes = model.notes;
  return an;
}

}  // namespace met::estimate
