// Safetensors header writer. Tensor order is the caller's (the data order); the JSON keeps it so
// a reader sees offsets ascending.
#include "model/safetensors_writer.hpp"

#include <fmt/format.h>

#include <nlohmann/json.hpp>
#include <set>

#include "model/safetensors.hpp"

namespace met::model {

Expected<HeaderLayout> write_safetensors_header(const std::vector<HeaderTensor>& tensors,
                                                const std::map<std::string, std::string>& metadata) {
  nlohmann::ordered_json h = nlohmann::ordered_json::object();
  if (!metadata.empty()) {
    nlohmann::ordered_json meta = nlohmann::ordered_json::object();
    for (const auto& [k, v] : metadata) meta[k] = v;
    h["__metadata__"] = std::move(meta);
  }
  HeaderLayout out;
  std::set<std::string> seen;
  std::uint64_t off = 0;
  for (const auto& t : tensors) {
    if (t.name == "__metadata__") return fail("safetensors header: tensor name '__metadata__' is reserved");
    if (!seen.insert(t.name).second) return fail(fmt::format("safetensors header: duplicate tensor '{}'", t.name));
    const auto bits = dtype_bits(t.dtype);
    if (!bits) return fail(fmt::format("safetensors header: tensor '{}': unknown dtype '{}'", t.name, t.dtype));
    std::uint64_t n = 1;
    for (auto d : t.shape) n *= d;
    const std::uint64_t total_bits = n * static_cast<std::uint64_t>(*bits);
    if (total_bits % 8 != 0) {
      return fail(fmt::format("safetensors header: tensor '{}': {} elements of {} bits do not fill whole bytes", t.name,
                              n, *bits));
    }
    out.begin.push_back(off);
    off += total_bits / 8;
    out.end.push_back(off);
    h[t.name] = {{"dtype", t.dtype}, {"shape", t.shape}, {"data_offsets", {out.begin.back(), off}}};
  }
  out.data_bytes = off;
  std::string text = h.dump();
  while ((kHeaderLengthBytes + text.size()) % kHeaderAlign != 0) text.push_back(' ');
  const std::uint64_t len = text.size();
  out.bytes.resize(kHeaderLengthBytes);
  for (std::size_t k = 0; k < kHeaderLengthBytes; ++k) out.bytes[k] = static_cast<char>((len >> (8 * k)) & 0xffu);
  out.bytes += text;
  return out;
}

}  // namespace met::model
