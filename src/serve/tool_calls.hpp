// Tool calls in generated text: which format a model's chat template teaches it (from the template
// source), and the parse of a finished completion into OpenAI `tool_calls` plus the remaining text.
//   hermes     Qwen2.5/Qwen3 (and other Hermes-style templates): each call is
//              <tool_call>\n{"name": ..., "arguments": {...}}\n</tool_call>, text may surround them.
//   llama3     Llama-3.1/3.2/3.3 JSON tool calling: the whole answer is one JSON object
//              {"name": ..., "parameters": {...}} (or several joined by ';'), optionally after
//              <|python_tag|>.
// A call that does not parse, or names a tool the request did not declare, is left as text: the
// client sees what the model wrote, never an invented call.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

namespace met::serve {

enum class ToolFormat { none, hermes, llama3 };

// The format a chat template's source asks the model to answer in; none when it shows neither.
ToolFormat tool_format_of(std::string_view template_source);

struct ToolCall {
  std::string name;
  std::string arguments;  // a JSON object, serialised (OpenAI sends arguments as a string)
};

struct ParsedAnswer {
  std::optional<std::string> content;  // the text outside the calls, trimmed; none when empty
  std::vector<ToolCall> calls;
};

// `declared`: the names of the request's tools. With no call found, content is `text` unchanged.
ParsedAnswer parse_tool_calls(ToolFormat format, const std::string& text, const std::vector<std::string>& declared);

// While streaming: how many leading bytes of `text` (all the text generated so far) may be sent
// as content now, because no tool call can start inside them. A hermes answer streams up to
// `<tool_call>` (holding a suffix that may be its start); a llama3 answer that starts like a call
// ('{' or <|python_tag|> after whitespace) is held whole.
std::size_t tool_free_prefix(ToolFormat format, std::string_view text);

// The OpenAI message fields for an answer: tool_calls [{id, type, function: {name, arguments}}]
// with ids from `id_prefix` and the call's index.
nlohmann::ordered_json tool_calls_json(const std::vector<ToolCall>& calls, const std::string& id_prefix);

}  // namespace met::serve
