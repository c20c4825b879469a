// The writer and the reader of build.json (schema met-build/1). The reader takes the fields the
// interpreter checks (target, shapes, ABI hash, checkpoint) and the rope a generated table is
// computed from; a build.json without "rope" has a plain rope.
#include "emit/build_info.hpp"

#include <nlohmann/json.hpp>

#include "emit/packet.hpp"
#include "model/kv_ring.hpp"

#ifndef MET_VERSION_STRING
#define MET_VERSION_STRING "0.0.0"
#endif

namespace met::emit {

namespace detail {

std::string write_build_json(const BuildRecord& r) {
  nlohmann::json programs = nlohmann::json::array();
  for (const auto& info : *r.programs)
    programs.push_back(
        {{"name", info.name}, {"mode", info.mode}, {"rows", info.rows}, {"digest", info.digest}, {"groups", info.groups}});
  const EmitOptions& options = *r.options;
  const Config& cfg = r.cfg;
  nlohmann::json j;
  j["schema"] = "met-build/1";
  j["met_version"] = MET_VERSION_STRING;
  j["git_commit"] = options.git_commit;
  j["gpu_interpreters"] = options.gpu_interpreters;
  j["flags"] = options.flags;
  j["target"] = {{"class", r.target_class}, {"device", r.device}, {"sm_count", r.sm_count}};
  j["tp"] = options.tp;  // tensor-parallel ranks: model.pkt is rank 0, model.rank<r>.pkt the others
  j["abi"] = {{"version", MET_PACKET_VERSION}, {"hash", abi_hash()}};
  j["checkpoint"] = options.checkpoint;
  j["network"] = options.network;
  j["model"] = r.model;
  j["max_ctx"] = r.max_ctx;
  j["max_seqs"] = r.max_seqs;
  j["pad_slots"] = r.pad_slots;
  if (r.kv_ring > 0) j["kv_ring"] = r.kv_ring;  // the sliding-window layers' rings (emit.hpp)
  j["decode_rungs"] = r.decode_rungs;
  j["prefill_buckets"] = r.prefill_buckets;
  j["attn_splits"] = r.attn_splits;
  j["rms_norm_eps"] = cfg.eps;
  j["rope_theta"] = cfg.theta;
  j["rope"] = {{"theta", cfg.rope.theta}, {"type", cfg.rope.type}};
  if (cfg.rope.type != "default") j["rope"]["factor"] = cfg.rope.factor;
  if (cfg.rope.type == "proportional") j["rope"]["partial_rotary_factor"] = cfg.rope.partial_rotary_factor;
  if (cfg.rope.type == "yarn") {  // the final factor and attention factor, so no re-derivation is needed
    j["rope"]["beta_fast"] = cfg.rope.beta_fast;
    j["rope"]["beta_slow"] = cfg.rope.beta_slow;
    j["rope"]["truncate"] = cfg.rope.truncate;
    j["rope"]["attention_factor"] = cfg.rope.attention_factor;
    if (cfg.rope.original_max_position_embeddings > 0)
      j["rope"]["original_max_position_embeddings"] = cfg.rope.original_max_position_embeddings;
  }
  if (cfg.rope.type == "llama3") {
    j["rope"]["low_freq_factor"] = cfg.rope.low_freq_factor;
    j["rope"]["high_freq_factor"] = cfg.rope.high_freq_factor;
    j["rope"]["original_max_position_embeddings"] = cfg.rope.original_max_position_embeddings;
  }
  j["programs"] = programs;
  return j.dump(2) + "\n";
}

}  // namespace detail

Expected<BuildInfo> parse_build_json(const std::string& text, const std::string& display) {
  const auto j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) return fail(display + ": not a json object");
  if (j.value("schema", "") != "met-build/1") return fail(display + ": schema is not 'met-build/1'");
  BuildInfo b;
  try {
    b.target_class = j.at("target").at("class").get<std::string>();
    b.device = j.at("target").at("device").get<std::string>();
    b.sm_count = j.at("target").at("sm_count").get<std::uint32_t>();
    b.max_ctx = j.at("max_ctx").get<std::int64_t>();
    b.max_seqs = j.at("max_seqs").get<std::int64_t>();
    b.pad_slots = j.at("pad_slots").get<std::int64_t>();
    b.kv_ring = j.contains("kv_ring") ? j.at("kv_ring").get<std::int64_t>() : 0;
    b.abi_hash = j.at("abi").at("hash").get<std::uint32_t>();
    b.checkpoint = j.at("checkpoint").get<std::string>();
    b.tp = j.contains("tp") ? j.at("tp").get<int>() : 1;  // emits from before --tp are rank 0 of 1
  } catch (const nlohmann::json::exception& e) {
    return fail(display + ": " + e.what());
  }
  if (b.tp < 1 || b.tp > static_cast<int>(kMaxTpRanks)) return fail(display + ": tp " + std::to_string(b.tp) + " is not 1 to 8");
  if (b.kv_ring < 0 || b.kv_ring % model::kKvRingAlign != 0 || (b.kv_ring > 0 && b.kv_ring + 1 >= b.max_ctx))
    return fail(display + ": kv_ring " + std::to_string(b.kv_ring) + " is not 0 or a multiple of " +
                std::to_string(model::kKvRingAlign) + " below max_ctx - 1 (" + std::to_string(b.max_ctx - 1) + ")");
  if (j.contains("programs")) {
    const auto& ps = j["programs"];
    if (!ps.is_array()) return fail(display + ": programs: not an array");
    for (const auto& p : ps) {
      if (!p.is_object() || !p.contains("name") || !p["name"].is_string() || !p.contains("digest") || !p["digest"].is_string())
        return fail(display + ": programs: each entry needs a string name and digest");
      b.program_digests[p["name"].get<std::string>()] = p["digest"].get<std::string>();
    }
  }
  // "rope" is written by every emit that can carry a generated table; without it the rope is plain.
  if (j.contains("rope")) {
    nlohmann::json cfg = nlohmann::json::object();
    const auto& r = j["rope"];
    if (!r.is_object()) return fail(display + ": rope: not an object");
    if (r.contains("theta")) cfg["rope_theta"] = r["theta"];
    nlohmann::json scaling = r;
    scaling.erase("theta");
    if (scaling.contains("type")) {
      scaling["rope_type"] = scaling["type"];
      scaling.erase("type");
    }
    cfg["rope_scaling"] = scaling;
    MET_TRY(b.rope, parse_rope(cfg.dump(), display + ": rope"));
  }
  return b;
}

}  // namespace met::emit
