// The JSON report (schema met-report/1): full-precision numbers with their basis; the record
// tools read and the golden check compares. Keys are sorted (nlohmann::json objects are ordered
// maps), so the bytes are deterministic.
#include <nlohmann/json.hpp>

#include "report/render.hpp"

namespace met::report {
namespace {

using nlohmann::json;

json figure(const estimate::Figure& f) { return {{"value", f.value}, {"source", f.source}, {"cite", f.cite}}; }

json case_json(const estimate::CaseEstimate& c) {
  json j = {{"mode", c.mode},
          {"rows", c.rows},
          {"context", c.context},
          {"tp", c.tp},
          {"ceiling_s", c.ceiling_s},
          {"prediction_s", c.prediction_s},
          {"prediction_basis", c.prediction_basis},
          {"weight_bytes", c.weight_bytes},
          {"kv_bytes", c.kv_bytes},
          {"other_bytes", c.other_bytes},
          {"flops", c.flops},
          {"allreduce_s", c.allreduce_s},
          {"gather_s", c.gather_s},
          {"gap_s", c.gap_s},
          {"tokens_per_s", c.tokens_per_s},
          {"predicted_tokens_per_s", c.predicted_tokens_per_s},
          {"memory_bound_share", c.memory_bound_share},
          {"gap_groups", c.gaps},
          {"plan_digest", c.digest}};
  if (c.measured_s > 0) {  // a campaign measured this case (--measured)
    j["measured_s"] = c.measured_s;
    j["measured_source"] = c.measured_source;
  }
  return j;
}

// A path field by field: what the kernel reads, what the math consumes, whether the kernel
// quantises activations on the fly.
json exec_json(const planner::Exec& e) {
  return {{"path", e.path}, {"weight", e.weight}, {"act", e.act}, {"act_math", e.act_math}, {"quantizes_act", e.quantizes_act()},
          {"how", e.how},   {"math", e.math}};
}

}  // namespace

std::string render_json(const estimate::Analysis& an, const Provenance& prov) {
  const auto& m = *an.model;
  const auto& d = *an.device;
  json j;
  j["schema"] = kJsonSchema;
  j["generated_by"] = prov.command;
  j["model"] = {{"id", m.id}, {"circuit", m.circuit}, {"architecture", m.architecture}, {"formats", m.formats_basis},
                {"activation", std::string(format_name(m.activation))}, {"kv", std::string(format_name(m.kv))}, {"params", m.params}};
  j["device"] = {{"id", d.id}, {"name", d.name}, {"class", an.plan.klass}, {"chain", an.chain}};
  j["case"] = {{"mode", std::string(planner::mode_name(an.options.mode))}, {"rows", an.options.rows}, {"context", an.context}, {"tp", an.options.tp}};
  json peaks = json::object();
  for (const auto& [k, f] : an.basis.peaks) peaks[k] = figure(f);
  j["basis"] = {{"choice", std::string(estimate::basis_name(an.basis.choice))},
                {"bandwidth_bytes_per_s", figure(an.basis.bandwidth)},
                {"peaks_flops_per_s", peaks},
                {"interconnect_bytes_per_s", figure(an.basis.interconnect)}};
  j["plan"] = {{"digest", an.plan.digest}, {"gap_groups", an.plan.gap_groups}};
  json groups = json::array();
  for (const auto& g : an.groups) {
    json row = {{"scope", g.scope},
                {"layers", g.count},
                {"group", g.group},
                {"nodes", g.nodes},
                {"kernels", g.kernels},
                {"unit", g.unit},
                {"exec", g.exec},
                {"weight_bytes", g.cost.weight_bytes},
                {"kv_bytes", g.cost.kv_bytes},
                {"other_bytes", g.cost.other_bytes},
                {"flops", g.cost.flops},
                {"seconds_per_layer", g.cost.seconds},
                {"fit_seconds_per_layer", g.fit_seconds},
                {"bound", g.cost.bound},
                {"peak", g.cost.peak_key},
                {"step_seconds", g.step_seconds},
                {"share", g.share}};
    if (g.exec_detail) row["exec_path"] = exec_json(*g.exec_detail);  // groups with a weighted matrix node
    groups.push_back(std::move(row));
  }
  j["groups"] = groups;
  j["requested"] = case_json(an.requested);
  json dec = json::array(), pre = json::array(), tp = json::array();
  for (const auto& c : an.decode) dec.push_back(case_json(c));
  for (const auto& c : an.prefill) pre.push_back(case_json(c));
  for (const auto& c : an.tp) tp.push_back(case_json(c));
  j["decode"] = dec;
  j["prefill"] = pre;
  j["tensor_parallel"] = tp;
  json gaps = json::array();
  for (const auto& g : an.gaps) {
    gaps.push_back({{"scope", g.scope}, {"op", g.op}, {"layers", g.count}, {"step_seconds", g.step_seconds}, {"share", g.share},
                    {"class", g.klass}, {"why", g.why}, {"kernel", g.kernel}});
  }
  j["gaps"] = gaps;
  json ports = json::array();
  for (const auto& p : an.ports) {
    ports.push_back({{"kernel", p.item.kernel}, {"rule", p.item.rule}, {"op", p.item.op}, {"nodes", p.item.nodes}, {"why", p.item.why},
                     {"needs", p.item.needs}, {"cases", p.modes}});
  }
  j["ports"] = ports;
  json formats = json::array();
  for (const auto& f : an.formats) {
    json row = {{"node", f.node},     {"weight", f.weight},   {"activations", f.act},         {"declared_by", f.source},
                {"decode", f.decode}, {"prefill", f.prefill}, {"decode_rule", f.decode_rule}, {"prefill_rule", f.prefill_rule}};
    if (f.decode_exec) row["decode_exec"] = exec_json(*f.decode_exec);
    if (f.prefill_exec) row["prefill_exec"] = exec_json(*f.prefill_exec);
    formats.push_back(std::move(row));
  }
  j["formats"] = formats;
  json tc = json::array();
  for (const auto& f : an.tc_audit) {
    tc.push_back({{"scope", f.scope}, {"group", f.group}, {"op", f.op}, {"unit", f.unit}, {"rows", f.rows}, {"message", f.message}});
  }
  j["tensor_core_audit"] = tc;
  const auto& f = an.fit;
  j["memory"] = {{"tp", f.tp}, {"sequences", f.seqs}, {"context", f.context}, {"weights", f.weights}, {"kv", f.kv}, {"state", f.state},
                 {"activations", f.activations}, {"reserve", f.reserve}, {"total", f.total}, {"usable", f.usable}, {"fits", f.fits},
                 {"smallest_tp", f.smallest_tp ? json(*f.smallest_tp) : json(nullptr)}, {"devices_that_fit", f.devices_that_fit},
                 {"max_sequences", f.max_seqs}};
  j["key"] = {{"weight_bytes", an.key.weight_bytes}, {"parameters", an.key.parameters}, {"kv_bytes_per_token", an.key.kv_bytes_per_token},
              {"state_bytes_per_sequence", an.key.state_bytes_per_seq}, {"decode_weight_bytes_read", an.key.decode_weight_bytes_read},
              {"energy_j_per_token_tdp_estimate", an.key.energy_j_per_token}};
  j["notes"] = an.notes;
  return j.dump(1) + "\n";
}

}  // namespace met::report
