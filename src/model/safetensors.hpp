// Safetensors headers (8-byte little-endian length, then a JSON object of tensors) and sharded
// checkpoints (model.safetensors.index.json). Reads only headers; validates them as the format
// demands: header inside the file, known dtypes, byte sizes that match shapes, ordered offsets
// in bounds and never overlapping.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/expected.hpp"
#include "model/checkpoint.hpp"

namespace met::model {

struct TensorInfo {
  std::string dtype;                    // "BF16", "F8_E4M3", "U8", ...
  std::vector<std::uint64_t> shape;
  std::uint64_t begin = 0, end = 0;     // data_offsets, relative to the byte after the header
  std::string file;                     // shard holding it
};

struct SafetensorsHeader {
  std::uint64_t header_length = 0;
  std::map<std::string, std::string> metadata;   // __metadata__
  std::map<std::string, TensorInfo> tensors;
};

// A safetensors file opens with its header's length, a little-endian u64.
inline constexpr std::uint64_t kHeaderLengthBytes = 8;
inline constexpr const char* kSingleFile = "model.safetensors";
inline constexpr const char* kIndexFile = "model.safetensors.index.json";

// Bits per element of a safetensors dtype; nullopt when unknown.
std::optional<int> dtype_bits(std::string_view dtype);
std::vector<std::string> dtype_names();

// header: the JSON text; data_size: bytes after the header. display names the file in errors.
Expected<SafetensorsHeader> parse_safetensors_header(std::string_view header, std::uint64_t data_size,
                                                     const std::string& display, const std::string& file);
// Reads the length prefix and the header of one file, never the tensor bytes.
Expected<SafetensorsHeader> read_safetensors_header(const CheckpointSource& src, const std::string& file);
// Every tensor of the checkpoint: model.safetensors, or all shards the index names (each must exist
// and hold the tensors the index places in it). nullopt when the directory holds neither.
Expected<std::optional<std::map<std::string, TensorInfo>>> read_checkpoint_tensors(const CheckpointSource& src);

}  // namespace met::model
