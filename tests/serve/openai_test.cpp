// Strict parsing of the OpenAI request bodies (src/serve/openai.cpp): every unknown field, wrong
// type and out-of-range value is a 400 naming the field; null is absent; the envelope has all four keys.
#include <doctest/doctest.h>

#include "serve/openai.hpp"

namespace {

using namespace met::serve;

ApiError err_of(Endpoint e, const std::string& body) {
  auto r = parse_generation(e, body);
  REQUIRE_MESSAGE(std::holds_alternative<ApiError>(r), body);
  return std::get<ApiError>(r);
}

GenerationRequest ok_of(Endpoint e, const std::string& body) {
  auto r = parse_generation(e, body);
  if (auto* err = std::get_if<ApiError>(&r)) FAIL(body << ": " << err->message);
  return std::get<GenerationRequest>(r);
}

const std::string kMsgs = R"("messages": [{"role": "user", "content": "hi"}])";

}  // namespace

TEST_CASE("a full chat request parses; max_completion_tokens wins over max_tokens; null is absent") {
  const auto r = ok_of(Endpoint::chat, R"({"model": "m", )" + kMsgs +
                                           R"(, "max_tokens": 5, "max_completion_tokens": 7, "stop": "x", "temperature": 0,
      "top_p": 0.5, "top_k": 20, "seed": 3, "stream": true, "stream_options": {"include_usage": true}, "ignore_eos": true, "n": 1, "user": null})");
  CHECK(r.model == "m");
  CHECK(r.max_tokens == 7);
  CHECK(r.stop == std::vector<std::string>{"x"});
  CHECK(r.temperature == 0);
  CHECK(r.top_p == 0.5);
  CHECK(r.top_k == 20);
  CHECK(r.seed == 3u);
  CHECK(r.stream);
  CHECK(r.include_usage);
  CHECK(r.ignore_eos);
}

TEST_CASE("chat text parts are joined into one string content (the template sees a string)") {
  const auto r = ok_of(Endpoint::chat,
                       R"({"model": "m", "messages": [{"role": "user", "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]}]})");
  CHECK(r.messages[0]["content"] == "a\nb");
}

TEST_CASE("a completion prompt is a string, a one-string list or token ids; several prompts are refused") {
  CHECK(ok_of(Endpoint::completion, R"({"model": "m", "prompt": "abc"})").prompt_text == "abc");
  CHECK(ok_of(Endpoint::completion, R"({"model": "m", "prompt": ["abc"]})").prompt_text == "abc");
  CHECK(ok_of(Endpoint::completion, R"({"model": "m", "prompt": [1, 2, 3]})").prompt_ids == std::vector<std::int32_t>{1, 2, 3});
  CHECK(err_of(Endpoint::completion, R"({"model": "m", "prompt": ["a", "b"]})").code == "unsupported_value");
  CHECK(err_of(Endpoint::completion, R"({"model": "m", "prompt": [1, -2]})").param == "prompt");
  CHECK(err_of(Endpoint::completion, R"({"model": "m", "prompt": ""})").param == "prompt");
}

