// Assets on disk (model.pkt, build.json, weights.json, the checkpoint link) loaded and cross-checked:
// the packet parses and validates, its class and SM count agree with build.json, and the manifest
// parses. Whether a backend may run them is the backend's check (cpu_backend.hpp).
#pragma once

#include <string>
#include <vector>

#include "core/expected.hpp"
#include "emit/emit.hpp"
#include "emit/packet.hpp"
#include "emit/weights_manifest.hpp"

namespace met::interp {

struct Assets {
  std::string dir;                 // as the user named it
  emit::PacketFile packet;                    // rank 0 (the only rank of an emit without --tp)
  std::vector<emit::PacketFile> other_ranks;  // build.json "tp" > 1: ranks 1 .. tp-1 (model.rank<r>.pkt)
  emit::BuildInfo build;
  std::string build_json;
  emit::WeightsManifest weights;
  std::string checkpoint_dir;      // dir/checkpoint when that link exists, else build.json's checkpoint
};

// The file of tensor-parallel rank r >= 1 in an assets directory ("model.rank1.pkt").
std::string rank_packet_name(int rank);

// Every rank's packet is read and must say it is that rank of build.json's tp ranks.
Expected<Assets> load_assets(const std::string& dir);

}  // namespace met::interp
