// Reads an assets directory; every error names the file it comes from.
#include "interp/assets.hpp"

#include <filesystem>
#include <fstream>
#include <sstream>

namespace met::interp {
namespace {

Expected<std::string> slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return fail(path + ": cannot open");
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

}  // namespace

std::string rank_packet_name(int rank) { return "model.rank" + std::to_string(rank) + ".pkt"; }

Expected<Assets> load_assets(const std::string& dir) {
  Assets a;
  a.dir = dir;
  const std::string pkt = dir + "/model.pkt", build = dir + "/build.json", weights = dir + "/weights.json";
  MET_TRY(std::string bytes, slurp(pkt));
  MET_TRY(a.packet, emit::parse_packet(bytes, pkt));
  MET_TRY(a.build_json, slurp(build));
  MET_TRY(a.build, emit::parse_build_json(a.build_json, build));
  if (a.build.target_class != a.packet.target_class || a.build.sm_count != a.packet.sm_count)
    return fail(build + ": says class '" + a.build.target_class + "' with " + std::to_string(a.build.sm_count) +
                " streams but model.pkt holds class '" + a.packet.target_class + "' with " +
                std::to_string(a.packet.sm_count));
  if (a.build.abi_hash != emit::abi_hash())
    return fail(build + ": emitted with packet abi hash " + std::to_string(a.build.abi_hash) + ", this met reads " +
                std::to_string(emit::abi_hash()));
  if (a.packet.tp_ranks != static_cast<std::uint32_t>(a.build.tp) || a.packet.tp_rank != 0)
    return fail(pkt + ": holds rank " + std::to_string(a.packet.tp_rank) + " of " + std::to_string(a.packet.tp_ranks) +
                " but build.json says rank 0 of tp " + std::to_string(a.build.tp));
  for (int r = 1; r < a.build.tp; ++r) {
    const std::string path = dir + "/" + rank_packet_name(r);
    MET_TRY(std::string rb, slurp(path));
    MET_TRY(emit::PacketFile p, emit::parse_packet(rb, path));
    if (p.tp_ranks != a.packet.tp_ranks || p.tp_rank != static_cast<std::uint32_t>(r) || p.target_class != a.packet.target_class ||
        p.sm_count != a.packet.sm_count || p.programs.size() != a.packet.programs.size())
      return fail(path + ": is not rank " + std::to_string(r) + " of this emit (rank " + std::to_string(p.tp_rank) + " of " +
                  std::to_string(p.tp_ranks) + ", class '" + p.target_class + "', " + std::to_string(p.programs.size()) +
                  " programs)");
    a.other_ranks.push_back(std::move(p));
  }
  MET_TRY(std::string wtext, slurp(weights));
  MET_TRY(a.weights, emit::parse_weights_manifest(wtext, weights));
  std::error_code ec;
  const std::string link = dir + "/checkpoint";
  a.checkpoint_dir = std::filesystem::exists(link, ec) ? link : a.build.checkpoint;
  return a;
}

}  // namespace met::interp
