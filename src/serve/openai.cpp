// Strict request parsing. A JSON null counts as absent (the OpenAI API accepts null for every
// optional field); anything else of the wrong type, out of range, or not known is refused.
#include "serve/openai.hpp"

#include <algorithm>
#include <cctype>
#include <functional>
#include <limits>
#include <set>

namespace met::serve {
namespace {

using Json = nlohmann::ordered_json;

// JSON text nesting past max_depth levels is refused while parsing (too_deep): nothing deeper is
// built, so no recursive copy, dump or conversion of it ever sees more.
Json parse_bounded(std::string_view text, int max_depth, bool& too_deep) {
  too_deep = false;
  const Json::parser_callback_t depth_check = [&too_deep, max_depth](int depth, Json::parse_event_t event, Json&) {
    if ((event == Json::parse_event_t::object_start || event == Json::parse_event_t::array_start) && depth >= max_depth)
      too_deep = true;
    return !too_deep;
  };
  return Json::parse(text, depth_check, /*allow_exceptions=*/false);
}

// The body (the chat template's context among it) never nests deeper than kMaxJsonDepth levels.
ApiResult<Json> parse_object(std::string_view body) {
  bool too_deep = false;
  Json j = parse_bounded(body, kMaxJsonDepth, too_deep);
  if (too_deep)
    return invalid("the request body nests deeper than " + std::to_string(kMaxJsonDepth) + " levels", "", "invalid_json");
  if (j.is_discarded()) return invalid("the request body is not valid JSON", "", "invalid_json");
  if (!j.is_object()) return invalid("the request body must be a JSON object", "", "invalid_json");
  return j;
}

std::optional<ApiError> unknown_fields(const Json& j, const std::set<std::string>& known) {
  for (const auto& [k, v] : j.items())
    if (!known.count(k)) return invalid("unknown field '" + k + "'", k, "unknown_field");
  return std::nullopt;
}

ApiError wrong_type(const std::string& field, const std::string& want) {
  return invalid("'" + field + "' must be " + want, field, "invalid_type");
}

bool present(const Json& j, const char* key) { return j.contains(key) && !j[key].is_null(); }

std::optional<ApiError> get_int(const Json& j, const char* key, std::optional<std::int64_t>& out) {
  if (!present(j, key)) return std::nullopt;
  const auto& v = j[key];
  if (v.is_number_unsigned()) {
    if (v.get<std::uint64_t>() > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max()))
      return invalid(std::string("'") + key + "' is too large", key);
    out = static_cast<std::int64_t>(v.get<std::uint64_t>());
  } else if (v.is_number_integer()) {
    out = v.get<std::int64_t>();
  } else {
    return wrong_type(key, "an integer");
  }
  return std::nullopt;
}

std::optional<ApiError> get_number(const Json& j, const char* key, double& out) {
  if (!present(j, key)) return std::nullopt;
  if (!j[key].is_number()) return wrong_type(key, "a number");
  out = j[key].get<double>();
  return std::nullopt;
}

std::optional<ApiError> get_bool(const Json& j, const char* key, bool& out) {
  if (!present(j, key)) return std::nullopt;
  if (!j[key].is_boolean()) return wrong_type(key, "a boolean");
  out = j[key].get<bool>();
  return std::nullopt;
}

std::optional<ApiError> get_string(const Json& j, const char* key, std::string& out) {
  if (!present(j, key)) return std::nullopt;
  if (!j[key].is_string()) return wrong_type(key, "a string");
  out = j[key].get<std::string>();
  return std::nullopt;
}

// An OpenAI field met does not implement, accepted only at the value that asks for nothing
// (clients send the defaults explicitly): `neutral` says which values those are.
std::optional<ApiError> only_neutral(const Json& j, const char* key, const std::function<bool(const Json&)>& neutral,
                                     const std::string& accepted) {
  if (!j.contains(key) || neutral(j[key])) return std::nullopt;
  return invalid(std::string("'") + key + "' is not supported; only " + accepted + " is accepted", key, "unsupported_value");
}

std::optional<ApiError> get_ids(const Json& v, const std::string& field, std::vector<std::int32_t>& out) {
  for (const auto& e : v) {
    if (!e.is_number_integer()) return wrong_type(field, "a string or a list of token ids");
    const auto id = e.get<std::int64_t>();
    if (id < 0 || id > std::numeric_limits<std::int32_t>::max())
      return invalid("'" + field + "' holds token id " + std::to_string(id) + ", outside the vocabulary", field);
    out.push_back(static_cast<std::int32_t>(id));
  }
  return std::nullopt;
}

// An OpenAI client sends a call's arguments back as JSON text; templates take the object (Gemma-4's
// refuses text), so, as vLLM does, the text is parsed and a null or empty one is the empty object.
// The parsed value sits five levels down in the body (messages[i].tool_calls[j].function), so it
// may nest only as deep as the body's bound leaves. Calls without a function object pass as they are.
std::optional<ApiError> arguments_as_objects(Json& calls, const std::string& where) {
  constexpr int kArgumentsAt = 5;
  for (std::size_t c = 0; c < calls.size(); ++c) {
    if (!calls[c].contains("function") || !calls[c]["function"].is_object()) continue;
    auto& fn = calls[c]["function"];
    const std::string param = where + ".tool_calls[" + std::to_string(c) + "].function.arguments";
    if (!fn.contains("arguments") || fn["arguments"].is_null() || fn["arguments"] == "") {
      fn["arguments"] = Json::object();
    } else if (fn["arguments"].is_string()) {
      bool too_deep = false;
      Json parsed = parse_bounded(fn["arguments"].get<std::string>(), kMaxJsonDepth - kArgumentsAt, too_deep);
      if (too_deep) return invalid("'" + param + "' nests deeper than the request body may", param);
      if (parsed.is_discarded()) return invalid("'" + param + "' is not valid JSON", param);
      fn["arguments"] = std::move(parsed);
    }
  }
  return std::nullopt;
}

// A message's content as the chat template sees it: a string (text parts joined by newlines) or null.
std::optional<ApiError> normalise_messages(const Json& in, Json& out) {
  if (!in.is_array()) return wrong_type("messages", "a list of messages");
  if (in.empty()) return invalid("'messages' must hold at least one message", "messages");
  static const std::set<std::string> kRoles = {"system", "developer", "user", "assistant", "tool"};
  out = Json::array();
  for (std::size_t i = 0; i < in.size(); ++i) {
    const std::string where = "messages[" + std::to_string(i) + "]";
    const auto& m = in[i];
    if (!m.is_object()) return wrong_type(where, "an object");
    if (!m.contains("role") || !m["role"].is_string()) return wrong_type(where + ".role", "a string");
    if (!kRoles.count(m["role"].get<std::string>()))
      return invalid(where + ".role '" + m["role"].get<std::string>() + "' is not one of system, developer, user, assistant, tool",
                     where + ".role");
    // OpenAI requires content except on an assistant message that carries tool calls; a template
    // handed a null content fails deep inside itself, so it is refused here by name.
    const bool calls = m["role"] == "assistant" && present(m, "tool_calls");
    if (!present(m, "content") && !calls)
      return invalid("'" + where + ".content' is required", where + ".content", "missing_required_parameter");
    if (calls && !(m["tool_calls"].is_array() && std::all_of(m["tool_calls"].begin(), m["tool_calls"].end(),
                                                             [](const Json& c) { return c.is_object(); })))
      return wrong_type(where + ".tool_calls", "a list of tool call objects");
    Json msg = m;
    // The assistant turn that only called tools: its content is the empty text, as templates that
    // test or search content expect (OpenAI clients send it back as null).
    if (calls && !present(m, "content")) msg["content"] = "";
    if (calls)
      if (auto e = arguments_as_objects(msg["tool_calls"], where)) return *e;
    if (m.contains("content") && m["content"].is_array()) {
      std::string text;
      for (std::size_t p = 0; p < m["content"].size(); ++p) {
        const auto& part = m["content"][p];
        const std::string pw = where + ".content[" + std::to_string(p) + "]";
        if (!part.is_object() || !part.contains("type") || part["type"] != "text" || !part.contains("text") || !part["text"].is_string())
          return invalid(pw + ": only {\"type\": \"text\", \"text\": ...} parts are supported", pw);
        text += (p ? "\n" : "") + part["text"].get<std::string>();
      }
      msg["content"] = text;
    } else if (m.contains("content") && !m["content"].is_string() && !m["content"].is_null()) {
      return wrong_type(where + ".content", "a string, a list of text parts or null");
    }
    out.push_back(std::move(msg));
  }
  return std::nullopt;
}

// OpenAI's tools: [{"type": "function", "function": {"name", "description"?, "parameters"?,
// "strict"?}}], names unique; kept as given for the chat template.
std::optional<ApiError> parse_tools(const Json& in, Json& out, std::vector<std::string>& names) {
  if (!in.is_array()) return wrong_type("tools", "a list of tools");
  if (in.size() > kMaxTools) return invalid("'tools' holds more than " + std::to_string(kMaxTools) + " tools", "tools");
  for (std::size_t i = 0; i < in.size(); ++i) {
    const std::string where = "tools[" + std::to_string(i) + "]";
    const auto& t = in[i];
    if (!t.is_object()) return wrong_type(where, "an object");
    for (const auto& [k, v] : t.items())
      if (k != "type" && k != "function") return invalid("unknown field '" + where + "." + k + "'", where + "." + k, "unknown_field");
    if (!t.contains("type") || t["type"] != "function")
      return invalid("'" + where + ".type' must be \"function\"", where + ".type");
    if (!t.contains("function") || !t["function"].is_object()) return wrong_type(where + ".function", "an object");
    const auto& f = t["function"];
    for (const auto& [k, v] : f.items())
      if (k != "name" && k != "description" && k != "parameters" && k != "strict")
        return invalid("unknown field '" + where + ".function." + k + "'", where + ".function." + k, "unknown_field");
    if (!f.contains("name") || !f["name"].is_string()) return wrong_type(where + ".function.name", "a string");
    const auto name = f["name"].get<std::string>();
    const bool ok = !name.empty() && name.size() <= 64 && std::all_of(name.begin(), name.end(), [](unsigned char c) {
      return std::isalnum(c) || c == '_' || c == '-';
    });
    if (!ok) return invalid("'" + where + ".function.name' must be 1 to 64 of a-z, A-Z, 0-9, _ and -", where + ".function.name");
    if (std::find(names.begin(), names.end(), name) != names.end())
      return invalid("two tools are named '" + name + "'", where + ".function.name");
    if (f.contains("description") && !f["description"].is_string()) return wrong_type(where + ".function.description", "a string");
    if (f.contains("parameters") && !f["parameters"].is_object()) return wrong_type(where + ".function.parameters", "an object");
    if (f.contains("strict") && !f["strict"].is_boolean() && !f["strict"].is_null())
      return wrong_type(where + ".function.strict", "a boolean");
    names.push_back(name);
  }
  out = in;
  return std::nullopt;
}

}  // namespace

