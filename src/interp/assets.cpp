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
  MET_TRY(std::string wtext, slurp(weights));
  MET_TRY(a.weights, emit::parse_weights_manifest(wtext, weights));
  std::error_code ec;
  const std::string link = dir + "/checkpoint";
  a.checkpoint_dir = std::filesystem::exists(link, ec) ? link : a.build.checkpoint;
  return a;
}

}  // namespace met::interp
