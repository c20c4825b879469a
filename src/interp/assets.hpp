// Assets on disk (model.pkt, build.json, weights.json, the checkpoint link) loaded and cross-checked:
// the packet parses and validates, its class and SM count agree with build.json, and the manifest
// parses. Whether a backend may run them is the backend's check (cpu_backend.hpp).
#pragma once

#include <string>

#include "core/expected.hpp"
#include "emit/emit.hpp"
#include "emit/packet.hpp"
#include "emit/weights_manifest.hpp"

namespace met::interp {

struct Assets {
  std::string dir;                 // as the user named it
  emit::PacketFile packet;
  emit::BuildInfo build;
  std::string build_json;
  emit::WeightsManifest weights;
  std::string checkpoint_dir;      // dir/checkpoint when that link exists, else build.json's checkpoint
};

Expected<Assets> load_assets(const std::string& dir);

}  // namespace met::interp