nlohmann::json error_envelope(const ApiError& e) {
  nlohmann::json err = {{"message", e.message}, {"type", e.type}, {"param", nullptr}, {"code", nullptr}};
  if (!e.param.empty()) err["param"] = e.param;
  if (!e.code.empty()) err["code"] = e.code;
  return {{"error", err}};
}

ApiError invalid(const std::string& message, const std::string& param, const std::string& code) {
  return ApiError{400, message, "invalid_request_error", param, code};
}

ApiResult<GenerationRequest> parse_generation(Endpoint endpoint, std::string_view body) {
  auto parsed = parse_object(body);
  if (auto* e = std::get_if<ApiError>(&parsed)) return *e;
  const Json& j = std::get<Json>(parsed);
  const bool chat = endpoint == Endpoint::chat;
  std::set<std::string> known = {"model",
                                 "max_tokens",
                                 "stop",
                                 "temperature",
                                 "top_p",
                                 "top_k",
                                 "seed",
                                 "stream",
                                 "stream_options",
                                 "ignore_eos",
                                 "n",
                                 "user",
                                 "presence_penalty",
                                 "frequency_penalty",
                                 "logprobs",
                                 "logit_bias"};
  known.insert(chat ? "messages" : "prompt");
  if (chat) known.insert({"max_completion_tokens", "top_logprobs", "tools", "tool_choice", "parallel_tool_calls"});
  if (auto e = unknown_fields(j, known)) return *e;
  auto zero = [](const Json& v) { return v.is_null() || (v.is_number() && v.get<double>() == 0.0); };
  auto no_bias = [](const Json& v) { return v.is_null() || (v.is_object() && v.empty()); };
  for (const char* key : {"presence_penalty", "frequency_penalty"})
    if (auto e = only_neutral(j, key, zero, "0")) return *e;
  if (auto e = only_neutral(j, "logit_bias", no_bias, "null or {}")) return *e;
  GenerationRequest r;
  // Log-probabilities. Chat: "logprobs": true, with "top_logprobs" alternatives (0 to 20; only with
  // logprobs true). Completions: "logprobs": N alternatives (0 to 20), null for none.
  std::optional<std::int64_t> top;
  if (chat) {
    bool want = false;
    if (auto e = get_bool(j, "logprobs", want)) return *e;
    if (auto e = get_int(j, "top_logprobs", top)) return *e;
    if (top && *top != 0 && !want) return invalid("'top_logprobs' needs 'logprobs': true", "top_logprobs");
    if (!want) top.reset();  // 0 alternatives of no log-probabilities: the neutral value clients send
    if (want) r.logprobs = 0;
  } else if (auto e = get_int(j, "logprobs", top)) {
    return *e;
  }
  if (top) {
    const char* key = chat ? "top_logprobs" : "logprobs";
    if (*top < 0 || *top > kMaxLogprobs)
      return invalid(std::string("'") + key + "' must be from 0 to " + std::to_string(kMaxLogprobs), key);
    r.logprobs = static_cast<int>(*top);
  }
  if (!present(j, "model")) return invalid("'model' is required", "model", "missing_required_parameter");
  if (auto e = get_string(j, "model", r.model)) return *e;
  if (chat) {
    if (!present(j, "messages")) return invalid("'messages' is required", "messages", "missing_required_parameter");
    if (auto e = normalise_messages(j["messages"], r.messages)) return *e;
    if (present(j, "tools"))
      if (auto e = parse_tools(j["tools"], r.tools, r.tool_names)) return *e;
    // tool_choice: "auto" (the default with tools) parses calls out of the answer; "none" renders
    // the tools but parses nothing. Forcing a call ("required", or a named function) would take
    // constrained decoding, which met does not have.
    std::string choice = r.tools.is_null() || r.tools.empty() ? "none" : "auto";
    if (present(j, "tool_choice")) {
      if (r.tools.is_null()) return invalid("'tool_choice' is only allowed when 'tools' are given", "tool_choice");
      const auto& c = j["tool_choice"];
      if (c.is_object()) return invalid("'tool_choice' naming a function is not supported (met cannot force a call); use \"auto\" or \"none\"", "tool_choice", "unsupported_value");
      if (!c.is_string()) return wrong_type("tool_choice", "\"auto\" or \"none\"");
      choice = c.get<std::string>();
      if (choice == "required")
        return invalid("'tool_choice' \"required\" is not supported (met cannot force a call); use \"auto\" or \"none\"", "tool_choice", "unsupported_value");
      if (choice != "auto" && choice != "none") return invalid("'tool_choice' must be \"auto\" or \"none\"", "tool_choice");
    }
    r.tool_calls = choice == "auto" && !r.tool_names.empty();
    if (auto e = get_bool(j, "parallel_tool_calls", r.parallel_tool_calls)) return *e;
  } else {
    if (!present(j, "prompt")) return invalid("'prompt' is required", "prompt", "missing_required_parameter");
    const auto& p = j["prompt"];
    if (p.is_string()) {
      r.prompt_text = p.get<std::string>();
    } else if (p.is_array() && !p.empty() && p[0].is_number_integer()) {
      std::vector<std::int32_t> ids;
      if (auto e = get_ids(p, "prompt", ids)) return *e;
      r.prompt_ids = std::move(ids);
    } else if (p.is_array() && p.size() == 1 && p[0].is_string()) {
      r.prompt_text = p[0].get<std::string>();
    } else if (p.is_array() && !p.empty() && (p[0].is_string() || p[0].is_array())) {
      return invalid("'prompt' holds several prompts; send one per request", "prompt", "unsupported_value");
    } else {
      return wrong_type("prompt", "a string or a list of token ids");
    }
    if ((r.prompt_text && r.prompt_text->empty()) || (r.prompt_ids && r.prompt_ids->empty()))
      return invalid("'prompt' is empty", "prompt");
  }
  std::optional<std::int64_t> n, max_tokens, max_completion, seed;
  if (auto e = get_int(j, "n", n)) return *e;
  if (n && *n != 1) return invalid("'n' must be 1: one choice per request", "n", "unsupported_value");
  if (auto e = get_int(j, "max_tokens", max_tokens)) return *e;
  if (chat)
    if (auto e = get_int(j, "max_completion_tokens", max_completion)) return *e;
  r.max_tokens = max_completion ? max_completion : max_tokens;
  if (r.max_tokens && *r.max_tokens < 1)
    return invalid("'max_tokens' must be at least 1", max_completion ? "max_completion_tokens" : "max_tokens");
  if (auto e = get_number(j, "temperature", r.temperature)) return *e;
  if (r.temperature < 0 || r.temperature > 2) return invalid("'temperature' must be in [0, 2]", "temperature");
  if (auto e = get_number(j, "top_p", r.top_p)) return *e;
  if (!(r.top_p > 0 && r.top_p <= 1)) return invalid("'top_p' must be in (0, 1]", "top_p");
  std::optional<std::int64_t> top_k;  // vLLM's extension: -1 or 0 is off
  if (auto e = get_int(j, "top_k", top_k)) return *e;
  if (top_k && (*top_k < -1 || *top_k > (std::int64_t{1} << 24))) return invalid("'top_k' must be -1, 0 (off) or a count of tokens", "top_k");
  r.top_k = top_k && *top_k > 0 ? static_cast<std::int32_t>(*top_k) : 0;
  if (auto e = get_int(j, "seed", seed)) return *e;
  if (seed) r.seed = static_cast<std::uint64_t>(*seed);
  if (auto e = get_bool(j, "stream", r.stream)) return *e;
  if (auto e = get_bool(j, "ignore_eos", r.ignore_eos)) return *e;
  std::string user;
  if (auto e = get_string(j, "user", user)) return *e;
  if (present(j, "stop")) {
    const auto& s = j["stop"];
    if (s.is_string()) {
      r.stop.push_back(s.get<std::string>());
    } else if (s.is_array()) {
      for (const auto& e : s) {
        if (!e.is_string()) return wrong_type("stop", "a string or a list of strings");
        r.stop.push_back(e.get<std::string>());
      }
    } else {
      return wrong_type("stop", "a string or a list of strings");
    }
    if (r.stop.size() > kMaxStops) return invalid("'stop' holds more than " + std::to_string(kMaxStops) + " strings", "stop");
    for (const auto& e : r.stop) {
      if (e.empty()) return invalid("'stop' strings must not be empty", "stop");
      if (e.size() > kMaxStopBytes)
        return invalid("'stop' strings must be at most " + std::to_string(kMaxStopBytes) + " bytes", "stop");
    }
  }
  if (present(j, "stream_options")) {
    const auto& o = j["stream_options"];
    if (!o.is_object()) return wrong_type("stream_options", "an object");
    if (!r.stream) return invalid("'stream_options' is only allowed with 'stream': true", "stream_options");
    for (const auto& [k, v] : o.items())
      if (k != "include_usage") return invalid("unknown field 'stream_options." + k + "'", "stream_options." + k, "unknown_field");
    if (auto e = get_bool(o, "include_usage", r.include_usage)) {
      e->param = "stream_options.include_usage";
      e->message = "'stream_options.include_usage' must be a boolean";
      return *e;
    }
  }
  return r;
}

