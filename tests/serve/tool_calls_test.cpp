// Tool calls in generated text (src/serve/tool_calls.cpp): the format a template teaches, the
// parse of finished answers in the Hermes (Qwen3) and Llama-3 JSON formats, what may stream.
#include <doctest/doctest.h>

#include <nlohmann/json.hpp>

#include "serve/tool_calls.hpp"

namespace {

using namespace met::serve;
const std::vector<std::string> kTools = {"get_weather", "search"};

}  // namespace

TEST_CASE("the format comes from the template source") {
  CHECK(tool_format_of("... <tool_call>\\n{\"name\": <function-name>, \"arguments\": <args-json-object>}\\n</tool_call>") ==
        ToolFormat::hermes);
  CHECK(tool_format_of(R"(Respond in the format {"name": function name, "parameters": dictionary of argument name and its value}.)") ==
        ToolFormat::llama3);
  CHECK(tool_format_of("{{ '<|python_tag|>' + tool_call.name }}") == ToolFormat::llama3);
  CHECK(tool_format_of("{% for m in messages %}{{ m.content }}{% endfor %}") == ToolFormat::none);
}

TEST_CASE("hermes: calls become tool_calls and the text around them the content") {
  const std::string text =
      "Let me check.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\", \"days\": 2}}\n</tool_call>\n"
      "<tool_call>\n{\"name\": \"search\", \"arguments\": {\"q\": \"a;b\"}}\n</tool_call>";
  const auto p = parse_tool_calls(ToolFormat::hermes, text, kTools);
  REQUIRE(p.calls.size() == 2);
  CHECK(p.calls[0].name == "get_weather");
  CHECK(nlohmann::json::parse(p.calls[0].arguments) == nlohmann::json{{"city", "Paris"}, {"days", 2}});
  CHECK(p.calls[1].name == "search");
  CHECK(nlohmann::json::parse(p.calls[1].arguments) == nlohmann::json{{"q", "a;b"}});
  REQUIRE(p.content);
  CHECK(*p.content == "Let me check.");
}

TEST_CASE("hermes: a call alone has no content; arguments given as a JSON string pass as they are") {
  const auto p = parse_tool_calls(ToolFormat::hermes, "<tool_call>\n{\"name\": \"search\", \"arguments\": \"{\\\"q\\\": 1}\"}\n</tool_call>\n",
                                  kTools);
  REQUIRE(p.calls.size() == 1);
  CHECK(p.calls[0].arguments == "{\"q\": 1}");
  CHECK_FALSE(p.content);
}

TEST_CASE("hermes: a broken, unfinished or undeclared call leaves the whole text as content") {
  for (const std::string text : {"<tool_call>\n{\"name\": \"search\", \"arguments\": {\"q\": 1}\n</tool_call>",
                                 "<tool_call>\n{\"name\": \"search\", \"arguments\": {}}",
                                 "<tool_call>\n{\"name\": \"rm_rf\", \"arguments\": {}}\n</tool_call>",
                                 "<tool_call>\n{\"name\": \"search\", \"arguments\": [1]}\n</tool_call>", "plain text"}) {
    const auto p = parse_tool_calls(ToolFormat::hermes, text, kTools);
    CHECK_MESSAGE(p.calls.empty(), text);
    REQUIRE(p.content);
    CHECK(*p.content == text);
  }
}

TEST_CASE("llama3: one JSON object, several joined by ';', after <|python_tag|> or not") {
  auto p = parse_tool_calls(ToolFormat::llama3, " {\"name\": \"get_weather\", \"parameters\": {\"city\": \"Oslo\"}}", kTools);
  REQUIRE(p.calls.size() == 1);
  CHECK(nlohmann::json::parse(p.calls[0].arguments) == nlohmann::json{{"city", "Oslo"}});
  CHECK_FALSE(p.content);
  p = parse_tool_calls(ToolFormat::llama3,
                       "<|python_tag|>{\"name\": \"search\", \"parameters\": {\"q\": \"x;y\"}}; {\"name\": \"get_weather\", \"parameters\": {}};",
                       kTools);
  REQUIRE(p.calls.size() == 2);
  CHECK(nlohmann::json::parse(p.calls[0].arguments) == nlohmann::json{{"q", "x;y"}});
  CHECK(p.calls[1].name == "get_weather");
  for (const std::string text : {"The weather is fine.", "{\"name\": \"search\"", "{\"name\": \"nope\", \"parameters\": {}}",
                                 "{\"name\": \"search\", \"parameters\": {}} and then some words"}) {
    p = parse_tool_calls(ToolFormat::llama3, text, kTools);
    CHECK_MESSAGE(p.calls.empty(), text);
    CHECK(p.content == text);
  }
}

TEST_CASE("streaming: text streams up to where a call may start") {
  CHECK(tool_free_prefix(ToolFormat::hermes, "Hello there") == 11);
  CHECK(tool_free_prefix(ToolFormat::hermes, "Hello <tool") == 6);
  CHECK(tool_free_prefix(ToolFormat::hermes, "Hello <tool_call>\n{\"na") == 6);
  CHECK(tool_free_prefix(ToolFormat::hermes, "a < b") == 5);
  CHECK(tool_free_prefix(ToolFormat::llama3, "  ") == 0);
  CHECK(tool_free_prefix(ToolFormat::llama3, " {\"name\"") == 0);
  CHECK(tool_free_prefix(ToolFormat::llama3, "<|pyt") == 0);
  CHECK(tool_free_prefix(ToolFormat::llama3, "Sure, ") == 6);
  CHECK(tool_free_prefix(ToolFormat::none, "<tool_call>") == 11);
}

TEST_CASE("tool_calls JSON has OpenAI's shape, ids from the prefix and index") {
  const auto j = tool_calls_json({{"search", "{\"q\":1}"}}, "call-x");
  CHECK(j.dump() == R"([{"id":"call-x-0","type":"function","function":{"name":"search","arguments":"{\"q\":1}"}}])");
}