TEST_CASE("each bad field is refused naming it (a lenient parser that defaults would pass these)") {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {R"({"model": "m", )" + kMsgs + R"(, "frequency_penalty": 1})", "frequency_penalty"},
      {R"({"model": "m", )" + kMsgs + R"(, "max_tokens": "5"})", "max_tokens"},
      {R"({"model": "m", )" + kMsgs + R"(, "max_tokens": 0})", "max_tokens"},
      {R"({"model": "m", )" + kMsgs + R"(, "max_tokens": 1.5})", "max_tokens"},
      {R"({"model": "m", )" + kMsgs + R"(, "temperature": 3})", "temperature"},
      {R"({"model": "m", )" + kMsgs + R"(, "top_p": 0})", "top_p"},
      {R"({"model": "m", )" + kMsgs + R"(, "top_k": -2})", "top_k"},
      {R"({"model": "m", )" + kMsgs + R"(, "top_k": 1.5})", "top_k"},
      {R"({"model": "m", )" + kMsgs + R"(, "n": 2})", "n"},
      {R"({"model": "m", )" + kMsgs + R"(, "stream": "yes"})", "stream"},
      {R"({"model": "m", )" + kMsgs + R"(, "stream_options": {"include_usage": true}})", "stream_options"},
      {R"({"model": "m", )" + kMsgs + R"(, "stream": true, "stream_options": {"x": 1}})", "stream_options.x"},
      {R"({"model": "m", )" + kMsgs + R"(, "stop": [""]})", "stop"},
      {R"({"model": "m", )" + kMsgs + R"(, "stop": [1]})", "stop"},
      {R"({"model": 5, )" + kMsgs + "}", "model"},
      {R"({)" + kMsgs + "}", "model"},
      {R"({"model": "m"})", "messages"},
      {R"({"model": "m", "messages": []})", "messages"},
      {R"({"model": "m", "messages": [{"role": "wizard", "content": "x"}]})", "messages[0].role"},
      {R"({"model": "m", "messages": [{"role": "user", "content": 5}]})", "messages[0].content"},
      {R"({"model": "m", )" + kMsgs + R"(, "prompt": "x"})", "prompt"},
      {R"({"model": "m", "messages": [{"role": "user", "content": null}]})", "messages[0].content"},
      {R"({"model": "m", "messages": [{"role": "user"}]})", "messages[0].content"},
      {R"({"model": "m", "messages": [{"role": "assistant", "content": null}]})", "messages[0].content"},
      {R"({"model": "m", )" + kMsgs + R"(, "stop": ["a","b","c","d","e","f","g","h","i","j","k","l","m","n","o","p","q"]})",
       "stop"},
      {R"({"model": "m", )" + kMsgs + R"(, "stop": ")" + std::string(1025, 'x') + R"("})", "stop"},
  };
  for (const auto& c : cases) {  // no structured binding: doctest's message lambdas capture these
    const std::string& body = c.first;
    const std::string& param = c.second;
    const auto e = err_of(Endpoint::chat, body);
    CHECK_MESSAGE(e.status == 400, body);
    CHECK_MESSAGE(e.param == param, body << " -> " << e.param);
  }
  CHECK(err_of(Endpoint::completion, R"({"model": "m", "prompt": "x", "max_completion_tokens": 3})").param == "max_completion_tokens");
}

TEST_CASE("neutral values of OpenAI fields met does not implement are accepted; any other value is refused by name") {
  for (const char* neutral : {R"("presence_penalty": 0, "frequency_penalty": 0.0)", R"("logprobs": false, "top_logprobs": null)",
                              R"("logprobs": null, "top_logprobs": 0)", R"("logit_bias": null)", R"("logit_bias": {})"}) {
    CAPTURE(neutral);
    ok_of(Endpoint::chat, R"({"model": "m", )" + kMsgs + ", " + neutral + "}");
  }
  ok_of(Endpoint::completion, R"({"model": "m", "prompt": "x", "presence_penalty": 0, "logprobs": null, "logit_bias": {}})");
  const std::vector<std::pair<std::string, std::string>> refused = {{R"("presence_penalty": 0.5)", "presence_penalty"},
                                                                    {R"("frequency_penalty": -1)", "frequency_penalty"},
                                                                    {R"("logit_bias": {"5": 10})", "logit_bias"},
                                                                    {R"("presence_penalty": "0")", "presence_penalty"}};
  for (const auto& r : refused) {
    const std::string& field = r.first;
    const std::string& param = r.second;
    const auto e = err_of(Endpoint::chat, R"({"model": "m", )" + kMsgs + ", " + field + "}");
    CHECK_MESSAGE(e.param == param, field);
    CHECK_MESSAGE(e.code == "unsupported_value", field);
  }
  CHECK(err_of(Endpoint::completion, R"({"model": "m", "prompt": "x", "top_logprobs": 0})").code == "unknown_field");
}

TEST_CASE("logprobs: chat's logprobs and top_logprobs, completions' logprobs N; limits by name") {
  CHECK(ok_of(Endpoint::chat, R"({"model": "m", )" + kMsgs + "}").logprobs == -1);
  CHECK(ok_of(Endpoint::chat, R"({"model": "m", )" + kMsgs + R"(, "logprobs": true})").logprobs == 0);
  CHECK(ok_of(Endpoint::chat, R"({"model": "m", )" + kMsgs + R"(, "logprobs": true, "top_logprobs": 20})").logprobs == 20);
  CHECK(ok_of(Endpoint::completion, R"({"model": "m", "prompt": "x", "logprobs": 3})").logprobs == 3);
  CHECK(ok_of(Endpoint::completion, R"({"model": "m", "prompt": "x", "logprobs": 0})").logprobs == 0);
  CHECK(err_of(Endpoint::chat, R"({"model": "m", )" + kMsgs + R"(, "top_logprobs": 2})").param == "top_logprobs");
  CHECK(err_of(Endpoint::chat, R"({"model": "m", )" + kMsgs + R"(, "logprobs": true, "top_logprobs": 21})").param == "top_logprobs");
  CHECK(err_of(Endpoint::chat, R"({"model": "m", )" + kMsgs + R"(, "logprobs": 1})").param == "logprobs");
  CHECK(err_of(Endpoint::completion, R"({"model": "m", "prompt": "x", "logprobs": -1})").param == "logprobs");
  CHECK(err_of(Endpoint::completion, R"({"model": "m", "prompt": "x", "logprobs": true})").param == "logprobs");
}