ApiResult<TokenizeRequest> parse_tokenize(std::string_view body) {
  auto parsed = parse_object(body);
  if (auto* e = std::get_if<ApiError>(&parsed)) return *e;
  const Json& j = std::get<Json>(parsed);
  if (auto e = unknown_fields(j, {"model", "prompt", "messages", "tools", "add_special_tokens", "add_generation_prompt"})) return *e;
  TokenizeRequest r;
  if (auto e = get_string(j, "model", r.model)) return *e;
  if (present(j, "prompt") == present(j, "messages")) return invalid("give exactly one of 'prompt' and 'messages'", "prompt");
  if (present(j, "prompt")) {
    std::string p;
    if (auto e = get_string(j, "prompt", p)) return *e;
    r.prompt = std::move(p);
  } else if (auto e = normalise_messages(j["messages"], r.messages)) {
    return *e;
  }
  if (present(j, "tools")) {
    if (!present(j, "messages")) return invalid("'tools' goes with 'messages'", "tools");
    std::vector<std::string> names;
    if (auto e = parse_tools(j["tools"], r.tools, names)) return *e;
  }
  if (present(j, "add_special_tokens")) {
    bool b = false;
    if (auto e = get_bool(j, "add_special_tokens", b)) return *e;
    r.add_special_tokens = b;
  }
  if (auto e = get_bool(j, "add_generation_prompt", r.add_generation_prompt)) return *e;
  return r;
}

ApiResult<DetokenizeRequest> parse_detokenize(std::string_view body) {
  auto parsed = parse_object(body);
  if (auto* e = std::get_if<ApiError>(&parsed)) return *e;
  const Json& j = std::get<Json>(parsed);
  if (auto e = unknown_fields(j, {"model", "tokens"})) return *e;
  DetokenizeRequest r;
  if (auto e = get_string(j, "model", r.model)) return *e;
  if (!present(j, "tokens")) return invalid("'tokens' is required", "tokens", "missing_required_parameter");
  if (!j["tokens"].is_array()) return wrong_type("tokens", "a list of token ids");
  if (auto e = get_ids(j["tokens"], "tokens", r.tokens)) return *e;
  return r;
}

}  // namespace met::serve
