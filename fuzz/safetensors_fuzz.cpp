// Fuzzes the safetensors header reader with whole files (length prefix, header, data). Any input
// may be refused; none may crash, read out of bounds or allocate without bound.
#include <cstddef>
#include <cstdint>
#include <string>

#include "model/safetensors.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  met::model::MemCheckpoint src("fuzz", {{"model.safetensors", std::string(reinterpret_cast<const char*>(data), size)}});
  auto h = met::model::read_safetensors_header(src, "model.safetensors");
  (void)h;
  return 0;
}
