// Instantiation: evaluates circuit parameters from config.json, builds the per-layer kind
// schedule, instantiates node templates per layer and assigns weight formats (recipe, or declared
// by the quantization config and the safetensors headers). Layers of one kind whose nodes agree in
// everything but the layer index share one LayerGroup; a kind whose layers differ is split.
#include "model/json_type.hpp"
#include "model/instantiate.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <limits>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>

#include "core/strings.hpp"
#include "model/experts.hpp"
#include "model/ops.hpp"
#include "model/quant.hpp"
#include "model/safetensors.hpp"

namespace met::model {
namespace {

using json = nlohmann::json;
constexpr double kMaxLayers = 4096;  // far above any real model (DeepSeek-V3: 61, Llama-3.1-405B: 126)
constexpr const char* kConfigFile = "config.json";


Expected<json> read_config(const CheckpointSource& src) {
  const std::string display = src.display(kConfigFile);
  if (!src.exists(kConfigFile)) return fail(fmt::format("{}: no such file", display));
  MET_TRY(std::string text, src.read(kConfigFile));
  json root;
  try {
    root = json::parse(text);
  } catch (const json::exception& e) {
    return fail(fmt::format("{}: invalid json: {}", display, e.what()));
  }
  if (!root.is_object()) return fail(fmt::format("{}: expected a json object, found {}", display, json_type(root)));
  return root;
}

// Walks a dotted key; nullptr when any step is absent or not an object.
const json* lookup(const json& root, const std::string& dotted) {
  const json* cur = &root;
  std::size_t start = 0;
  while (true) {
    const std::size_t dot = dotted.find('.', start);
    const std::string part = dotted.substr(start, dot == std::string::npos ? std::string::npos : dot - start);
    if (!cur->is_object()) return nullptr;
    auto it = cur->find(part);
    if (it == cur->end()) return nullptr;
    cur = &*it;
    if (dot == std::string::npos) return cur;
    start = dot + 1;
  }
}

// First present, non-null key of a list, with the key that matched.
std::pair<const json*, std::string> first_present(const json& root, const std::vector<std::string>& keys) {
  for (const auto& k : keys) {
    const json* v = lookup(root, k);
    if (v && !v->is_null()) return {v, k};
  }
  return {nullptr, ""};
}

std::string quoted_keys(const std::vector<std::string>& keys) {
  std::vector<std::string> q;
  for (const auto& k : keys) q.push_back("'" + k + "'");
  return join(q, " or ");
}

Expected<std::string> architecture_of(const json& config, const std::string& display) {
  auto it = config.find("architectures");
  if (it == config.end() || it->is_null()) return std::string();
  if (!it->is_array()) return fail(fmt::format("{}: 'architectures' is {}, expected a list of strings", display, json_type(*it)));
  if (it->empty()) return std::string();
  if (!(*it)[0].is_string()) return fail(fmt::format("{}: 'architectures' must hold strings", display));
  return (*it)[0].get<std::string>();
}

std::string shape_text(const std::vector<double>& s) {
  std::vector<std::string> parts;
  for (double d : s) parts.push_back(fmt::format("{}", d));
  return "[" + join(parts, ", ") + "]";
}
std::string shape_text(const std::vector<std::uint64_t>& s) {
  std::vector<std::string> parts;
  for (auto d : s) parts.push_back(std::to_string(d));
  return "[" + join(parts, ", ") + "]";
}

struct Context {
  const Circuit& circuit;
  const CheckpointSource& src;
  const FormatChoice& choice;
  json config;
  std::string display;  // config.json as errors name it
  Env env;
  std::optional<QuantScheme> quant;
  std::optional<std::map<std::string, TensorInfo>> tensors;
  Format dtype = Format::bf16;        // the checkpoint's unquantized weight format (torch_dtype)
  std::string dtype_source;
  std::set<std::string> notes;
  std::map<std::string, std::pair<Format, std::string>> pre_formats;  // weight tensor -> format, source (tied lookups)
};

Expected<void> eval_params(Context& c, ModelGraph& g) {
  for (const auto& name : c.circuit.param_order) {
    const ParamDef& d = c.circuit.params.at(name);
    const std::string who = fmt::format("(circuit '{}' parameter '{}')", c.circuit.id, name);
    double v = 0;
    if (!d.keys.empty()) {
      auto [found, key] = first_present(c.config, d.keys);
      if (found) {
        if (found->is_boolean()) v = found->get<bool>() ? 1 : 0;
        else if (found->is_number()) v = found->get<double>();
        else return fail(fmt::format("{}: '{}' is {}, expected a number {}", c.display, key, json_type(*found), who));
      } else if (!d.default_value.empty()) {
        MET_TRY(v, d.default_value.number(c.env));
      } else {
        std::vector<std::string> nulls;
        for (const auto& k : d.keys) {
          const json* j = lookup(c.config, k);
          if (j && j->is_null()) nulls.push_back(k);
        }
        return fail(fmt::format("{}: missing {}{} {}", c.display, quoted_keys(d.keys),
                                nulls.empty() ? "" : fmt::format(" ({} is null)", quoted_keys(nulls)), who));
      }
    } else {
      MET_TRY(v, d.value.number(c.env));
    }
    if (!std::isfinite(v)) return fail(fmt::format("{}: value is not finite {}", c.display, who));
    c.env[name] = Value::num(v);
    g.params[name] = v;
  }
  return {};
}

Expected<std::vector<std::string>> base_schedule(Context& c, int count);

// The kinds of every layer, then KV sharing: the last shared_count layers take shared_map's kind of
// their own and read the caches of the last layer of their own kind before the first of them (as
// transformers' Gemma-4 stores and reuses them); kv_source is filled only when some layer shares.
Expected<std::vector<std::string>> schedule(Context& c, int count, std::vector<int>& kv_source) {
  MET_TRY(auto kinds, base_schedule(c, count));
  const LayerSchedule& s = c.circuit.layers;
  if (s.shared_count.empty()) return kinds;
  MET_TRY(double shared_v, s.shared_count.number(c.env));
  if (shared_v == 0) return kinds;
  if (shared_v < 0 || shared_v >= count || shared_v != std::floor(shared_v)) {
    return fail(fmt::format("{}: shared_count '{}' = {} is not a whole number of layers below the {} layers", s.where,
                            s.shared_count.text(), shared_v, count));
  }
  const int first = count - static_cast<int>(shared_v);
  kv_source.resize(static_cast<std::size_t>(count));
  for (int i = 0; i < count; ++i) kv_source[static_cast<std::size_t>(i)] = i;
  for (int i = first; i < count; ++i) {
    const std::string own = kinds[static_cast<std::size_t>(i)];
    int src = -1;
    for (int j = 0; j < first; ++j)
      if (kinds[static_cast<std::size_t>(j)] == own) src = j;
    if (src < 0) {
      return fail(fmt::format("{}: layer {} shares the KV of the last '{}' layer before layer {}, and there is none",
                              c.display, i, own, first));
    }
    auto it = s.shared_map.find(own);
    if (it == s.shared_map.end()) {
      return fail(fmt::format("{}: layer {} shares KV, but kind '{}' is not in shared_map of circuit '{}'", s.where, i, own,
                              c.circuit.id));
    }
    kinds[static_cast<std::size_t>(i)] = it->second;
    kv_source[static_cast<std::size_t>(i)] = src;
  }
  return kinds;
}

Expected<std::vector<std::string>> base_schedule(Context& c, int count) {
  const LayerSchedule& s = c.circuit.layers;
  std::vector<std::string> kinds;
  auto check_len = [&](std::size_t n, const std::string& key) -> Expected<void> {
    if (n != static_cast<std::size_t>(count)) {
      return fail(fmt::format("{}: '{}' has {} entries, but circuit '{}' counts {} layers ('{}')", c.display, key, n,
                              c.circuit.id, count, s.count.text()));
    }
    return {};
  };
  if (!s.kinds_key.empty()) {
    auto [found, key] = first_present(c.config, s.kinds_key);
    if (found) {
      if (!found->is_array()) return fail(fmt::format("{}: '{}' is {}, expected a list of strings", c.display, key, json_type(*found)));
      MET_CHECK(check_len(found->size(), key));
      std::vector<std::string> known;
      for (const auto& [k, v] : s.kinds_map) known.push_back(k);
      for (std::size_t i = 0; i < found->size(); ++i) {
        const json& e = (*found)[i];
        if (!e.is_string()) return fail(fmt::format("{}: '{}' entry {} is {}, expected a string", c.display, key, i, json_type(e)));
        auto it = s.kinds_map.find(e.get<std::string>());
        if (it == s.kinds_map.end()) {
          return fail(fmt::format("{}: '{}' entry {} '{}' is not in kinds_map of circuit '{}' (known: {})", c.display,
                                  key, i, e.get<std::string>(), c.circuit.id, join(known, ", ")));
        }
        kinds.push_back(it->second);
      }
      return kinds;
    }
  }
  if (!s.pattern_key.empty()) {
    auto [found, key] = first_present(c.config, s.pattern_key);
    if (found) {
      if (!found->is_string()) return fail(fmt::format("{}: '{}' is {}, expected a string", c.display, key, json_type(*found)));
      const std::string pat = found->get<std::string>();
      MET_CHECK(check_len(pat.size(), key));
      std::vector<std::string> known;
      for (const auto& [k, v] : s.pattern_map) known.push_back(k);
      for (std::size_t i = 0; i < pat.size(); ++i) {
        auto it = s.pattern_map.find(std::string(1, pat[i]));
        if (it == s.pattern_map.end()) {
          return fail(fmt::format("{}: '{}' character {} '{}' is not in pattern_map of circuit '{}' (known: {})",
                                  c.display, key, i, pat[i], c.circuit.id, join(known, ", ")));
        }
        kinds.push_back(it->second);
      }
      return kinds;
    }
  }
  // Layers an index_key selector lists (absent or null: none).
  std::vector<std::set<int>> listed(s.select.size());
  for (std::size_t k = 0; k < s.select.size(); ++k) {
    if (s.select[k].index_key.empty()) continue;
    auto [found, key] = first_present(c.config, s.select[k].index_key);
    if (!found) continue;
    if (!found->is_array()) {
      return fail(fmt::format("{}: '{}' is {}, expected a list of layer indices", c.display, key, json_type(*found)));
    }
    for (std::size_t e = 0; e < found->size(); ++e) {
      const json& v = (*found)[e];
      if (!v.is_number_integer() || v.get<std::int64_t>() < 0 || v.get<std::int64_t>() >= count) {
        return fail(fmt::format("{}: '{}' entry {} is not a layer index below {}", c.display, key, e, count));
      }
      listed[k].insert(static_cast<int>(v.get<std::int64_t>()));
    }
  }
  for (int i = 0; i < count; ++i) {
    Env env = c.env;
    env["i"] = Value::num(i);
    std::string kind;
    for (std::size_t k = 0; k < s.select.size(); ++k) {
      const auto& sel = s.select[k];
      double hit = listed[k].count(i) ? 1 : 0;
      if (!sel.when.empty()) {
        MET_TRY(hit, sel.when.number(env));
      }
      if (hit != 0) {
        kind = sel.kind;
        break;
      }
    }
    if (kind.empty()) kind = s.default_kind;
    if (kind.empty()) {
      return fail(fmt::format("{}: layer {}: no selector holds, no default kind, and the config has none of {}", s.where,
                              i, quoted_keys(s.kinds_key.empty() ? s.pattern_key : s.kinds_key)));
    }
    kinds.push_back(kind);
  }
  return kinds;
}

Expected<Format> header_format(const Context& c, const std::string& dtype, const std::string& ctx) {
  if (dtype == "BF16") return Format::bf16;
  if (dtype == "F16") return Format::f16;
  if (dtype == "F32") return Format::f32;
  if (dtype == "F8_E4M3") return Format::fp8_e4m3;
  if (dtype == "F8_E5M2") return Format::fp8_e5m2;
  if (dtype == "I8") return Format::int8;
  if (dtype == "U8") {
    if (c.quant && (c.quant->weight == Format::nvfp4 || c.quant->weight == Format::mxfp4)) return c.quant->weight;
    return fail(fmt::format("{}: dtype U8 holds packed 4-bit weights, but no quantization config names a 4-bit format", ctx));
  }
  return fail(fmt::format("{}: dtype {} cannot hold a weight", ctx, dtype));
}

// A per-expert node (experts > 0): every expert's tensors stack along dim 0 to one expert's
// slice of the node's [experts, rows, cols], and the checkpoint holds no expert past the last.
Expected<void> check_expert_shapes(const Context& c, const Node& node, const std::vector<const TensorInfo*>& ts,
                                   const std::vector<std::string>& names, int experts, const std::string& ctx) {
  const auto want = weight_shape(node);
  const std::size_t parts = ts.size() / static_cast<std::size_t>(experts);
  for (int e = 0; e < experts; ++e) {
    double rows = 0;
    bool ok = true;
    std::vector<std::string> listing;
    for (std::size_t k = static_cast<std::size_t>(e) * parts; k < (static_cast<std::size_t>(e) + 1) * parts; ++k) {
      ok = ok && ts[k]->shape.size() == 2 && static_cast<double>(ts[k]->shape[1]) == want[2];
      if (!ts[k]->shape.empty()) rows += static_cast<double>(ts[k]->shape[0]);
      listing.push_back(fmt::format("'{}' {} in {}", names[k], shape_text(ts[k]->shape), c.src.display(ts[k]->file)));
    }
    if (!ok || rows != want[1]) {
      return fail(fmt::format("{}: expert {}: tensor{} {} disagree{} with the expert's weight shape {}{} that config.json "
                              "gives ({} experts, the node's weight {})",
                              ctx, e, parts > 1 ? "s" : "", join(listing, ", "), parts > 1 ? "" : "s",
                              shape_text(std::vector<double>{want[1], want[2]}),
                              parts > 1 ? " (stacked along the first dimension)" : "", experts, shape_text(want)));
    }
  }
  const std::string past = expert_tensors({names[0]}, experts + 1).back();  // names[0] is expert 0's
  if (c.tensors->count(past)) {
    return fail(fmt::format("{}: the checkpoint holds '{}', past the {} experts config.json names", ctx, past, experts));
  }
  return {};
}

// Compares the tensors behind one node with the node's weight shape. Unpacked: exact, fused
// tensors stacked along dim 0. Packed 4-bit (U8): two elements per byte, element count only.
Expected<void> check_shapes(const Context& c, const Node& node, const std::vector<const TensorInfo*>& ts,
                            const std::vector<std::string>& names, bool packed, const std::string& ctx) {
  const auto want = weight_shape(node);
  double want_elems = 1;
  for (double d : want) want_elems *= d;
  auto listing = [&] {
    std::vector<std::string> parts;
    for (std::size_t k = 0; k < ts.size(); ++k) {
      parts.push_back(fmt::format("'{}' {} in {}", names[k], shape_text(ts[k]->shape), c.src.display(ts[k]->file)));
    }
    return join(parts, ", ");
  };
  if (packed) {
    double have = 0;
    for (const auto* t : ts) {
      double e = 1;
      for (auto d : t->shape) e *= static_cast<double>(d);
      have += e * 2;
    }
    if (have != want_elems) {
      return fail(fmt::format("{}: packed 4-bit tensors {} hold {} elements, the node's weight {} needs {}", ctx,
                              listing(), have, shape_text(want), want_elems));
    }
    return {};
  }
  double dim0 = 0;
  bool ok = true;
  for (const auto* t : ts) {
    if (t->shape.size() != want.size()) {
      ok = false;
      break;
    }
    for (std::size_t k = 1; k < want.size(); ++k) ok = ok && static_cast<double>(t->shape[k]) == want[k];
    if (!want.empty()) dim0 += static_cast<double>(t->shape[0]);
  }
  if (!want.empty()) ok = ok && dim0 == want[0];
  if (!ok) {
    return fail(fmt::format("{}: tensor{} {} disagree{} with the node's weight shape {}{}", ctx, ts.size() > 1 ? "s" : "",
                            listing(), ts.size() > 1 ? "" : "s", shape_text(want),
                            ts.size() > 1 ? " (stacked along the first dimension)" : ""));
  }
  return {};
}

// A fused expert node (gpt-oss): its one tensor bf16 [experts, in, out], or the MXFP4 pair
// `<name>_blocks` U8 [experts, out, in / 32, 16] and `<name>_scales` U8 [experts, out, in / 32]
// that a quantization_config of quant_method mxfp4 declares.
Expected<Format> fused_expert_format(const Context& c, const Node& node, const std::vector<std::string>& tensors,
                                     const std::string& ctx) {
  if (tensors.size() != 1) return fail(fmt::format("{}: an expert node of layout 1 names one tensor, not {}", ctx, tensors.size()));
  const std::string& name = tensors[0];
  auto shape_of = [](const TensorInfo& t) {
    std::vector<double> out;
    for (auto d : t.shape) out.push_back(static_cast<double>(d));
    return out;
  };
  const auto w = weight_shape(node);
  const std::string geometry = fmt::format("{} experts, {} outputs, {} inputs from config.json", w[0], w[1], w[2]);
  if (auto it = c.tensors->find(name); it != c.tensors->end()) {
    const TensorInfo& t = it->second;
    const std::string where_ = fmt::format("{}: tensor '{}' ({})", ctx, name, c.src.display(t.file));
    MET_TRY(Format f, header_format(c, t.dtype, where_));
    if (t.dtype == "U8") return fail(fmt::format("{}: U8, but an MXFP4 expert tensor is stored as '{}{}' and '{}{}'", where_, name, kBlocksSuffix, name, kScalesSuffix));
    if (shape_of(t) != fused_bf16_shape(node)) {
      return fail(fmt::format("{}: shape {} disagrees with [experts, in, out] = {} ({})", where_, shape_text(t.shape),
                              shape_text(fused_bf16_shape(node)), geometry));
    }
    return f;
  }
  const std::string blocks = name + std::string(kBlocksSuffix), scales = name + std::string(kScalesSuffix);
  auto b = c.tensors->find(blocks), s = c.tensors->find(scales);
  if (b == c.tensors->end() || s == c.tensors->end()) {
    return fail(fmt::format("{}: neither '{}' nor the MXFP4 pair '{}' and '{}' is in the safetensors headers of {}{}", ctx, name,
                            blocks, scales, c.src.name(),
                            b != c.tensors->end() || s != c.tensors->end() ? " (only one of the pair is)" : ""));
  }
  if (static_cast<int>(w[2]) % kMxfp4Group != 0) {
    return fail(fmt::format("{}: '{}': MXFP4 blocks of {} need an input size divisible by {} ({})", ctx, blocks, kMxfp4Group,
                            kMxfp4Group, geometry));
  }
  for (const auto& [it, want] : {std::pair{b, fused_blocks_shape(node)}, std::pair{s, fused_scales_shape(node)}}) {
    const TensorInfo& t = it->second;
    const std::string where_ = fmt::format("{}: tensor '{}' ({})", ctx, it->first, c.src.display(t.file));
    if (t.dtype != "U8") return fail(fmt::format("{}: {}, expected U8", where_, t.dtype));
    if (shape_of(t) != want) {
      return fail(fmt::format("{}: shape {} disagrees with {} ({})", where_, shape_text(t.shape), shape_text(want), geometry));
    }
  }
  const std::string where_ = fmt::format("{}: tensor '{}' ({})", ctx, blocks, c.src.display(b->second.file));
  MET_TRY(Format f, header_format(c, "U8", where_));
  if (f != Format::mxfp4) return fail(fmt::format("{}: blocks and scales of 32 are MXFP4, but {} declares {}", where_, c.quant->source, format_name(f)));
  return f;
}

// experts > 0: tensors are every expert's (expert_tensors), checked expert by expert.
Expected<void> assign_format(Context& c, Node& node, const std::vector<std::string>& tensors, bool tied, int experts,
                             const std::string& ctx) {
  const OpInfo* op = find_op(node.op);
  if (c.choice.basis == FormatChoice::Basis::recipe) {
    if (tied && c.pre_formats.count(tensors[0])) {
      std::tie(node.weight_format, node.format_source) = c.pre_formats.at(tensors[0]);
      return {};
    }
    const auto& w = c.choice.weights;
    std::optional<Format> f;
    if (!node.role.empty() && w.count(node.role)) f = w.at(node.role);
    else if (w.count(node.op)) f = w.at(node.op);
    else if (op->quantizable && w.count("default")) f = w.at("default");
    node.weight_format = f.value_or(Format::bf16);
    node.format_source = f ? "recipe" : "recipe (activation format: not a Linear weight)";
    return {};
  }
  Format f = c.dtype;
  std::string source = c.dtype_source;
  const bool quantized_by_config = c.quant && op->quantizable && node.role != "lm_head" && !tied &&
                                   std::none_of(tensors.begin(), tensors.end(), [&](const std::string& t) {
                                     return excluded(c.quant->exclude, t);
                                   });
  if (quantized_by_config) {
    f = c.quant->weight;
    source = c.quant->source;
  }
  if (c.tensors && fused_experts(node)) {
    MET_TRY(f, fused_expert_format(c, node, tensors, ctx));
    source = "safetensors header";
  } else if (c.tensors) {
    std::vector<const TensorInfo*> infos;
    for (const auto& t : tensors) {
      auto it = c.tensors->find(t);
      if (it == c.tensors->end()) {
        return fail(fmt::format("{}: tensor '{}' is not in the safetensors headers of {}{}", ctx, t, c.src.name(),
                                experts > 0 ? fmt::format(" (config.json names {} experts)", experts) : ""));
      }
      infos.push_back(&it->second);
    }
    for (std::size_t k = 1; k < infos.size(); ++k) {
      if (infos[k]->dtype != infos[0]->dtype) {
        return fail(fmt::format("{}: fused tensors disagree in dtype: '{}' is {}, '{}' is {}", ctx, tensors[0],
                                infos[0]->dtype, tensors[k], infos[k]->dtype));
      }
    }
    const std::string hctx = fmt::format("{}: tensor '{}' ({})", ctx, tensors[0], c.src.display(infos[0]->file));
    MET_TRY(Format hf, header_format(c, infos[0]->dtype, hctx));
    if (experts > 0 && infos[0]->dtype != "U8") {
      MET_CHECK(check_expert_shapes(c, node, infos, tensors, experts, ctx));
    } else {
      MET_CHECK(check_shapes(c, node, infos, tensors, infos[0]->dtype == "U8", ctx));
    }
    if (hf != f) {
      c.notes.insert(fmt::format("tensor '{}' is {} in its header where {} says {}", tensors[0], infos[0]->dtype, source,
                                 format_name(f)));
    }
    f = hf;
    source = "safetensors header";
  }
  node.weight_format = f;
  node.format_source = source;
  // Activations the checkpoint quantises with its own scales go with the weights it quantised.
  if (quantized_by_config && f == c.quant->weight) node.act_format = c.quant->act;
  return {};
}

// One template in one layer (layer < 0: pre/post). nullopt when `when` is 0.
Expected<std::optional<Node>> make_node(Context& c, const NodeTemplate& t, const Env& env, int layer) {
  if (!t.when.empty()) {
    MET_TRY(double on, t.when.number(env));
    if (on == 0) return std::optional<Node>{};
  }
  const OpInfo* op = find_op(t.op);
  Node n;
  n.op = t.op;
  n.role = t.role;
  n.where = t.where;
  for (const auto& [name, e] : t.params) {
    MET_TRY(double v, e.number(env));
    n.params[name] = v;
  }
  fill_defaults(*op, n.params);
  if (!has_weight(n)) return std::optional<Node>(std::move(n));
  const std::string ctx = layer >= 0 ? fmt::format("{}: {} layer {}", t.where, t.what, layer) : fmt::format("{}: {}", t.where, t.what);
  if (t.weight.empty()) return fail(fmt::format("{}: op '{}' has a weight for these params; name it with 'weight'", ctx, t.op));
  // Each dimension a positive int, the whole under 2^48 elements: sizes from config.json are
  // multiplied into byte counts and tensor names later.
  double elements = 1;
  for (double d : weight_shape(n)) {
    if (!(d >= 1) || d != std::floor(d) || d > std::numeric_limits<int>::max()) {
      return fail(fmt::format("{}: weight shape {} is not made of positive integers below 2^31", ctx,
                              shape_text(weight_shape(n))));
    }
    elements *= d;
  }
  if (elements > 0x1p48) {
    return fail(fmt::format("{}: weight shape {} holds {:.3g} elements, past 2^48", ctx, shape_text(weight_shape(n)), elements));
  }
  std::vector<std::string> tensors;
  const bool tied = !t.tied.empty() && c.env.count(kTieParam) && c.env.at(kTieParam).number != 0;
  const std::string& arch = c.env.at("arch").text;
  if (tied) tensors.push_back(tensor_name(c.circuit, arch, t.tied, layer));
  else
    for (const auto& w : t.weight) tensors.push_back(tensor_name(c.circuit, arch, w, layer));
  const int experts = !tied && per_expert(n, tensors) ? expert_count(n) : 0;
  if (experts > 0) tensors = expert_tensors(tensors, experts);
  n.tied = tied;
  n.weights = tensors;
  n.weight = tensors[0];
  MET_CHECK(assign_format(c, n, tensors, tied, experts, ctx));
  return std::optional<Node>(std::move(n));
}

std::string signature(const std::vector<Node>& nodes) {
  std::string s;
  for (const auto& n : nodes) {
    s += n.op + ":" + n.role + ":" + n.where + ":" + (n.tied ? "t" : "") + ":";
    s += n.weight_format ? std::string(format_name(*n.weight_format)) : "-";
    s += ":" + n.format_source;
    for (const auto& [k, v] : n.params) s += fmt::format(",{}={}", k, v);
    s += ";";
  }
  return s;
}

Expected<void> read_dtype(Context& c) {
  auto [found, key] = first_present(c.config, {"torch_dtype", "dtype", "text_config.torch_dtype", "text_config.dtype"});
  if (!found) {
    c.dtype = Format::bf16;
    c.dtype_source = "default bf16 (config.json names no torch_dtype)";
    return {};
  }
  if (!found->is_string()) return fail(fmt::format("{}: '{}' is {}, expected a string", c.display, key, json_type(*found)));
  const std::string d = found->get<std::string>();
  if (d == "bfloat16") c.dtype = Format::bf16;
  else if (d == "float16") c.dtype = Format::f16;
  else if (d == "float32") c.dtype = Format::f32;
  else return fail(fmt::format("{}: '{}' is '{}' (known: bfloat16, float16, float32)", c.display, key, d));
  c.dtype_source = "config.json " + key;
  return {};
}

}  // namespace

Expected<const Circuit*> circuit_for(const std::map<std::string, Circuit>& circuits, const std::string& architecture,
                                     const std::string& where_) {
  std::vector<std::string> known;
  for (const auto& [id, c] : circuits) {
    for (const auto& a : c.architectures) {
      if (a == architecture) return &c;
      known.push_back(a);
    }
  }
  std::sort(known.begin(), known.end());
  if (architecture.empty()) return fail(fmt::format("{}: no 'architectures' to pick a circuit by (known: {})", where_, join(known, ", ")));
  return fail(fmt::format("{}: architecture '{}' has no circuit (known: {})", where_, architecture, join(known, ", ")));
}

Expected<ModelGraph> instantiate(const Circuit& circuit, const CheckpointSource& config_source,
                                 const FormatChoice& formats, const std::string& id) {
  Context c{circuit, config_source, formats, {}, config_source.display(kConfigFile), {}, {}, {}, Format::bf16, {}, {}, {}};
  MET_TRY(c.config, read_config(config_source));
  ModelGraph g;
  g.id = id;
  g.circuit = circuit.id;
  MET_TRY(g.architecture, architecture_of(c.config, c.display));
  g.default_context = formats.context;
  c.env["arch"] = Value::str(g.architecture);
  MET_CHECK(eval_params(c, g));
  g.tied_embeddings = g.params.count(kTieParam) && g.params.at(kTieParam) != 0;

  if (formats.basis == FormatChoice::Basis::declared) {
    g.formats_basis = "declared";
    MET_CHECK(read_dtype(c));
    g.activation = c.dtype == Format::f16 ? Format::f16 : Format::bf16;
    MET_TRY(c.quant, read_quant(c.config, config_source));
    MET_TRY(c.tensors, read_checkpoint_tensors(config_source));
    g.kv = c.quant && c.quant->kv ? *c.quant->kv : g.activation;
    if (c.quant) {
      g.notes.push_back(c.quant->act
                            ? fmt::format("{} weights, {} activations ({}, {})", format_name(c.quant->weight),
                                          format_name(*c.quant->act), c.quant->method, c.quant->source)
                            : fmt::format("{} weights ({}, {})", format_name(c.quant->weight), c.quant->method, c.quant->source));
      for (const auto& n : c.quant->notes) g.notes.push_back(n);
      if (!c.quant->exclude.empty()) {
        const std::size_t shown = std::min<std::size_t>(c.quant->exclude.size(), 8);
        std::vector<std::string> first(c.quant->exclude.begin(), c.quant->exclude.begin() + static_cast<std::ptrdiff_t>(shown));
        g.notes.push_back(fmt::format("kept unquantized: {}{}", join(first, ", "),
                                      shown < c.quant->exclude.size() ? fmt::format(" and {} more", c.quant->exclude.size() - shown) : ""));
      }
    }
    if (!c.tensors) g.notes.push_back("no safetensors headers: formats from config.json alone");
  } else {
    g.formats_basis = "recipe";
    g.kv = formats.kv;
  }

  MET_TRY(double count_v, circuit.layers.count.number(c.env));
  if (count_v < 1 || count_v > kMaxLayers || count_v != std::floor(count_v)) {
    return fail(fmt::format("{}: layer count '{}' = {} is not a whole number in [1, {}]", circuit.layers.where,
                            circuit.layers.count.text(), count_v, kMaxLayers));
  }
  const int count = static_cast<int>(count_v);

  for (const auto& t : circuit.pre) {
    MET_TRY(auto n, make_node(c, t, c.env, -1));
    if (!n) continue;
    if (n->weight_format) c.pre_formats[n->weight] = {*n->weight_format, n->format_source};
    g.pre.push_back(std::move(*n));
  }
  MET_TRY(auto kinds, schedule(c, count, g.kv_source));
  std::map<std::pair<std::string, std::string>, int> group_of;  // (kind, signature) -> index in g.kinds
  for (int i = 0; i < count; ++i) {
    Env env = c.env;
    env["i"] = Value::num(i);
    std::vector<Node> nodes;
    for (const auto& t : circuit.kinds.at(kinds[static_cast<std::size_t>(i)])) {
      MET_TRY(auto n, make_node(c, t, env, i));
      if (n) nodes.push_back(std::move(*n));
    }
    const auto key = std::make_pair(kinds[static_cast<std::size_t>(i)], signature(nodes));
    auto it = group_of.find(key);
    if (it == group_of.end()) {
      it = group_of.emplace(key, static_cast<int>(g.kinds.size())).first;
      g.kinds.push_back(LayerGroup{kinds[static_cast<std::size_t>(i)], {}, std::move(nodes)});
    }
    g.kinds[static_cast<std::size_t>(it->second)].layers.push_back(i);
    g.layer_kinds.push_back(it->second);
  }
  for (const auto& t : circuit.post) {
    MET_TRY(auto n, make_node(c, t, c.env, -1));
    if (n) g.post.push_back(std::move(*n));
  }
  for (const auto& n : c.notes) g.notes.push_back(n);
  return g;
}

Expected<ModelGraph> instantiate_instance(const KernelTree& tree, const std::map<std::string, Circuit>& circuits,
                                          const Instance& instance, bool declared) {
  TreeCheckpoint src(tree, instance.config_dir);
  const Circuit* circuit = nullptr;
  if (instance.circuit) {
    auto it = circuits.find(*instance.circuit);
    if (it == circuits.end()) {
      std::vector<std::string> known;
      for (const auto& [id, cc] : circuits) known.push_back(id);
      return fail(fmt::format("{}: instance '{}': unknown circuit '{}' (known: {})", instance.location, instance.id,
                              *instance.circuit, join(known, ", ")));
    }
    circuit = &it->second;
  } else {
    MET_TRY(json config, read_config(src));
    MET_TRY(std::string arch, architecture_of(config, src.display(kConfigFile)));
    MET_TRY(circuit, circuit_for(circuits, arch, src.display(kConfigFile)));
  }
  FormatChoice choice = declared ? FormatChoice::declared() : FormatChoice::recipe(instance.weights, instance.kv);
  choice.context = instance.context;
  return instantiate(*circuit, src, choice, instance.id);
}

Expected<ModelGraph> instantiate_checkpoint(const KernelTree& tree, const std::map<std::string, Circuit>& circuits,
                                            const CheckpointSource& source) {
  (void)tree;  // the tree's circuits arrive already loaded; kept for symmetry with instantiate_instance
  MET_TRY(json config, read_config(source));
  MET_TRY(std::string arch, architecture_of(config, source.display(kConfigFile)));
  MET_TRY(const Circuit* circuit, circuit_for(circuits, arch, source.display(kConfigFile)));
  std::string id = source.name();
  std::transform(id.begin(), id.end(), id.begin(), [](unsigned char ch) { return static_cast<char>(std::tolower(ch)); });
  return instantiate(*circuit, source, FormatChoice::declared(), id);
}

}  // namespace met::model