TEST_CASE("an assistant message with tool calls may have null content; the template gets the empty text") {
  const auto r = ok_of(Endpoint::chat, R"({"model": "m", "messages": [{"role": "user", "content": "x"},
      {"role": "assistant", "content": null, "tool_calls": [{"id": "1", "type": "function", "function": {"name": "f", "arguments": "{}"}}]}]})");
  CHECK(r.messages[1]["content"] == "");
  CHECK(err_of(Endpoint::chat, R"({"model": "m", "messages": [{"role": "assistant", "tool_calls": "f"}]})").param ==
        "messages[0].tool_calls");
}

TEST_CASE("a tool call's arguments sent as JSON text reach the template as the value; null or empty text as {}") {
  const auto r = ok_of(Endpoint::chat, R"({"model": "m", "messages": [{"role": "user", "content": "x"},
      {"role": "assistant", "content": null, "tool_calls": [
        {"id": "1", "type": "function", "function": {"name": "f", "arguments": "{\"city\": \"Riga\", \"n\": [1, null]}"}},
        {"id": "2", "type": "function", "function": {"name": "g", "arguments": null}},
        {"id": "3", "type": "function", "function": {"name": "h", "arguments": ""}},
        {"id": "4", "type": "function", "function": {"name": "k"}},
        {"id": "5", "type": "function", "function": {"name": "o", "arguments": {"kept": true}}},
        {"id": "6", "type": "function"}]}]})");
  const auto& calls = r.messages[1]["tool_calls"];
  CHECK(calls[0]["function"]["arguments"] == nlohmann::ordered_json::parse(R"({"city": "Riga", "n": [1, null]})"));
  for (int i : {1, 2, 3}) CHECK(calls[i]["function"]["arguments"] == nlohmann::ordered_json::object());
  CHECK(calls[4]["function"]["arguments"] == nlohmann::ordered_json::parse(R"({"kept": true})"));
  CHECK_FALSE(calls[5].contains("function"));  // no function object: left for the template to judge
  const auto bad = err_of(Endpoint::chat, R"({"model": "m", "messages": [{"role": "assistant", "content": null,
      "tool_calls": [{"id": "1", "type": "function", "function": {"name": "f", "arguments": "{\"city\": "}}]}]})");
  CHECK(bad.param == "messages[0].tool_calls[0].function.arguments");
  // Nesting in the text counts against the body's bound (a stack-deep template context otherwise).
  const std::string deep = std::string(70, '[') + std::string(70, ']');
  const auto too_deep = err_of(Endpoint::chat, R"({"model": "m", "messages": [{"role": "assistant", "content": null,
      "tool_calls": [{"id": "1", "type": "function", "function": {"name": "f", "arguments": ")" + deep + R"("}}]}]})");
  CHECK(too_deep.param == "messages[0].tool_calls[0].function.arguments");
  CHECK(too_deep.message.find("nests deeper") != std::string::npos);
}

TEST_CASE("tools: kept for the template, names collected; tool_choice auto parses, none does not") {
  const std::string tools = R"("tools": [{"type": "function", "function": {"name": "get_weather", "description": "d",
      "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}, "strict": true}}])";
  auto r = ok_of(Endpoint::chat, R"({"model": "m", )" + kMsgs + ", " + tools + "}");
  CHECK(r.tools.size() == 1);
  CHECK(r.tool_names == std::vector<std::string>{"get_weather"});
  CHECK(r.tool_calls);
  CHECK(r.parallel_tool_calls);
  r = ok_of(Endpoint::chat, R"({"model": "m", )" + kMsgs + ", " + tools + R"(, "tool_choice": "none", "parallel_tool_calls": false})");
  CHECK_FALSE(r.tool_calls);
  CHECK_FALSE(r.parallel_tool_calls);
  CHECK_FALSE(ok_of(Endpoint::chat, R"({"model": "m", )" + kMsgs + "}").tool_calls);
}

