// Safetensors header validation. The header is capped at kMaxHeader (the limit the reference
// implementation enforces) and every size computation is overflow-checked, so hostile headers
// produce errors, not crashes.
#include "model/json_type.hpp"
#include "model/safetensors.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <limits>
#include <nlohmann/json.hpp>
#include <set>

#include "core/strings.hpp"

namespace met::model {
namespace {

using json = nlohmann::json;
constexpr std::uint64_t kMaxHeader = 100'000'000;

struct DtypeBits {
  std::string_view name;
  int bits;
};
constexpr std::array<DtypeBits, 18> kDtypes{{
    {"BOOL", 8}, {"U8", 8}, {"I8", 8}, {"F8_E4M3", 8}, {"F8_E5M2", 8}, {"F8_E8M0", 8},
    {"I16", 16}, {"U16", 16}, {"F16", 16}, {"BF16", 16}, {"I32", 32}, {"U32", 32},
    {"F32", 32}, {"I64", 64}, {"U64", 64}, {"F64", 64}, {"F4", 4}, {"F6_E2M3", 6},
}};


Expected<json> parse_json(std::string_view text, const std::string& display) {
  try {
    return json::parse(text.begin(), text.end());
  } catch (const json::exception& e) {
    return fail(fmt::format("{}: invalid json: {}", display, e.what()));
  }
}

Expected<std::uint64_t> u64_of(const json& j, const std::string& ctx) {
  if (j.is_number_unsigned()) return j.get<std::uint64_t>();
  if (j.is_number_integer() && j.get<std::int64_t>() >= 0) return static_cast<std::uint64_t>(j.get<std::int64_t>());
  return fail(fmt::format("{}: expected a non-negative integer, found {}", ctx, json_type(j)));
}

std::string bits_text(std::uint64_t elems, int bits) {
  const std::uint64_t total = elems * static_cast<std::uint64_t>(bits);
  return total % 8 == 0 ? std::to_string(total / 8) : fmt::format("{} bits, not whole", total);
}

}  // namespace

std::optional<int> dtype_bits(std::string_view dtype) {
  for (const auto& d : kDtypes) {
    if (d.name == dtype) return d.bits;
  }
  if (dtype == "F6_E3M2") return 6;
  return std::nullopt;
}

std::vector<std::string> dtype_names() {
  std::vector<std::string> out;
  for (const auto& d : kDtypes) out.emplace_back(d.name);
  out.emplace_back("F6_E3M2");
  return out;
}

Expected<SafetensorsHeader> parse_safetensors_header(std::string_view header, std::uint64_t data_size,
                                                     const std::string& display, const std::string& file) {
  SafetensorsHeader h;
  h.header_length = header.size();
  MET_TRY(json root, parse_json(header, display));
  if (!root.is_object()) return fail(fmt::format("{}: header is {}, expected a json object", display, json_type(root)));
  std::vector<std::pair<std::uint64_t, std::uint64_t>> spans;  // (begin, end) of non-empty tensors
  std::map<std::uint64_t, std::string> owner;                  // begin -> tensor (for overlap messages)
  for (const auto& [name, entry] : root.items()) {
    const std::string ctx = fmt::format("{}: tensor '{}'", display, name);
    if (name == "__metadata__") {
      if (!entry.is_object()) return fail(fmt::format("{}: __metadata__ is {}, expected an object", display, json_type(entry)));
      for (const auto& [k, v] : entry.items()) {
        if (!v.is_string()) return fail(fmt::format("{}: __metadata__ '{}' is {}, expected a string", display, k, json_type(v)));
        h.metadata.emplace(k, v.get<std::string>());
      }
      continue;
    }
    if (!entry.is_object()) return fail(fmt::format("{}: is {}, expected an object", ctx, json_type(entry)));
    for (const auto& [k, v] : entry.items()) {
      if (k != "dtype" && k != "shape" && k != "data_offsets") return fail(fmt::format("{}: unknown key '{}'", ctx, k));
    }
    if (!entry.contains("dtype") || !entry.contains("shape") || !entry.contains("data_offsets")) {
      return fail(fmt::format("{}: needs 'dtype', 'shape' and 'data_offsets'", ctx));
    }
    TensorInfo t;
    t.file = file;
    const json& dt = entry["dtype"];
    if (!dt.is_string()) return fail(fmt::format("{}: dtype is {}, expected a string", ctx, json_type(dt)));
    t.dtype = dt.get<std::string>();
    auto bits = dtype_bits(t.dtype);
    if (!bits) return fail(fmt::format("{}: unknown dtype '{}' (known: {})", ctx, t.dtype, join(dtype_names(), ", ")));
    const json& shape = entry["shape"];
    if (!shape.is_array()) return fail(fmt::format("{}: shape is {}, expected an array", ctx, json_type(shape)));
    std::uint64_t elems = 1;
    bool overflow = false;
    for (const auto& d : shape) {
      MET_TRY(std::uint64_t dim, u64_of(d, ctx + " shape"));
      t.shape.push_back(dim);
      if (dim != 0 && elems > std::numeric_limits<std::uint64_t>::max() / dim) overflow = true;
      else elems *= dim;
    }
    const json& off = entry["data_offsets"];
    if (!off.is_array() || off.size() != 2) return fail(fmt::format("{}: data_offsets must be [begin, end]", ctx));
    MET_TRY(t.begin, u64_of(off[0], ctx + " data_offsets"));
    MET_TRY(t.end, u64_of(off[1], ctx + " data_offsets"));
    if (t.end < t.begin) return fail(fmt::format("{}: data_offsets [{}, {}] end before begin", ctx, t.begin, t.end));
    if (t.end > data_size) {
      return fail(fmt::format("{}: data_offsets end {} is past the {} data bytes of the file", ctx, t.end, data_size));
    }
    const std::uint64_t bytes = t.end - t.begin;
    const int b = *bits;
    overflow = overflow || elems > std::numeric_limits<std::uint64_t>::max() / 8;
    if (overflow || (elems * b) % 8 != 0 || elems * b / 8 != bytes) {
      std::vector<std::string> dims;
      for (auto d : t.shape) dims.push_back(std::to_string(d));
      return fail(fmt::format("{}: shape [{}] of {} needs {} bytes, data_offsets hold {}", ctx, join(dims, ", "),
                              t.dtype, overflow ? std::string("more than 2^64") : bits_text(elems, b),
                              bytes));
    }
    if (bytes > 0) {
      spans.emplace_back(t.begin, t.end);
      owner.emplace(t.begin, name);
    }
    h.tensors.emplace(name, std::move(t));
  }
  std::sort(spans.begin(), spans.end());
  for (std::size_t k = 1; k < spans.size(); ++k) {
    if (spans[k].first < spans[k - 1].second) {
      const auto a = owner.find(spans[k - 1].first), bb = owner.find(spans[k].first);
      return fail(fmt::format("{}: tensors '{}' [{}, {}] and '{}' [{}, {}] overlap", display,
                              a == owner.end() ? "?" : a->second, spans[k - 1].first, spans[k - 1].second,
                              bb == owner.end() ? "?" : bb->second, spans[k].first, spans[k].second));
    }
  }
  return h;
}

Expected<SafetensorsHeader> read_safetensors_header(const CheckpointSource& src, const std::string& file) {
  const std::string display = src.display(file);
  MET_TRY(std::uint64_t file_size, src.size(file));
  if (file_size < kHeaderLengthBytes) {
    return fail(fmt::format("{}: {} bytes is too short for the {}-byte header length", display, file_size, kHeaderLengthBytes));
  }
  MET_TRY(std::string prefix, src.read_prefix(file, kHeaderLengthBytes));
  if (prefix.size() < kHeaderLengthBytes) return fail(fmt::format("{}: truncated header length", display));
  std::uint64_t n = 0;
  for (std::size_t k = kHeaderLengthBytes; k-- > 0;) n = (n << 8) | static_cast<unsigned char>(prefix[k]);
  if (n > file_size - kHeaderLengthBytes) {
    return fail(fmt::format("{}: header length {} exceeds file size {}", display, n, file_size));
  }
  if (n > kMaxHeader) return fail(fmt::format("{}: header length {} exceeds the {} byte limit", display, n, kMaxHeader));
  if (n < 2) return fail(fmt::format("{}: header length {} is too short for a json object", display, n));
  MET_TRY(std::string all, src.read_prefix(file, kHeaderLengthBytes + n));
  if (all.size() != kHeaderLengthBytes + n) return fail(fmt::format("{}: truncated header", display));
  return parse_safetensors_header(std::string_view(all).substr(kHeaderLengthBytes), file_size - kHeaderLengthBytes - n, display,
                                  file);
}

Expected<std::optional<std::map<std::string, TensorInfo>>> read_checkpoint_tensors(const CheckpointSource& src) {
  using Out = std::optional<std::map<std::string, TensorInfo>>;
  if (src.exists(kIndexFile)) {
    const std::string display = src.display(kIndexFile);
    MET_TRY(std::string text, src.read(kIndexFile));
    MET_TRY(json root, parse_json(text, display));
    if (!root.is_object()) return fail(fmt::format("{}: expected a json object, found {}", display, json_type(root)));
    for (const auto& [k, v] : root.items()) {
      if (k != "metadata" && k != "weight_map") return fail(fmt::format("{}: unknown key '{}'", display, k));
    }
    if (!root.contains("weight_map") || !root["weight_map"].is_object()) {
      return fail(fmt::format("{}: missing object 'weight_map'", display));
    }
    std::map<std::string, std::set<std::string>> by_shard;
    for (const auto& [tensor, shard] : root["weight_map"].items()) {
      if (!shard.is_string()) {
        return fail(fmt::format("{}: weight_map '{}' is {}, expected a string", display, tensor, json_type(shard)));
      }
      const std::string s = shard.get<std::string>();
      if (s.empty() || s.find('/') != std::string::npos || s == "." || s == "..") {
        return fail(fmt::format("{}: weight_map '{}' names '{}', not a file of this directory", display, tensor, s));
      }
      by_shard[s].insert(tensor);
    }
    std::map<std::string, TensorInfo> all;
    for (const auto& [shard, tensors] : by_shard) {
      if (!src.exists(shard)) return fail(fmt::format("{}: missing shard '{}' named by {}", src.display(shard), shard, kIndexFile));
      MET_TRY(SafetensorsHeader h, read_safetensors_header(src, shard));
      for (const auto& tensor : tensors) {
        if (!h.tensors.count(tensor)) {
          return fail(fmt::format("{}: tensor '{}' named by {} is not in this shard", src.display(shard), tensor, kIndexFile));
        }
      }
      for (auto& [name, info] : h.tensors) {
        if (!tensors.count(name)) {
          return fail(fmt::format("{}: tensor '{}' is not named by {}", src.display(shard), name, kIndexFile));
        }
        all.emplace(name, std::move(info));
      }
    }
    return Out(std::move(all));
  }
  if (src.exists(kSingleFile)) {
    MET_TRY(SafetensorsHeader h, read_safetensors_header(src, kSingleFile));
    return Out(std::move(h.tensors));
  }
  return Out();
}

}  // namespace met::model
