// Safetensors header writer: the 8-byte little-endian length, the JSON header (tensors in data
// order, data_offsets contiguous from 0) and space padding so the data starts 8-byte aligned.
// Pure: returns the header bytes and the layout; the caller streams the tensor data after it.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "core/expected.hpp"

namespace met::model {

struct HeaderTensor {
  std::string name;
  std::string dtype;                    // "BF16", "F8_E4M3", "F32", ...
  std::vector<std::uint64_t> shape;
};

struct HeaderLayout {
  std::string bytes;                    // length prefix + JSON + padding; data begins at bytes.size()
  std::vector<std::uint64_t> begin;     // per tensor, relative to the first data byte
  std::vector<std::uint64_t> end;
  std::uint64_t data_bytes = 0;
};

inline constexpr std::uint64_t kHeaderAlign = 8;

// Errors: an unknown dtype, a duplicate or reserved name ("__metadata__"), a 4/6-bit tensor whose
// element count does not fill whole bytes.
Expected<HeaderLayout> write_safetensors_header(const std::vector<HeaderTensor>& tensors,
                                                const std::map<std::string, std::string>& metadata = {{"format", "pt"}});

}  // namespace met::model
