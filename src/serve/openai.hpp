// The OpenAI-compatible request surface: strict parsing of /v1/chat/completions, /v1/completions,
// /tokenize and /detokenize bodies (an unknown field or a wrong type is a 400 that names the
// field, never a default), and the error envelope {"error": {message, type, param, code}}.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include <nlohmann/json.hpp>

namespace met::serve {

struct ApiError {
  int status = 400;
  std::string message;
  std::string type = "invalid_request_error";
  std::string param;  // empty: null
  std::string code;   // empty: null
};

// How deep a request body may nest (the body object is level 1). Far past any real request (a chat
// message is level 3, tool schemas a dozen more), far short of what recursion over it could overflow.
inline constexpr int kMaxJsonDepth = 64;
// Stop strings are matched on the engine thread every request shares, at a cost of count x length
// per token; OpenAI itself takes at most 4.
inline constexpr std::size_t kMaxStops = 16;
inline constexpr std::size_t kMaxStopBytes = 1024;
// Tools a request may declare (OpenAI allows 128).
inline constexpr std::size_t kMaxTools = 128;
// Alternatives per token a request may ask for (OpenAI's top_logprobs limit; vLLM's default).
inline constexpr int kMaxLogprobs = 20;

// {"error": {"message", "type", "param", "code"}} with null for an empty param or code.
nlohmann::json error_envelope(const ApiError& e);
ApiError invalid(const std::string& message, const std::string& param = "", const std::string& code = "invalid_value");

template <class T>
using ApiResult = std::variant<T, ApiError>;

enum class Endpoint { chat, completion };

struct GenerationRequest {
  std::string model;
  nlohmann::ordered_json messages;                                  // chat: the conversation, text parts joined
  std::optional<std::string> prompt_text;                           // completion: a string prompt
  std::optional<std::vector<std::int32_t>> prompt_ids;              // completion: token ids
  std::optional<std::int64_t> max_tokens;                           // max_completion_tokens or max_tokens
  std::vector<std::string> stop;
  // -1: no log-probabilities; else per generated token, with this many most likely alternatives
  // (chat: logprobs true and top_logprobs; completions: logprobs N).
  int logprobs = -1;
  double temperature = 1.0;  // OpenAI's default; 0 is greedy
  double top_p = 1.0;
  std::int32_t top_k = 0;  // 0: off
  std::optional<std::uint64_t> seed;
  bool stream = false, include_usage = false, ignore_eos = false;
  // chat: the request's tools as the chat template gets them (null unless given), their names, and
  // whether the answer is parsed for calls (tools given and tool_choice not "none").
  nlohmann::ordered_json tools;
  std::vector<std::string> tool_names;
  bool tool_calls = false;
  bool parallel_tool_calls = true;
};

ApiResult<GenerationRequest> parse_generation(Endpoint endpoint, std::string_view body);

struct TokenizeRequest {
  std::string model;  // empty: the only (first) model
  std::optional<std::string> prompt;
  nlohmann::ordered_json messages;  // null unless given
  nlohmann::ordered_json tools;     // null unless given (with messages)
  std::optional<bool> add_special_tokens;  // default: true for a prompt, false for messages
  bool add_generation_prompt = true;
};
ApiResult<TokenizeRequest> parse_tokenize(std::string_view body);

struct DetokenizeRequest {
  std::string model;
  std::vector<std::int32_t> tokens;
};
ApiResult<DetokenizeRequest> parse_detokenize(std::string_view body);

}  // namespace met::serve
