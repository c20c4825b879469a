// Quantization configs. Producers add keys freely between versions, so unknown keys inside a
// quantization config are tolerated; the keys read here are type-checked and an unknown method or
// algorithm is an error, never a silent bf16.
#include "model/quant.hpp"

#include <fmt/format.h>

#include <nlohmann/json.hpp>

namespace met::model {
namespace {

using json = nlohmann::json;

bool glob(std::string_view pat, std::string_view s) {
  // iterative '*' matcher with one backtrack point: linear in practice, no recursion
  std::size_t p = 0, k = 0, star = std::string_view::npos, mark = 0;
  while (k < s.size()) {
    if (p < pat.size() && pat[p] == '*') {
      star = p++;
      mark = k;
    } else if (p < pat.size() && pat[p] == s[k]) {
      ++p;
      ++k;
    } else if (star != std::string_view::npos) {
      p = star + 1;
      k = ++mark;
    } else {
      return false;
    }
  }
  while (p < pat.size() && pat[p] == '*') ++p;
  return p == pat.size();
}

Expected<std::vector<std::string>> string_list(const json& obj, const char* key, const std::string& ctx) {
  std::vector<std::string> out;
  if (!obj.contains(key) || obj[key].is_null()) return out;
  const json& arr = obj[key];
  if (!arr.is_array()) return fail(fmt::format("{}: '{}' must be a list of strings", ctx, key));
  for (const auto& e : arr) {
    if (!e.is_string()) return fail(fmt::format("{}: '{}' must be a list of strings", ctx, key));
    out.push_back(e.get<std::string>());
  }
  return out;
}

Expected<std::optional<std::string>> opt_string(const json& obj, const char* key, const std::string& ctx) {
  if (!obj.contains(key) || obj[key].is_null()) return std::optional<std::string>{};
  if (!obj[key].is_string()) return fail(fmt::format("{}: '{}' must be a string", ctx, key));
  return std::optional<std::string>{obj[key].get<std::string>()};
}

Expected<Format> algo_format(const std::string& algo, const std::string& ctx) {
  if (algo == "FP8") return Format::fp8_e4m3;
  if (algo == "NVFP4") return Format::nvfp4;
  if (algo == "MXFP4") return Format::mxfp4;
  return fail(fmt::format("{}: unsupported quant_algo '{}' (known: FP8, NVFP4, MXFP4)", ctx, algo));
}

// compressed-tensors style {num_bits, type} -> format
Expected<Format> bits_format(const json& w, const std::string& ctx) {
  if (!w.is_object()) return fail(fmt::format("{}: expected an object", ctx));
  if (!w.contains("num_bits") || !w["num_bits"].is_number_integer()) return fail(fmt::format("{}: 'num_bits' must be an integer", ctx));
  const auto bits = w["num_bits"].get<std::int64_t>();
  const std::string type = w.contains("type") && w["type"].is_string() ? w["type"].get<std::string>() : "int";
  std::int64_t group = 0;
  if (w.contains("group_size") && w["group_size"].is_number_integer()) group = w["group_size"].get<std::int64_t>();
  if (type == "float" && bits == 8) return Format::fp8_e4m3;
  if (type == "float" && bits == 4) return group == 32 ? Format::mxfp4 : Format::nvfp4;
  if (type == "int" && bits == 8) return Format::int8;
  if (type == "int" && bits == 4) return Format::int4;
  return fail(fmt::format("{}: unsupported weights of {} bits of type '{}'", ctx, bits, type));
}

// Activations a quantisation algorithm fixes with its own calibrated scales: modelopt's FP8
// (per-tensor input scales) and NVFP4 (a global input scale per Linear) quantise inputs as they
// do weights; its MXFP4 leaves activations alone.
std::optional<Format> algo_act(Format weight) {
  if (weight == Format::fp8_e4m3 || weight == Format::nvfp4) return weight;
  return std::nullopt;
}

void note_dynamic(QuantScheme& s, Format act, const std::string& said) {
  s.act_dynamic = true;
  s.notes.push_back(
      fmt::format("activations quantised to {} at run time ({}): the checkpoint fixes no activation format, so "
                  "each path says the one it computes in",
                  format_name(act), said));
}

// compressed-tensors `input_activations` of the config groups: static scales fix the activation
// format (W8A8, W4A4); `dynamic: true` leaves it to the runtime. Groups must agree.
Expected<void> group_acts(QuantScheme& s, const json& groups, const std::string& ctx) {
  std::optional<std::pair<Format, bool>> seen;
  for (const auto& [name, group] : groups.items()) {
    const std::string gctx = fmt::format("{}: config_groups '{}': input_activations", ctx, name);
    if (!group.is_object() || !group.contains("input_activations") || group["input_activations"].is_null()) continue;
    const json& a = group["input_activations"];
    MET_TRY(Format f, bits_format(a, gctx));
    const bool dynamic = a.is_object() && a.contains("dynamic") && a["dynamic"].is_boolean() && a["dynamic"].get<bool>();
    if (seen && (seen->first != f || seen->second != dynamic))
      return fail(fmt::format("{}: groups of different activation schemes are not supported", gctx));
    seen = std::make_pair(f, dynamic);
  }
  if (!seen) return {};
  if (seen->second)
    note_dynamic(s, seen->first, "input_activations dynamic");
  else
    s.act = seen->first;
  return {};
}

Expected<std::optional<Format>> kv_scheme(const json& q, const std::string& ctx) {
  if (!q.contains("kv_cache_scheme") || q["kv_cache_scheme"].is_null()) return std::optional<Format>{};
  MET_TRY(Format f, bits_format(q["kv_cache_scheme"], ctx + ": kv_cache_scheme"));
  return std::optional<Format>{f};
}

Expected<QuantScheme> from_quantization_config(const json& q, const std::string& ctx) {
  if (!q.is_object()) return fail(fmt::format("{}: expected an object", ctx));
  QuantScheme s;
  s.source = "config.json quantization_config";
  MET_TRY(auto method, opt_string(q, "quant_method", ctx));
  if (!method) return fail(fmt::format("{}: missing 'quant_method'", ctx));
  s.method = *method;
  if (s.method == "fp8") {
    MET_TRY(auto fmt_, opt_string(q, "fmt", ctx));
    if (!fmt_ || *fmt_ == "e4m3") s.weight = Format::fp8_e4m3;
    else if (*fmt_ == "e5m2") s.weight = Format::fp8_e5m2;
    else return fail(fmt::format("{}: unsupported fp8 fmt '{}' (known: e4m3, e5m2)", ctx, *fmt_));
    MET_TRY(s.exclude, string_list(q, "modules_to_not_convert", ctx));
    MET_TRY(auto scheme, opt_string(q, "activation_scheme", ctx));
    if (scheme && *scheme == "static")
      s.act = s.weight;
    else if (scheme && *scheme == "dynamic")
      note_dynamic(s, s.weight, "activation_scheme dynamic");
    else if (scheme)
      return fail(fmt::format("{}: unsupported activation_scheme '{}' (known: dynamic, static)", ctx, *scheme));
    if (q.contains("weight_block_size") && !q["weight_block_size"].is_null()) {
      const json& b = q["weight_block_size"];
      if (!b.is_array() || b.size() != 2 || !b[0].is_number_integer() || !b[1].is_number_integer()) {
        return fail(fmt::format("{}: 'weight_block_size' must be two integers", ctx));
      }
      s.block = {b[0].get<std::int64_t>(), b[1].get<std::int64_t>()};
      s.notes.push_back(fmt::format("fp8 weights scaled per {}x{} block", s.block[0], s.block[1]));
    }
    return s;
  }
  if (s.method == "mxfp4") {
    s.weight = Format::mxfp4;
    MET_TRY(s.exclude, string_list(q, "modules_to_not_convert", ctx));
    return s;
  }
  if (s.method == "modelopt" || s.method == "compressed-tensors") {
    MET_TRY(s.exclude, string_list(q, "ignore", ctx));
    MET_TRY(s.kv, kv_scheme(q, ctx));
    MET_TRY(auto algo, opt_string(q, "quant_algo", ctx));
    const bool groups = q.contains("config_groups") && q["config_groups"].is_object() && !q["config_groups"].empty();
    if (algo) {
      MET_TRY(s.weight, algo_format(*algo, ctx));
      if (groups)
        MET_CHECK(group_acts(s, q["config_groups"], ctx));
      else
        s.act = algo_act(s.weight);
      return s;
    }
    if (!groups) return fail(fmt::format("{}: {} needs 'quant_algo' or 'config_groups'", ctx, s.method));
    std::optional<Format> seen;
    for (const auto& [name, group] : q["config_groups"].items()) {
      const std::string gctx = fmt::format("{}: config_groups '{}'", ctx, name);
      if (!group.is_object() || !group.contains("weights")) return fail(gctx + ": missing 'weights'");
      MET_TRY(Format f, bits_format(group["weights"], gctx + ": weights"));
      if (seen && *seen != f) return fail(fmt::format("{}: groups of different weight formats are not supported", gctx));
      seen = f;
    }
    s.weight = *seen;
    MET_CHECK(group_acts(s, q["config_groups"], ctx));
    return s;
  }
  return fail(fmt::format("{}: unsupported quant_method '{}' (known: compressed-tensors, fp8, modelopt, mxfp4)", ctx,
                          s.method));
}

Expected<QuantScheme> from_hf_quant(const json& root, const std::string& ctx) {
  if (!root.is_object() || !root.contains("quantization") || !root["quantization"].is_object()) {
    return fail(fmt::format("{}: missing object 'quantization'", ctx));
  }
  const json& q = root["quantization"];
  QuantScheme s;
  s.method = "modelopt";
  s.source = kHfQuantFile;
  MET_TRY(auto algo, opt_string(q, "quant_algo", ctx));
  if (!algo) return fail(fmt::format("{}: missing 'quant_algo'", ctx));
  MET_TRY(s.weight, algo_format(*algo, ctx));
  s.act = algo_act(s.weight);
  MET_TRY(s.exclude, string_list(q, "exclude_modules", ctx));
  MET_TRY(auto kv, opt_string(q, "kv_cache_quant_algo", ctx));
  if (kv) {
    if (*kv == "FP8") s.kv = Format::fp8_e4m3;
    else return fail(fmt::format("{}: unsupported kv_cache_quant_algo '{}' (known: FP8)", ctx, *kv));
  }
  if (q.contains("group_size") && q["group_size"].is_number_integer()) {
    s.notes.push_back(fmt::format("{} weights scaled per group of {}", *algo, q["group_size"].get<std::int64_t>()));
  }
  return s;
}

}  // namespace

bool excluded(const std::vector<std::string>& patterns, const std::string& tensor) {
  for (const auto& pat : patterns) {
    for (std::size_t end = 0; end <= tensor.size(); ++end) {
      if (end != tensor.size() && tensor[end] != '.') continue;
      if (glob(pat, std::string_view(tensor).substr(0, end))) return true;
    }
  }
  return false;
}

Expected<std::optional<QuantScheme>> read_quant(const json& config, const CheckpointSource& src) {
  std::optional<QuantScheme> from_config, from_sidecar;
  if (config.contains("quantization_config") && !config["quantization_config"].is_null()) {
    MET_TRY(QuantScheme s, from_quantization_config(config["quantization_config"],
                                                    src.display("config.json") + ": quantization_config"));
    from_config = std::move(s);
  }
  if (src.exists(kHfQuantFile)) {
    const std::string display = src.display(kHfQuantFile);
    MET_TRY(std::string text, src.read(kHfQuantFile));
    json root;
    try {
      root = json::parse(text);
    } catch (const json::exception& e) {
      return fail(fmt::format("{}: invalid json: {}", display, e.what()));
    }
    MET_TRY(QuantScheme s, from_hf_quant(root, display));
    from_sidecar = std::move(s);
  }
  if (from_config && from_sidecar && from_config->weight != from_sidecar->weight) {
    return fail(fmt::format("{}: quant_algo says {} but config.json quantization_config says {}", src.display(kHfQuantFile),
                            format_name(from_sidecar->weight), format_name(from_config->weight)));
  }
  if (from_config) {
    if (!from_config->kv && from_sidecar) from_config->kv = from_sidecar->kv;
    if (!from_config->act && !from_config->act_dynamic && from_sidecar) from_config->act = from_sidecar->act;
    return from_config;
  }
  return from_sidecar;
}

}  // namespace met::model
