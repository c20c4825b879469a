// weights.json: building entries from safetensors headers, the canonical text, and a strict
// parser. Stacking rules are checked here once so the interpreter only concatenates bytes.
#include "model/json_type.hpp"
#include "emit/weights_manifest.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstring>
#include <nlohmann/json.hpp>
#include <set>

#include "core/strings.hpp"
#include "model/quant.hpp"
#include "model/synth.hpp"

namespace met::emit {
namespace {

using json = nlohmann::json;
using ordered = nlohmann::ordered_json;

using model::json_type;

std::string shape_text(const std::vector<std::uint64_t>& s) {
  std::vector<std::string> parts;
  for (auto d : s) parts.push_back(std::to_string(d));
  return "[" + join(parts, ", ") + "]";
}

std::uint64_t ceil_div(std::uint64_t a, std::uint64_t b) { return (a + b - 1) / b; }

// Safetensors dtype -> manifest format name; empty when a manifest cannot hold it.
std::string format_of_dtype(const std::string& dtype) {
  if (dtype == "BF16") return "bf16";
  if (dtype == "F16") return "f16";
  if (dtype == "F32") return "f32";
  if (dtype == "F8_E4M3") return "fp8-e4m3";
  return "";
}

std::uint64_t elems(const std::vector<std::uint64_t>& shape) {
  std::uint64_t n = 1;
  for (auto d : shape) n *= d;
  return n;
}

ordered part_json(const WeightPart& p) {
  ordered j;
  j["tensor"] = p.tensor;
  j["file"] = p.file;
  j["offset"] = p.offset;
  j["bytes"] = p.bytes;
  j["shape"] = p.shape;
  j["dtype"] = p.dtype;
  if (!p.window.empty()) j["window"] = p.window;
  return j;
}

// Strict object reader: every key must be known; required keys must be present.
Expected<void> check_keys(const json& j, const std::set<std::string>& required, const std::set<std::string>& optional,
                          const std::string& ctx) {
  if (!j.is_object()) return fail(fmt::format("{}: expected an object, found {}", ctx, json_type(j)));
  for (const auto& [k, v] : j.items()) {
    if (!required.count(k) && !optional.count(k)) {
      std::vector<std::string> known(required.begin(), required.end());
      known.insert(known.end(), optional.begin(), optional.end());
      std::sort(known.begin(), known.end());
      return fail(fmt::format("{}: unknown key '{}' (known: {})", ctx, k, join(known, ", ")));
    }
  }
  for (const auto& k : required) {
    if (!j.contains(k)) return fail(fmt::format("{}: missing key '{}'", ctx, k));
  }
  return {};
}

Expected<std::string> get_string(const json& j, const std::string& key, const std::string& ctx) {
  const json& v = j.at(key);
  if (!v.is_string()) return fail(fmt::format("{}: '{}' is {}, expected a string", ctx, key, json_type(v)));
  return v.get<std::string>();
}

Expected<std::uint64_t> get_u64(const json& v, const std::string& ctx) {
  if (v.is_number_unsigned()) return v.get<std::uint64_t>();
  if (v.is_number_integer() && v.get<std::int64_t>() >= 0) return static_cast<std::uint64_t>(v.get<std::int64_t>());
  return fail(fmt::format("{} is {}, expected a non-negative integer", ctx, json_type(v)));
}

Expected<std::vector<std::uint64_t>> get_dims(const json& j, const std::string& key, const std::string& ctx) {
  const json& v = j.at(key);
  if (!v.is_array()) return fail(fmt::format("{}: '{}' is {}, expected a list of integers", ctx, key, json_type(v)));
  std::vector<std::uint64_t> out;
  for (std::size_t k = 0; k < v.size(); ++k) {
    MET_TRY(auto d, get_u64(v[k], fmt::format("{}: '{}' entry {}", ctx, key, k)));
    out.push_back(d);
  }
  return out;
}

Expected<WeightPart> parse_part(const json& j, const std::string& ctx) {
  MET_CHECK(check_keys(j, {"tensor", "file", "offset", "bytes", "shape", "dtype"}, {"window"}, ctx));
  WeightPart p;
  MET_TRY(p.tensor, get_string(j, "tensor", ctx));
  MET_TRY(p.file, get_string(j, "file", ctx));
  MET_TRY(p.dtype, get_string(j, "dtype", ctx));
  MET_TRY(p.offset, get_u64(j.at("offset"), ctx + ": 'offset'"));
  MET_TRY(p.bytes, get_u64(j.at("bytes"), ctx + ": 'bytes'"));
  MET_TRY(p.shape, get_dims(j, "shape", ctx));
  const auto bits = model::dtype_bits(p.dtype);
  if (!bits) return fail(fmt::format("{}: unknown dtype '{}'", ctx, p.dtype));
  if (elems(p.shape) * static_cast<std::uint64_t>(*bits) / 8 != p.bytes) {
    return fail(fmt::format("{}: tensor '{}' {} {} needs {} bytes, the part says {}", ctx, p.tensor, p.dtype,
                            shape_text(p.shape), elems(p.shape) * static_cast<std::uint64_t>(*bits) / 8, p.bytes));
  }
  if (j.contains("window")) {
    MET_TRY(p.window, get_dims(j, "window", ctx));
    bool inside = !p.shape.empty() && p.shape.size() <= 4 && p.window.size() == 2 * p.shape.size();
    for (std::size_t d = 0; inside && d < p.shape.size(); ++d)
      inside = p.window[2 * d + 1] > 0 && p.window[2 * d] <= p.shape[d] && p.window[2 * d + 1] <= p.shape[d] - p.window[2 * d];
    if (!inside) {
      return fail(fmt::format("{}: window {} of tensor '{}' {} is not a start and a count per dimension inside a tensor of 1 "
                              "to 4 dimensions", ctx, shape_text(p.window), p.tensor, shape_text(p.shape)));
    }
  }
  if (p.file.empty() || p.file.find("..") != std::string::npos || p.file.front() == '/') {
    return fail(fmt::format("{}: file '{}' is not a file name inside the checkpoint", ctx, p.file));
  }
  return p;
}

// Parts stack along dim 0: same rank, trailing dims and dtype. Returns the stacked shape.
Expected<std::vector<std::uint64_t>> stacked_shape(const std::vector<WeightPart>& parts, const std::string& ctx) {
  if (parts.empty()) return fail(fmt::format("{}: no parts", ctx));
  std::vector<std::uint64_t> shape = part_shape(parts[0]);
  if (shape.empty()) return fail(fmt::format("{}: part '{}' is a scalar; parts stack along dim 0", ctx, parts[0].tensor));
  for (std::size_t k = 1; k < parts.size(); ++k) {
    const auto s = part_shape(parts[k]);
    if (parts[k].dtype != parts[0].dtype) {
      return fail(fmt::format("{}: parts disagree in dtype: '{}' is {}, '{}' is {}", ctx, parts[0].tensor, parts[0].dtype,
                              parts[k].tensor, parts[k].dtype));
    }
    if (s.size() != shape.size() || !std::equal(s.begin() + 1, s.end(), shape.begin() + 1)) {
      return fail(fmt::format("{}: parts do not stack along dim 0: '{}' is {}, '{}' is {}", ctx, parts[0].tensor,
                              shape_text(part_shape(parts[0])), parts[k].tensor, shape_text(s)));
    }
    shape[0] += s[0];
  }
  return shape;
}

// An MXFP4 entry: one part of U8 blocks [experts, rows, cols / 32, 16] and one scale part of U8
// e8m0 [experts, rows, cols / 32].
Expected<void> check_mxfp4(const WeightEntry& e, const std::string& ctx) {
  if (e.parts.size() != 1 || e.scale_parts.size() != 1 || !e.block.empty() || !e.input_scale_parts.empty())
    return fail(fmt::format("{}: an mxfp4 weight is one part of blocks and one scale part", ctx));
  const auto& b = e.parts[0];
  const auto& sc = e.scale_parts[0];
  if (b.dtype != "U8" || b.shape.size() != 4 || b.shape[3] != kMxfp4BlockBytes ||
      (!b.window.empty() && (b.window[6] != 0 || b.window[7] != kMxfp4BlockBytes)))
    return fail(fmt::format("{}: mxfp4 blocks '{}' are {} {}, expected U8 [experts, rows, cols / 32, {}]", ctx, b.tensor, b.dtype,
                            shape_text(b.shape), kMxfp4BlockBytes));
  const std::vector<std::uint64_t> want(b.shape.begin(), b.shape.end() - 1);
  if (sc.dtype != "U8" || sc.shape != want)
    return fail(fmt::format("{}: mxfp4 scales '{}' are {} {}, expected U8 {} for blocks '{}' {}", ctx, sc.tensor, sc.dtype,
                            shape_text(sc.shape), shape_text(want), b.tensor, shape_text(b.shape)));
  // A tensor-parallel rank's window: the scales' is the blocks' without the bytes of a block.
  const std::vector<std::uint64_t> bwin(b.window.begin(), b.window.end() - (b.window.empty() ? 0 : 2));
  if (sc.window != bwin)
    return fail(fmt::format("{}: mxfp4 scales '{}' have window {}, the blocks '{}' {}", ctx, sc.tensor, shape_text(sc.window),
                            b.tensor, shape_text(b.window)));
  return {};
}

// Each scale part covers its weight part: F32 [ceil(r/br), ceil(c/bc)].
Expected<void> check_scales(const WeightEntry& e, const std::string& ctx) {
  if (e.dtype == "mxfp4") return check_mxfp4(e, ctx);
  if (e.scale_parts.empty()) {
    if (!e.block.empty()) return fail(fmt::format("{}: 'block' without 'scale_parts'", ctx));
    if (e.dtype == "fp8-e4m3") return fail(fmt::format("{}: fp8-e4m3 weights need 'scale_parts'", ctx));
    return {};
  }
  if (e.dtype != "fp8-e4m3") return fail(fmt::format("{}: scale_parts on a {} weight", ctx, e.dtype));
  if (e.scale_parts.size() != e.parts.size()) {
    return fail(fmt::format("{}: {} scale parts for {} parts", ctx, e.scale_parts.size(), e.parts.size()));
  }
  if (!e.input_scale_parts.empty() && e.input_scale_parts.size() != e.parts.size()) {
    return fail(fmt::format("{}: {} input scale parts for {} parts", ctx, e.input_scale_parts.size(), e.parts.size()));
  }
  for (const auto& s : e.input_scale_parts) {
    if (s.dtype != "F32" || !s.shape.empty()) {
      return fail(fmt::format("{}: input scale '{}' is {} {}, expected F32 [] (one static scale per tensor)", ctx, s.tensor,
                              s.dtype, shape_text(s.shape)));
    }
  }
  if (e.block.empty()) {  // per-tensor
    for (const auto& s : e.scale_parts) {
      if (s.dtype != "F32" || !s.shape.empty()) {
        return fail(fmt::format("{}: scale '{}' is {} {}, expected F32 [] (one scale per tensor)", ctx, s.tensor, s.dtype,
                                shape_text(s.shape)));
      }
    }
    return {};
  }
  if (!e.input_scale_parts.empty()) return fail(fmt::format("{}: input_scale_parts beside block scales", ctx));
  if (e.block.size() != 2 || e.block[0] == 0 || e.block[1] == 0) {
    return fail(fmt::format("{}: 'block' must be two positive integers, found {}", ctx, shape_text(e.block)));
  }
  for (std::size_t k = 0; k < e.parts.size(); ++k) {
    const auto& w = e.parts[k];
    const auto& s = e.scale_parts[k];
    if (w.shape.size() != 2) return fail(fmt::format("{}: block-scaled part '{}' is {}, expected 2-d", ctx, w.tensor, shape_text(w.shape)));
    const std::vector<std::uint64_t> want{ceil_div(w.shape[0], e.block[0]), ceil_div(w.shape[1], e.block[1])};
    if (s.dtype != "F32" || s.shape != want) {
      return fail(fmt::format("{}: scale '{}' is {} {}, expected F32 {} for '{}' {} in {}x{} blocks", ctx, s.tensor,
                              s.dtype, shape_text(s.shape), shape_text(want), w.tensor, shape_text(w.shape), e.block[0],
                              e.block[1]));
    }
    // A tensor-parallel window starts on a block and holds whole blocks (or runs to the end); the
    // scales' window is its blocks.
    if (!w.window.empty() || !s.window.empty()) {
      bool ok = w.window.size() == 4 && s.window.size() == 4;
      for (std::size_t d = 0; ok && d < 2; ++d) {
        const std::uint64_t b = e.block[d], at = w.window[2 * d], n = w.window[2 * d + 1];
        ok = at % b == 0 && (n % b == 0 || at + n == w.shape[d]) && s.window[2 * d] == at / b && s.window[2 * d + 1] == ceil_div(n, b);
      }
      if (!ok)
        return fail(fmt::format("{}: part '{}' window {} and its scales' window {} are not whole {}x{} blocks", ctx, w.tensor,
                                shape_text(w.window), shape_text(s.window), e.block[0], e.block[1]));
    }
  }
  return {};
}

Expected<WeightEntry> parse_entry(const json& j, const std::string& ctx0) {
  MET_CHECK(check_keys(j, {"name", "dtype", "shape", "parts", "scale_parts"}, {"block", "input_scale_parts"}, ctx0));
  WeightEntry e;
  MET_TRY(e.name, get_string(j, "name", ctx0));
  const std::string ctx = fmt::format("{} '{}'", ctx0, e.name);
  MET_TRY(e.dtype, get_string(j, "dtype", ctx));
  if (format_element_bytes(e.dtype) == 0) {
    return fail(fmt::format("{}: unknown dtype '{}' (known: bf16, f16, f32, fp8-e4m3, mxfp4)", ctx, e.dtype));
  }
  MET_TRY(e.shape, get_dims(j, "shape", ctx));
  for (const std::string key : {"parts", "scale_parts", "input_scale_parts"}) {
    if (!j.contains(key)) continue;
    const json& arr = j.at(key);
    if (!arr.is_array()) return fail(fmt::format("{}: '{}' is {}, expected a list", ctx, key, json_type(arr)));
    auto& out = key == "parts" ? e.parts : key == "scale_parts" ? e.scale_parts : e.input_scale_parts;
    for (std::size_t k = 0; k < arr.size(); ++k) {
      MET_TRY(auto p, parse_part(arr[k], fmt::format("{}: {} {}", ctx, key, k)));
      out.push_back(std::move(p));
    }
  }
  if (j.contains("block")) {
    MET_TRY(e.block, get_dims(j, "block", ctx));
  }
  MET_TRY(auto shape, stacked_shape(e.parts, ctx));
  if (shape != e.shape) {
    return fail(fmt::format("{}: shape {} but the parts stack to {}", ctx, shape_text(e.shape), shape_text(shape)));
  }
  if (format_of_dtype(e.parts[0].dtype) != e.dtype && !(e.dtype == "mxfp4" && e.parts[0].dtype == "U8")) {
    return fail(fmt::format("{}: dtype '{}' but part '{}' is {}", ctx, e.dtype, e.parts[0].tensor, e.parts[0].dtype));
  }
  MET_CHECK(check_scales(e, ctx));
  return e;
}

Expected<WeightPart> part_of(const std::string& tensor, const CheckpointLayout& layout, const std::string& ctx) {
  auto it = layout.tensors.find(tensor);
  if (it == layout.tensors.end()) return fail(fmt::format("{}: no tensor '{}' in the safetensors headers", ctx, tensor));
  const model::TensorInfo& t = it->second;
  auto start = layout.data_start.find(t.file);
  if (start == layout.data_start.end()) {
    return fail(fmt::format("{}: tensor '{}' is in '{}', whose header was not read", ctx, tensor, t.file));
  }
  WeightPart p;
  p.tensor = tensor;
  p.file = t.file;
  p.dtype = t.dtype;
  p.offset = start->second + t.begin;
  p.bytes = t.end - t.begin;
  p.shape = t.shape;
  return p;
}

}  // namespace

std::uint64_t format_element_bytes(const std::string& dtype) {
  if (dtype == "f32") return 4;
  if (dtype == "bf16" || dtype == "f16") return 2;
  if (dtype == "fp8-e4m3" || dtype == "mxfp4") return 1;  // mxfp4: one byte of two codes
  return 0;
}

std::string to_json(const WeightsManifest& m) {
  ordered root;
  root["schema"] = kWeightsSchema;
  root["network"] = m.network;
  root["checkpoint"] = m.checkpoint;
  root["tensors"] = ordered::array();
  for (const auto& e : m.tensors) {
    ordered j;
    j["name"] = e.name;
    j["dtype"] = e.dtype;
    j["shape"] = e.shape;
    j["parts"] = ordered::array();
    for (const auto& p : e.parts) j["parts"].push_back(part_json(p));
    j["scale_parts"] = ordered::array();
    for (const auto& p : e.scale_parts) j["scale_parts"].push_back(part_json(p));
    if (!e.block.empty()) j["block"] = e.block;
    if (!e.input_scale_parts.empty()) {
      j["input_scale_parts"] = ordered::array();
      for (const auto& p : e.input_scale_parts) j["input_scale_parts"].push_back(part_json(p));
    }
    root["tensors"].push_back(std::move(j));
  }
  if (!m.kv_scales.empty()) {
    root["kv_scales"] = ordered::array();
    for (const auto& k : m.kv_scales) {
      ordered j;
      j["layer"] = k.layer;
      j["k"] = part_json(k.k);
      j["v"] = part_json(k.v);
      j["k_scale"] = k.k_scale;
      j["v_scale"] = k.v_scale;
      root["kv_scales"].push_back(std::move(j));
    }
  }
  return root.dump(2) + "\n";
}

Expected<WeightsManifest> parse_weights_manifest(const std::string& text, const std::string& display) {
  json root;
  try {
    root = json::parse(text);
  } catch (const json::exception& e) {
    return fail(fmt::format("{}: invalid json: {}", display, e.what()));
  }
  MET_CHECK(check_keys(root, {"schema", "network", "checkpoint", "tensors"}, {"kv_scales"}, display));
  MET_TRY(std::string schema, get_string(root, "schema", display));
  if (schema != kWeightsSchema) {
    return fail(fmt::format("{}: schema '{}', this met reads '{}'", display, schema, kWeightsSchema));
  }
  WeightsManifest m;
  MET_TRY(m.network, get_string(root, "network", display));
  MET_TRY(m.checkpoint, get_string(root, "checkpoint", display));
  const json& ts = root.at("tensors");
  if (!ts.is_array()) return fail(fmt::format("{}: 'tensors' is {}, expected a list", display, json_type(ts)));
  std::set<std::string> names;
  for (std::size_t k = 0; k < ts.size(); ++k) {
    MET_TRY(auto e, parse_entry(ts[k], fmt::format("{}: tensors {}", display, k)));
    if (!names.insert(e.name).second) return fail(fmt::format("{}: tensors {}: duplicate name '{}'", display, k, e.name));
    m.tensors.push_back(std::move(e));
  }
  if (root.contains("kv_scales")) {
    const json& ks = root.at("kv_scales");
    if (!ks.is_array()) return fail(fmt::format("{}: 'kv_scales' is {}, expected a list", display, json_type(ks)));
    std::set<int> layers;
    for (std::size_t k = 0; k < ks.size(); ++k) {
      const std::string ctx = fmt::format("{}: kv_scales {}", display, k);
      MET_CHECK(check_keys(ks[k], {"layer", "k", "v", "k_scale", "v_scale"}, {}, ctx));
      KvScale s;
      MET_TRY(auto layer, get_u64(ks[k].at("layer"), ctx + ": 'layer'"));
      if (layer > 1000000) return fail(fmt::format("{}: layer {} is out of range", ctx, layer));
      s.layer = static_cast<int>(layer);
      if (!layers.insert(s.layer).second) return fail(fmt::format("{}: a second entry for layer {}", ctx, s.layer));
      MET_TRY(s.k, parse_part(ks[k].at("k"), ctx + ": k"));
      MET_TRY(s.v, parse_part(ks[k].at("v"), ctx + ": v"));
      for (auto [key, out] : {std::pair{"k_scale", &s.k_scale}, std::pair{"v_scale", &s.v_scale}}) {
        const json& v = ks[k].at(key);
        if (!v.is_number() || !std::isfinite(v.get<double>()) || v.get<double>() <= 0 ||
            static_cast<double>(static_cast<float>(v.get<double>())) != v.get<double>()) {
          return fail(fmt::format("{}: '{}' is {}, expected a positive finite f32 value", ctx, key, v.dump()));
        }
        *out = static_cast<float>(v.get<double>());
      }
      for (const auto* p : {&s.k, &s.v})
        if (p->dtype != "F32" || !p->shape.empty() || !p->window.empty())
          return fail(fmt::format("{}: '{}' is {} {}, expected F32 []", ctx, p->tensor, p->dtype, shape_text(p->shape)));
      m.kv_scales.push_back(std::move(s));
    }
  }
  return m;
}

Expected<CheckpointLayout> read_checkpoint_layout(const CheckpointSource& src) {
  MET_TRY(auto tensors, model::read_checkpoint_tensors(src));
  if (!tensors) {
    return fail(fmt::format("{}: no {} or {}", src.display(""), model::kSingleFile, model::kIndexFile));
  }
  CheckpointLayout layout;
  layout.tensors = std::move(*tensors);
  std::set<std::string> files;
  for (const auto& [name, t] : layout.tensors) files.insert(t.file);
  constexpr std::uint64_t kLengthBytes = 8;
  for (const auto& f : files) {
    MET_TRY(auto h, model::read_safetensors_header(src, f));
    layout.data_start[f] = kLengthBytes + h.header_length;
  }
  for (const auto& [name, t] : layout.tensors) {
    const std::string_view n(name);
    if (!n.ends_with(kKScaleSuffix) && !n.ends_with(kVScaleSuffix)) continue;
    if (t.dtype != "F32" || !t.shape.empty() || t.end - t.begin != sizeof(float)) continue;  // calibrated_kv_scales names it
    MET_TRY(std::string b, src.read_range(t.file, layout.data_start.at(t.file) + t.begin, sizeof(float)));
    float v = 0;
    std::memcpy(&v, b.data(), sizeof v);  // safetensors is little-endian, as every host met runs on
    layout.kv_scale_values[name] = v;
  }
  return layout;
}

Expected<std::map<int, KvScale>> calibrated_kv_scales(const CheckpointLayout& layout, const std::string& display) {
  std::map<int, KvScale> out;
  auto value = [&](const WeightPart& p, const std::string& ctx) -> Expected<float> {
    if (p.dtype != "F32" || !p.shape.empty()) {
      return fail(fmt::format("{}: KV scale '{}' is {} {}, expected F32 [] (one scale per cache)", ctx, p.tensor, p.dtype,
                              shape_text(p.shape)));
    }
    auto it = layout.kv_scale_values.find(p.tensor);
    if (it == layout.kv_scale_values.end()) return fail(fmt::format("{}: KV scale '{}' was not read", ctx, p.tensor));
    if (!std::isfinite(it->second) || it->second <= 0) {
      return fail(fmt::format("{}: KV scale '{}' is {}; a cache scale must be finite and positive", ctx, p.tensor, it->second));
    }
    return it->second;
  };
  for (const auto& [name, t] : layout.tensors) {
    const std::string_view n(name);
    const bool is_k = n.ends_with(kKScaleSuffix);
    if (!is_k && !n.ends_with(kVScaleSuffix)) continue;
    // "<...>.layers.<N>" + suffix: N is the layer the scale belongs to.
    const std::string attn(n.substr(0, n.size() - std::string_view(is_k ? kKScaleSuffix : kVScaleSuffix).size()));
    const std::string ctx = fmt::format("{}: '{}'", display, name);
    const auto num = attn.rfind('.');
    int layer = -1;
    if (num != std::string::npos && num >= 6 && attn.compare(num - 6, 6, "layers") == 0 && (num == 6 || attn[num - 7] == '.')) {
      const std::string digits = attn.substr(num + 1);
      if (!digits.empty() && digits.size() < 7 && digits.find_first_not_of("0123456789") == std::string::npos)
        layer = std::stoi(digits);
    }
    if (layer < 0) return fail(fmt::format("{}: a KV scale outside '<...>.layers.<N>.self_attn'", ctx));
    const std::string k = attn + kKScaleSuffix, v = attn + kVScaleSuffix;
    if (!layout.tensors.count(is_k ? v : k)) return fail(fmt::format("{}: no '{}' beside it", ctx, is_k ? v : k));
    if (out.count(layer)) continue;  // its pair already read it
    KvScale s;
    s.layer = layer;
    MET_TRY(s.k, part_of(k, layout, ctx));
    MET_TRY(s.v, part_of(v, layout, ctx));
    MET_TRY(s.k_scale, value(s.k, ctx));
    MET_TRY(s.v_scale, value(s.v, ctx));
    out.emplace(layer, std::move(s));
  }
  return out;
}

Expected<WeightEntry> make_entry(const std::string& name, const std::vector<std::string>& tensors,
                                 const CheckpointLayout& layout, const std::string& display) {
  const std::string ctx = fmt::format("{}: weight '{}'", display, name);
  WeightEntry e;
  e.name = name;
  // A fused expert tensor stored MXFP4 (gpt-oss): `<name>_blocks` and `<name>_scales` instead.
  if (tensors.size() == 1 && !layout.tensors.count(tensors[0]) && layout.tensors.count(tensors[0] + kBlocksSuffix)) {
    MET_TRY(auto b, part_of(tensors[0] + kBlocksSuffix, layout, ctx));
    MET_TRY(auto sc, part_of(tensors[0] + kScalesSuffix, layout, ctx));
    e.dtype = "mxfp4";
    e.shape = b.shape;
    e.parts.push_back(std::move(b));
    e.scale_parts.push_back(std::move(sc));
    MET_CHECK(check_mxfp4(e, ctx));
    return e;
  }
  for (const auto& t : tensors) {
    MET_TRY(auto p, part_of(t, layout, ctx));
    e.parts.push_back(std::move(p));
  }
  MET_TRY(e.shape, stacked_shape(e.parts, ctx));
  e.dtype = format_of_dtype(e.parts[0].dtype);
  if (e.dtype.empty()) {
    return fail(fmt::format("{}: tensor '{}' is {}; weights.json holds BF16, F16, F32 and F8_E4M3", ctx, tensors[0],
                            e.parts[0].dtype));
  }
  // "<module>.weight" -> "<module>.input_scale"; other names have no module input scale.
  auto input_scale_of = [](const std::string& t) {
    const std::string_view suffix = ".weight";
    return std::string_view(t).ends_with(suffix) ? t.substr(0, t.size() - suffix.size() + 1) + kInputScale : std::string();
  };
  std::size_t with_block = 0, with_tensor = 0, with_input = 0;
  for (const auto& t : tensors) {
    with_block += layout.tensors.count(t + kScaleSuffix);
    with_tensor += layout.tensors.count(t + kTensorScaleSuffix);
    with_input += layout.tensors.count(input_scale_of(t));
  }
  if (with_block != 0 && with_tensor != 0) {
    return fail(fmt::format("{}: '{}' and '{}' scales both present; a checkpoint holds block scales or per-tensor scales",
                            ctx, kScaleSuffix, kTensorScaleSuffix));
  }
  const std::size_t with_scale = with_block + with_tensor;
  const char* suffix = with_block != 0 ? kScaleSuffix : kTensorScaleSuffix;
  if (with_scale != 0 && with_scale != tensors.size()) {
    return fail(fmt::format("{}: only {} of {} fused tensors have a '{}' tensor", ctx, with_scale, tensors.size(), suffix));
  }
  if (with_input != 0 && with_tensor != 0 && with_input != tensors.size()) {
    return fail(fmt::format("{}: only {} of {} fused tensors have an '{}' tensor", ctx, with_input, tensors.size(), kInputScale));
  }
  if (with_scale != 0) {
    for (const auto& t : tensors) {
      MET_TRY(auto s, part_of(t + suffix, layout, ctx));
      e.scale_parts.push_back(std::move(s));
    }
    if (with_block != 0) e.block = {kFp8BlockRows, kFp8BlockCols};
  }
  if (with_input != 0 && with_tensor != 0) {
    for (const auto& t : tensors) {
      MET_TRY(auto s, part_of(input_scale_of(t), layout, ctx));
      e.input_scale_parts.push_back(std::move(s));
    }
  }
  if (e.dtype == "fp8-e4m3" && e.scale_parts.empty()) {
    return fail(fmt::format("{}: F8_E4M3 tensor '{}' has no scale: neither '{}{}' (block-scaled) nor '{}{}' (per-tensor, "
                            "modelopt)",
                            ctx, tensors[0], tensors[0], kScaleSuffix, tensors[0], kTensorScaleSuffix));
  }
  MET_CHECK(check_scales(e, ctx));
  return e;
}

std::vector<std::uint64_t> part_shape(const WeightPart& p) {
  if (p.window.empty()) return p.shape;
  std::vector<std::uint64_t> counts;
  for (std::size_t d = 1; d < p.window.size(); d += 2) counts.push_back(p.window[d]);
  return counts;
}

namespace {

// A window over the whole of `shape` but [at, at + w) along `axis`.
std::vector<std::uint64_t> cut_along(const std::vector<std::uint64_t>& shape, std::size_t axis, std::uint64_t at, std::uint64_t w) {
  std::vector<std::uint64_t> win;
  for (std::size_t d = 0; d < shape.size(); ++d) {
    win.push_back(d == axis ? at : 0);
    win.push_back(d == axis ? w : shape[d]);
  }
  return win;
}

}  // namespace

Expected<WeightEntry> rank_slice(const WeightEntry& e, int dim, int rank, int ranks, const std::string& ctx,
                                 const std::vector<int>& part_groups, int halves, SplitLayout layout) {
  const std::string where = fmt::format("{}: weight '{}' split over {} ranks", ctx, e.name, ranks);
  const bool mx = e.dtype == "mxfp4";
  const bool blocked = !e.block.empty();  // fp8 of 2-d scale blocks (128 x 128): windows on whole blocks
  if (layout == SplitLayout::vector && dim != 0)
    return fail(where + ": a bias or sinks vector is cut along its outputs only");
  WeightEntry out = e;
  out.name = fmt::format("{}.rank{}", e.name, rank);
  out.parts.clear();
  out.scale_parts.clear();
  for (std::size_t k = 0; k < e.parts.size(); ++k) {
    const auto& p = e.parts[k];
    const bool shape_ok = !p.window.empty()                    ? false
                          : mx                                 ? p.shape.size() == 4
                          : layout == SplitLayout::vector      ? p.shape.size() == 1 || p.shape.size() == 2
                          : layout == SplitLayout::in_out      ? p.shape.size() == 3
                                                               : p.shape.size() == 2 || p.shape.size() == 3;
    if (!shape_ok)
      return fail(fmt::format("{}: tensor '{}' {} is not a whole {}", where, p.tensor, shape_text(p.shape),
                              mx ? "MXFP4 block tensor [experts, rows, blocks, 16]"
                              : layout == SplitLayout::vector ? "vector or per-expert vector"
                              : layout == SplitLayout::in_out ? "3-d expert tensor [experts, in, out]"
                                                              : "2-d or 3-d tensor"));
    const bool experts = mx || p.shape.size() == 3;
    if (experts && !mx && !e.scale_parts.empty())
      return fail(fmt::format("{}: tensor '{}' {} has scales; stacked experts are split unscaled only", where, p.tensor,
                              shape_text(p.shape)));
    if (blocked && (p.shape.size() != 2 || layout != SplitLayout::out_in))
      return fail(fmt::format("{}: tensor '{}' {} is block-scaled; such windows cut 2-d weights only", where, p.tensor,
                              shape_text(p.shape)));
    // A part cut into fewer slices than ranks (a KV head shared by several ranks): rank r takes
    // slice r * groups / ranks.
    const int groups = k < part_groups.size() && part_groups[k] > 0 ? part_groups[k] : ranks;
    // The axis the split cuts: the matrix's outputs (dim 0) or inputs (dim 1) in the layout's order.
    std::size_t axis = 0;
    if (layout == SplitLayout::vector) axis = p.shape.size() - 1;
    else if (layout == SplitLayout::in_out) axis = dim == 0 ? 2 : 1;
    else axis = static_cast<std::size_t>(dim) + (experts ? 1 : 0);  // MXFP4: dim 1 cuts the 32-column blocks
    const std::uint64_t stacked = dim == 0 && experts && layout == SplitLayout::out_in ? static_cast<std::uint64_t>(halves) : 1;
    const std::uint64_t n = p.shape[axis] / stacked, r = static_cast<std::uint64_t>(groups);
    if (p.shape[axis] % stacked != 0 || n % r != 0) {
      if (mx && axis == 2)
        return fail(fmt::format("{}: tensor '{}' {}: its {} input columns do not divide into {} parts of whole 32-column "
                                "MXFP4 scale blocks (each rank's share must be a multiple of 32)",
                                where, p.tensor, shape_text(p.shape), n * 32, groups));
      return fail(fmt::format("{}: tensor '{}' {}: {} {}{} do not divide into {} equal parts", where, p.tensor, shape_text(p.shape),
                              n, dim == 0 ? "rows" : "columns", stacked > 1 ? fmt::format(" in each of {} halves", stacked) : "", groups));
    }
    const std::uint64_t w = n / r, at = w * static_cast<std::uint64_t>(rank * groups / ranks);
    // Block-scaled fp8: the window starts on a scale block and holds whole blocks (or runs to the
    // tensor's end), so the rank's scales are a window of the scale tensor.
    const std::uint64_t bs = blocked ? e.block.at(axis) : 1;
    if (blocked && (at % bs != 0 || (w % bs != 0 && at + w != p.shape[axis])))
      return fail(fmt::format("{}: tensor '{}' {}: a rank's {} {} from {} would cut its {}x{} fp8 scale blocks (each rank's share "
                              "must be whole blocks of {})",
                              where, p.tensor, shape_text(p.shape), w, axis == 0 ? "rows" : "columns", at, e.block[0], e.block[1], bs));
    auto keep = [&](std::vector<std::uint64_t> win) {
      WeightPart q = p;
      q.window = win;
      out.parts.push_back(std::move(q));
      if (blocked) {  // the F32 scales [ceil(rows / br), ceil(cols / bc)] of the window's blocks
        WeightPart sc = e.scale_parts.at(k);
        sc.window = cut_along(sc.shape, axis, at / bs, (w + bs - 1) / bs);
        out.scale_parts.push_back(std::move(sc));
      }
      if (mx) {  // the e8m0 scales [experts, rows, blocks]: the blocks' window without its byte dimension
        WeightPart sc = e.scale_parts.at(0);
        sc.window.assign(win.begin(), win.end() - 2);
        out.scale_parts.push_back(std::move(sc));
      }
    };
    if (stacked == 1 || !experts) {
      keep(cut_along(p.shape, axis, at, w));
    } else {  // each expert's rows [at, at + w) of every half, expert by expert
      for (std::uint64_t x = 0; x < p.shape[0]; ++x)
        for (std::uint64_t h = 0; h < stacked; ++h) {
          auto win = cut_along(p.shape, axis, h * n + at, w);
          win[0] = x;
          win[1] = 1;
          keep(std::move(win));
        }
    }
  }
  if (!mx && !blocked) out.scale_parts = e.scale_parts;
  MET_TRY(out.shape, stacked_shape(out.parts, where));
  return out;
}

std::string network_slug(const std::string& checkpoint_dir_name) {
  std::string s = checkpoint_dir_name;
  while (s.size() > 1 && s.back() == '/') s.pop_back();
  const auto slash = s.rfind('/');
  if (slash != std::string::npos) s = s.substr(slash + 1);
  for (auto& ch : s) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  return s;
}

std::string entry_name(const std::vector<std::string>& tensors, const std::string& role, const std::string& op) {
  if (tensors.size() == 1) return tensors[0];
  std::string prefix = tensors[0].substr(0, tensors[0].rfind('.') + 1);
  for (const auto& t : tensors) {
    while (!prefix.empty() && !starts_with(t, prefix)) {
      prefix.pop_back();
      prefix = prefix.substr(0, prefix.rfind('.') + 1);
    }
  }
  // A fused bias (gpt-oss's q/k/v biases) is named apart from its projection's fused weight.
  if (op == "bias" && !role.empty()) return prefix + role + "_bias";
  return prefix + (!role.empty() ? role : !op.empty() ? op : "fused");
}

namespace {

// An fp8 entry against the scheme config.json / hf_quant_config.json declare (the header alone
// cannot tell a block-scaled checkpoint whose scales went missing from a per-tensor one).
Expected<void> check_declared(const WeightEntry& e, const std::optional<model::QuantScheme>& q, const std::string& ctx) {
  for (const auto& p : e.parts) {
    if (p.dtype == "F8_E4M3" && q && model::excluded(q->exclude, p.tensor)) {
      return fail(fmt::format("{}: tensor '{}' is F8_E4M3, but {} keeps it unquantised (excluded by its {})", ctx, p.tensor,
                              q->source, q->method == "modelopt" ? "exclude_modules" : "modules_to_not_convert"));
    }
  }
  if (e.dtype != "fp8-e4m3") return {};
  if (!q || q->weight != Format::fp8_e4m3) {
    return fail(fmt::format("{}: tensor '{}' is F8_E4M3, but neither config.json quantization_config nor {} declares fp8 "
                            "weights",
                            ctx, e.parts[0].tensor, model::kHfQuantFile));
  }
  if (q->method == "fp8") {
    if (e.block.empty()) {
      return fail(fmt::format("{}: {} declares quant_method fp8 with block scales ('{}{}'), but '{}' has a per-tensor '{}'",
                              ctx, q->source, e.parts[0].tensor, kScaleSuffix, e.parts[0].tensor, e.scale_parts[0].tensor));
    }
    const std::vector<std::int64_t> want{static_cast<std::int64_t>(kFp8BlockRows), static_cast<std::int64_t>(kFp8BlockCols)};
    if (!q->block.empty() && q->block != want) {
      return fail(fmt::format("{}: {} declares weight_block_size [{}, {}]; the cpu weight view reads [128, 128] blocks", ctx,
                              q->source, q->block[0], q->block[1]));
    }
    return {};
  }
  if (q->method == "modelopt") {
    if (!e.block.empty()) {
      return fail(fmt::format("{}: {} declares modelopt FP8 with per-tensor scales ('{}{}'), but '{}' has block scales '{}'",
                              ctx, q->source, e.parts[0].tensor, kTensorScaleSuffix, e.parts[0].tensor, e.scale_parts[0].tensor));
    }
    if (q->act && e.input_scale_parts.empty()) {
      const std::string& t = e.parts[0].tensor;
      return fail(fmt::format("{}: {} declares static fp8 activations, but '{}' has no '{}{}'", ctx, q->source, t,
                              t.substr(0, t.rfind('.') + 1), kInputScale));
    }
  }
  return {};
}

// With kv_cache_quant_algo FP8 in hf_quant_config.json, modelopt writes the calibrated per-tensor
// KV scales beside the k and v projections: "<attn>.k_proj.k_scale", "<attn>.v_proj.v_scale", F32 [].
Expected<void> check_kv_scales(const std::vector<std::string>& tensors, const CheckpointLayout& layout,
                               const model::QuantScheme& q, const std::string& ctx) {
  for (const auto& t : tensors) {
    for (const char* which : {"k", "v"}) {
      const std::string proj = fmt::format(".self_attn.{}_proj.weight", which);
      if (!std::string_view(t).ends_with(proj)) continue;
      const std::string name = t.substr(0, t.size() - std::string_view("weight").size()) + which + "_scale";
      auto it = layout.tensors.find(name);
      if (it == layout.tensors.end()) {
        return fail(fmt::format("{}: {} declares kv_cache_quant_algo FP8, but there is no '{}'", ctx, q.source, name));
      }
      if (it->second.dtype != "F32" || !it->second.shape.empty()) {
        return fail(fmt::format("{}: KV scale '{}' is {} {}, expected F32 [] (one scale per layer)", ctx, name, it->second.dtype,
                                shape_text(it->second.shape)));
      }
    }
  }
  return {};
}

Expected<std::optional<model::QuantScheme>> declared_quant(const CheckpointSource& src) {
  MET_TRY(std::string text, src.read("config.json"));
  json config;
  try {
    config = json::parse(text);
  } catch (const json::exception& e) {
    return fail(fmt::format("{}: invalid json: {}", src.display("config.json"), e.what()));
  }
  return model::read_quant(config, src);
}

}  // namespace

Expected<WeightsManifest> build_weights_manifest(const model::Circuit& circuit, const model::ModelGraph& graph,
                                                 const CheckpointSource& src, const std::string& checkpoint) {
  MET_TRY(auto layout, read_checkpoint_layout(src));
  MET_TRY(auto quant, declared_quant(src));
  MET_TRY(auto nodes, model::weight_nodes(circuit, graph));
  WeightsManifest m;
  m.network = network_slug(src.name());
  m.checkpoint = checkpoint;
  std::set<std::string> seen;
  for (const auto& n : nodes) {
    std::vector<std::string> tensors;
    for (const auto& t : n.tensors) tensors.push_back(t.name);
    const std::string name = entry_name(n.names, n.role, n.op);
    MET_TRY(auto e, make_entry(name, tensors, layout, src.display("")));
    const std::string ctx = fmt::format("{}: weight '{}'", src.display(""), name);
    MET_CHECK(check_declared(e, quant, ctx));
    if (quant && quant->kv == Format::fp8_e4m3 && quant->source == model::kHfQuantFile) {
      MET_CHECK(check_kv_scales(tensors, layout, *quant, ctx));
    }
    if (!seen.insert(name).second) {
      return fail(fmt::format("{}: two weight nodes share the entry name '{}'", n.where, name));
    }
    m.tensors.push_back(std::move(e));
  }
  return m;
}

}  // namespace met::emit
