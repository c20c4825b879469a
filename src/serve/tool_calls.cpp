#include "serve/tool_calls.hpp"

#include <algorithm>

namespace met::serve {
namespace {

using Json = nlohmann::json;

constexpr std::string_view kOpen = "<tool_call>";
constexpr std::string_view kClose = "</tool_call>";
constexpr std::string_view kPythonTag = "<|python_tag|>";

std::string_view trim(std::string_view s) {
  const auto first = s.find_first_not_of(" \t\r\n");
  if (first == std::string_view::npos) return {};
  return s.substr(first, s.find_last_not_of(" \t\r\n") - first + 1);
}

bool declared_name(const std::vector<std::string>& declared, const std::string& name) {
  return std::find(declared.begin(), declared.end(), name) != declared.end();
}

// {"name": NAME, <args_key>: {...}} with NAME declared; the arguments serialised.
std::optional<ToolCall> call_of(std::string_view text, const std::vector<std::string>& declared,
                                std::initializer_list<const char*> args_keys) {
  const Json j = Json::parse(text.begin(), text.end(), nullptr, /*allow_exceptions=*/false);
  if (!j.is_object() || !j.contains("name") || !j["name"].is_string()) return std::nullopt;
  ToolCall c{j["name"].get<std::string>(), "{}"};
  if (!declared_name(declared, c.name)) return std::nullopt;
  for (const char* key : args_keys) {
    if (!j.contains(key)) continue;
    const auto& a = j[key];
    if (a.is_object()) c.arguments = a.dump(-1, ' ', false, Json::error_handler_t::replace);
    else if (a.is_string() && Json::parse(a.get<std::string>(), nullptr, false).is_object()) c.arguments = a.get<std::string>();
    else return std::nullopt;
    break;
  }
  return c;
}

ParsedAnswer parse_hermes(const std::string& text, const std::vector<std::string>& declared) {
  ParsedAnswer out;
  std::string rest;
  std::size_t at = 0;
  while (true) {
    const auto open = text.find(kOpen, at);
    if (open == std::string::npos) break;
    const auto close = text.find(kClose, open + kOpen.size());
    if (close == std::string::npos) return {text, {}};  // an unfinished call: the text as written
    auto call = call_of(std::string_view(text).substr(open + kOpen.size(), close - open - kOpen.size()), declared,
                        {"arguments", "parameters"});
    if (!call) return {text, {}};
    rest.append(text, at, open - at);
    out.calls.push_back(std::move(*call));
    at = close + kClose.size();
  }
  if (out.calls.empty()) return {text, {}};
  rest.append(text, at);
  if (auto t = trim(rest); !t.empty()) out.content = std::string(t);
  return out;
}

ParsedAnswer parse_llama3(const std::string& text, const std::vector<std::string>& declared) {
  std::string_view body = trim(text);
  if (body.substr(0, kPythonTag.size()) == kPythonTag) body = trim(body.substr(kPythonTag.size()));
  if (body.empty() || body.front() != '{') return {text, {}};
  ParsedAnswer out;
  // One object, or several joined by ';' (a ';' inside a string does not split: each piece must parse).
  std::size_t start = 0;
  for (std::size_t i = 0; i <= body.size(); ++i) {
    if (i < body.size() && body[i] != ';') continue;
    const auto piece = trim(body.substr(start, i - start));
    if (i == body.size() && piece.empty() && !out.calls.empty()) break;  // a trailing ';'
    if (auto call = call_of(piece, declared, {"parameters", "arguments"})) {
      out.calls.push_back(std::move(*call));
      start = i + 1;
    } else if (i == body.size()) {
      return {text, {}};
    }
  }
  return out;
}

}  // namespace

ToolFormat tool_format_of(std::string_view src) {
  if (src.find(kOpen) != std::string_view::npos) return ToolFormat::hermes;
  if (src.find("\"parameters\"") != std::string_view::npos || src.find(kPythonTag) != std::string_view::npos)
    return ToolFormat::llama3;
  return ToolFormat::none;
}

ParsedAnswer parse_tool_calls(ToolFormat format, const std::string& text, const std::vector<std::string>& declared) {
  switch (format) {
    case ToolFormat::hermes: return parse_hermes(text, declared);
    case ToolFormat::llama3: return parse_llama3(text, declared);
    case ToolFormat::none: break;
  }
  return {text, {}};
}

std::size_t tool_free_prefix(ToolFormat format, std::string_view text) {
  if (format == ToolFormat::llama3) {
    const auto body = trim(text);
    if (body.empty()) return 0;  // nothing but whitespace yet: it may still open a call
    const bool call_like = body.front() == '{' || kPythonTag.substr(0, std::min(body.size(), kPythonTag.size())) ==
                                                      body.substr(0, std::min(body.size(), kPythonTag.size()));
    return call_like ? 0 : text.size();
  }
  if (format != ToolFormat::hermes) return text.size();
  if (const auto open = text.find(kOpen); open != std::string_view::npos) return open;
  // Hold a suffix that is a proper prefix of "<tool_call>".
  for (std::size_t keep = std::min(text.size(), kOpen.size() - 1); keep > 0; --keep)
    if (text.substr(text.size() - keep) == kOpen.substr(0, keep)) return text.size() - keep;
  return text.size();
}

nlohmann::ordered_json tool_calls_json(const std::vector<ToolCall>& calls, const std::string& id_prefix) {
  auto out = nlohmann::ordered_json::array();
  for (std::size_t i = 0; i < calls.size(); ++i)
    out.push_back({{"id", id_prefix + "-" + std::to_string(i)},
                   {"type", "function"},
                   {"function", {{"name", calls[i].name}, {"arguments", calls[i].arguments}}}});
  return out;
}

}  // namespace met::serve