TEST_CASE("tools: malformed tools and choices that would force a call are 400 by name") {
  auto bad = [](const std::string& extra) { return err_of(Endpoint::chat, R"({"model": "m", )" + kMsgs + ", " + extra + "}"); };
  const std::string one = R"("tools": [{"type": "function", "function": {"name": "f"}}])";
  CHECK(bad(R"("tools": {})").param == "tools");
  CHECK(bad(R"("tools": [{"type": "code", "function": {"name": "f"}}])").param == "tools[0].type");
  CHECK(bad(R"("tools": [{"type": "function", "function": {"name": "a b"}}])").param == "tools[0].function.name");
  CHECK(bad(R"("tools": [{"type": "function", "function": {"name": "f"}}, {"type": "function", "function": {"name": "f"}}])").param ==
        "tools[1].function.name");
  CHECK(bad(R"("tools": [{"type": "function", "function": {"name": "f", "parameters": []}}])").param == "tools[0].function.parameters");
  CHECK(bad(R"("tools": [{"type": "function", "function": {"name": "f", "extra": 1}}])").code == "unknown_field");
  CHECK(bad(R"("tool_choice": "auto")").param == "tool_choice");
  CHECK(bad(one + R"(, "tool_choice": "required")").code == "unsupported_value");
  CHECK(bad(one + R"(, "tool_choice": {"type": "function", "function": {"name": "f"}})").code == "unsupported_value");
  CHECK(bad(one + R"(, "tool_choice": "sometimes")").param == "tool_choice");
  CHECK(err_of(Endpoint::completion, R"({"model": "m", "prompt": "x", )" + one + "}").code == "unknown_field");
}

TEST_CASE("malformed JSON and a non-object body are invalid_json") {
  CHECK(err_of(Endpoint::chat, "{").code == "invalid_json");
  CHECK(err_of(Endpoint::chat, "[]").code == "invalid_json");
  CHECK(err_of(Endpoint::chat, "").code == "invalid_json");
}

TEST_CASE("a body nested past kMaxJsonDepth is refused while parsing; one level less parses") {
  // The body is level 1, messages 2, a message 3: a list of `lists` levels in a message field ends at 3 + lists.
  auto chat_with = [](int lists) {
    return R"({"model": "m", "messages": [{"role": "user", "content": "hi", "meta": )" + std::string(lists, '[') +
           std::string(lists, ']') + "}]}";
  };
  const int fits = kMaxJsonDepth - 3;
  CHECK(std::holds_alternative<GenerationRequest>(parse_generation(Endpoint::chat, chat_with(fits))));
  for (int lists : {fits + 1, 15000}) {
    CAPTURE(lists);
    const auto e = err_of(Endpoint::chat, chat_with(lists));
    CHECK(e.code == "invalid_json");
    CHECK(e.message == "the request body nests deeper than " + std::to_string(kMaxJsonDepth) + " levels");
  }
  auto t =
      parse_tokenize(R"({"messages": [{"role": "user", "content": )" + std::string(15000, '[') + std::string(15000, ']') + "}]}");
  REQUIRE(std::holds_alternative<ApiError>(t));
  CHECK(std::get<ApiError>(t).code == "invalid_json");
}

TEST_CASE("the error envelope has message, type, param and code, null when empty") {
  const auto j = error_envelope(invalid("bad", "", ""));
  REQUIRE(j.contains("error"));
  CHECK(j["error"]["message"] == "bad");
  CHECK(j["error"]["type"] == "invalid_request_error");
  CHECK(j["error"]["param"].is_null());
  CHECK(j["error"]["code"].is_null());
}

TEST_CASE("tokenize takes exactly one of prompt and messages; detokenize needs token ids") {
  CHECK(std::holds_alternative<TokenizeRequest>(parse_tokenize(R"({"prompt": "x"})")));
  CHECK(std::holds_alternative<ApiError>(parse_tokenize(R"({"prompt": "x", )" + kMsgs + "}")));
  CHECK(std::holds_alternative<ApiError>(parse_tokenize(R"({})")));
  CHECK(std::holds_alternative<ApiError>(parse_tokenize(R"({"prompt": "x", "extra": 1})")));
  CHECK(std::holds_alternative<DetokenizeRequest>(parse_detokenize(R"({"tokens": [1, 2]})")));
  CHECK(std::holds_alternative<ApiError>(parse_detokenize(R"({"tokens": "12"})")));
  CHECK(std::holds_alternative<ApiError>(parse_detokenize(R"({"tokens": [1.5]})")));
}
