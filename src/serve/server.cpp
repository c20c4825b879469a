// HTTP wiring: routes, body framing and bearer auth (pre-routing, before httplib reads a body), and
// the OpenAI envelope on every error httplib answers itself. An accepted generation request is
// answered, JSON or SSE, by a chunked content provider that polls its RequestState and its client:
// that is where a client that went away is noticed and its request cancelled. Each connection
// holds one worker thread from accept to close; Connections (connections.hpp) caps how many are
// open, gives each request a read deadline and ends them all at shutdown. stop() drains first.
#include "serve/server.hpp"

#include <httplib.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <random>
#include <thread>

#include "serve/connections.hpp"
#include "serve/metrics.hpp"
#include "serve/openai.hpp"
#include "serve/scheduler.hpp"
#include "serve/server_model.hpp"
#include "text/chat_template.hpp"

namespace met::serve {
namespace {

using Json = nlohmann::json;
using OJson = nlohmann::ordered_json;

constexpr auto kPoll = std::chrono::milliseconds(50);  // how often an answering provider checks its client
constexpr auto kProbe = std::chrono::seconds(1);      // how often it probes a client that sent FIN
constexpr std::size_t kSpareThreads = 16;             // threads beyond max_connections: they refuse the excess
constexpr std::int64_t kDefaultCompletionTokens = 16;  // OpenAI's default max_tokens for /v1/completions

std::int64_t unix_now() {
  return std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count();
}

std::string json_text(const OJson& j) { return j.dump(-1, ' ', /*ensure_ascii=*/false, Json::error_handler_t::replace); }

void reply(httplib::Response& res, int status, const OJson& body) {
  res.status = status;
  res.set_content(json_text(body), "application/json");
}

void reply_error(httplib::Response& res, const ApiError& e) {
  res.status = e.status;
  res.set_content(error_envelope(e).dump(), "application/json");
}

ApiError api_error(int status, const std::string& message, const std::string& type, const std::string& code,
                   const std::string& param = "") {
  return ApiError{status, message, type, param, code};
}

ApiError shutting_down() { return api_error(503, "the server is shutting down", "server_error", "shutting_down"); }

bool same_key(const std::string& a, const std::string& b) {
  unsigned char diff = a.size() == b.size() ? 0 : 1;
  for (std::size_t i = 0; i < a.size(); ++i) diff |= static_cast<unsigned char>(a[i] ^ b[i % (b.empty() ? 1 : b.size())]);
  return diff == 0 && !b.empty();
}

std::string sse(const OJson& j) { return "data: " + json_text(j) + "\n\n"; }

// Answers `e` and closes the connection once the answer is written: a request refused before its
// body was read cannot be followed on that connection (the body would be read as the next request).
// httplib closes a connection whose content provider fails, so this provider writes the whole
// envelope and then fails.
void reply_and_close(httplib::Response& res, const ApiError& e) {
  auto body = std::make_shared<const std::string>(error_envelope(e).dump());
  res.status = e.status;
  res.set_header("Connection", "close");
  res.set_content_provider(body->size(), "application/json", [body](std::size_t offset, std::size_t, httplib::DataSink& sink) {
    sink.write(body->data() + offset, body->size() - offset);
    return false;
  });
}

// `message` with the model's directories taken out of its file names: a client sees
// "tokenizer_config.json:chat_template:3:5: ...", never where the server keeps its files.
std::string without_dirs(const ServedModel& m, std::string message) {
  auto replace_all = [&message](const std::string& from, const std::string& to) {
    for (auto at = message.find(from); at != std::string::npos; at = message.find(from, at + to.size()))
      message.replace(at, from.size(), to);
  };
  for (const auto& [dir, name] : {std::pair{m.assets.checkpoint_dir, "the checkpoint"}, std::pair{m.assets.dir, "the assets"}}) {
    if (dir.empty()) continue;
    replace_all(dir + "/", "");
    replace_all(dir, name);
  }
  return message;
}

// The routes whose POST body is a JSON request.
bool json_route(const httplib::Request& req) {
  return req.method == "POST" && (req.path == "/v1/chat/completions" || req.path == "/v1/completions" ||
                                  req.path == "/tokenize" || req.path == "/detokenize");
}

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return s;
}

// Refused from the headers alone, before a byte of the body is read: framing that is ambiguous or
// that met does not take. A body comes with exactly one Content-Length within `max_body`, or as
// `Transfer-Encoding: chunked` alone (httplib stops reading it at max_body: 413); never
// compressed; a JSON route also needs Content-Type application/json (a form or text/plain body is
// what a web page can POST to a loopback server without a CORS preflight).
std::optional<ApiError> refuse_framing(const httplib::Request& req, std::size_t max_body) {
  auto framing = [](int status, const std::string& message, const std::string& code) {
    return api_error(status, message, "invalid_request_error", code);
  };
  const std::size_t lengths = req.get_header_value_count("Content-Length");
  if (lengths > 1) return framing(400, "the request has more than one Content-Length header", "invalid_framing");
  const bool has_body = req.method == "POST" || req.method == "PUT" || req.method == "PATCH";
  if (req.has_header("Transfer-Encoding")) {
    const std::string te = req.get_header_value("Transfer-Encoding");
    if (req.get_header_value_count("Transfer-Encoding") > 1 || lower(te) != "chunked")
      return framing(400, "Transfer-Encoding '" + te + "' is not accepted (only 'chunked')", "invalid_framing");
    if (lengths > 0) return framing(400, "the request has both Content-Length and Transfer-Encoding", "invalid_framing");
    if (!has_body) return framing(400, "a " + req.method + " request must not carry a body", "invalid_framing");
  } else if (lengths == 0) {
    if (has_body) return framing(411, "a " + req.method + " request needs a Content-Length or a chunked body", "length_required");
    return std::nullopt;
  }
  if (lengths == 1) {
    const std::string text = req.get_header_value("Content-Length");
    constexpr std::size_t kMaxDigits = 18;  // below 2^63: no overflow while accumulating
    std::uint64_t length = 0;
    if (text.empty() || text.size() > kMaxDigits || text.find_first_not_of("0123456789") != std::string::npos)
      return framing(400, "Content-Length '" + text + "' is not a byte count", "invalid_framing");
    for (char c : text) length = length * 10 + static_cast<std::uint64_t>(c - '0');
    if (length > max_body)
      return framing(413, "the request body exceeds the limit of " + std::to_string(max_body) + " bytes", "body_too_large");
    if (!has_body && length > 0 && req.method != "DELETE")
      return framing(400, "a " + req.method + " request must not carry a body", "invalid_framing");
  }
  if (const std::string enc = req.get_header_value("Content-Encoding"); !enc.empty() && enc != "identity")
    return framing(415, "Content-Encoding '" + enc + "' is not accepted; send the body uncompressed", "unsupported_media_type");
  if (json_route(req)) {
    std::string type = lower(req.get_header_value("Content-Type"));
    type = type.substr(0, type.find(';'));
    while (!type.empty() && type.back() == ' ') type.pop_back();
    if (type != "application/json")
      return framing(
          415,
          "Content-Type must be application/json" + (type.empty() ? std::string(" (none was given)") : " (got '" + type + "')"),
          "unsupported_media_type");
  }
  return std::nullopt;
}

// The error httplib answers by itself (a request it could not parse, a too long URI, ...).
ApiError http_error(int status) {
  const std::string bad = "invalid_request_error";
  switch (status) {
    case 400:
      return api_error(400, "the request could not be parsed (request line, headers or body framing)", bad, "bad_request");
    case 404:
      return api_error(404, "no such route", bad, "not_found");
    case 405:
      return api_error(405, "method not allowed", bad, "method_not_allowed");
    case 414:
      return api_error(414, "the request URI is too long", bad, "uri_too_long");
    case 416:
      return api_error(416, "the Range header is invalid", bad, "invalid_range");
    case 500:
      return api_error(500, "internal error", "server_error", "internal_error");
    default:
      return api_error(status, "request failed with status " + std::to_string(status), status >= 500 ? "server_error" : bad,
                       "http_" + std::to_string(status));
  }
}

// False once the client has reset the connection. A server DataSink's is_writable() is its
// SocketStream's is_peer_alive(), which met.patch makes a zero-timeout recv(MSG_PEEK) that fails on
// a reset or error only: a client that half-closed after its request still gets its answer. One
// that closed is told from it by a write (its stack resets), which is what the probe is for. Linux
// 6.18 reports that reset to recv(MSG_PEEK) as an end of stream, so the TCP state is asked too.
bool client_connected(httplib::DataSink& sink) {
  return (!sink.is_writable || sink.is_writable()) && !Connections::peer_reset();
}

// One thread per accepted connection, started at accept. (httplib's ThreadPool starts a thread only
// when it counts no idle one, and its count lags a burst of accepts, so a burst queued behind
// long-lived connections.) At most `most` at once; past that, httplib closes the socket unanswered.
// The threads share their count with the queue through `State`, which outlives whichever of them
// ends last.
class ConnectionThreads final : public httplib::TaskQueue {
 public:
  explicit ConnectionThreads(std::size_t most) : state_(std::make_shared<State>()), most_(most) {}
  bool enqueue(std::function<void()> fn) override {
    std::lock_guard lock(state_->mu);
    if (state_->stopping || state_->running >= most_) return false;
    ++state_->running;
    std::thread([state = state_, fn = std::move(fn)] {
      fn();
      std::lock_guard done(state->mu);
      if (--state->running == 0) state->idle.notify_all();
    }).detach();
    return true;
  }
  // Waits for every connection's thread (stop() has shut their sockets down).
  void shutdown() override {
    std::unique_lock lock(state_->mu);
    state_->stopping = true;
    state_->idle.wait(lock, [&] { return state_->running == 0; });
  }

 private:
  struct State {
    std::mutex mu;
    std::condition_variable idle;
    std::size_t running = 0;
    bool stopping = false;
  };
  std::shared_ptr<State> state_;
  std::size_t most_;
};

// A connection's life in met: registered with Connections from accept to close is registered with Connections from accept to close, and one
// over max_connections is refused with a 503 without being read.
class HttpServer final : public httplib::Server {
 public:
  explicit HttpServer(Connections& conns) : conns_(conns) {}

 private:
  bool process_and_close_socket(socket_t sock) override {
    if (!conns_.enter(sock)) {
      static const std::string refusal = [] {
        const std::string body =
            error_envelope(api_error(503, "the server has too many open connections; retry later", "server_error",
                                     "too_many_connections"))
                .dump();
        return "HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\nContent-Length: " +
               std::to_string(body.size()) + "\r\nRetry-After: 1\r\nConnection: close\r\n\r\n" + body;
      }();
      (void)::send(sock, refusal.data(), refusal.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
      ::shutdown(sock, SHUT_RDWR);
      ::close(sock);
      return false;
    }
    const bool ok = httplib::Server::process_and_close_socket(sock);
    conns_.leave();
    return ok;
  }
  Connections& conns_;
};

// A token as OpenAI's chat logprobs show it: its text (a token that is part of a UTF-8 character
// shows U+FFFD), its logprob and its exact bytes.
OJson token_entry(const text::Tokenizer& tok, std::int32_t id, float logprob) {
  const std::string piece = tok.decode({id}, /*skip_special_tokens=*/false);
  OJson bytes = OJson::array();
  for (unsigned char c : piece) bytes.push_back(c);
  return {{"token", piece}, {"logprob", logprob}, {"bytes", bytes}};
}

// Chat's choice.logprobs: {"content": [{token, logprob, bytes, top_logprobs: [{token, logprob, bytes}]}]}.
OJson chat_logprobs(const text::Tokenizer& tok, const std::vector<TokenLogprob>& lps) {
  OJson content = OJson::array();
  for (const auto& lp : lps) {
    OJson top = OJson::array();
    for (const auto& [id, v] : lp.top) top.push_back(token_entry(tok, id, v));
    OJson entry = token_entry(tok, lp.token, lp.logprob);
    entry["top_logprobs"] = top;
    content.push_back(std::move(entry));
  }
  return {{"content", content}, {"refusal", nullptr}};
}

// Completions' choice.logprobs: {tokens, token_logprobs, top_logprobs: [{token: logprob}], text_offset},
// text_offset counting from `offset` (the bytes of completion text before these tokens).
OJson completion_logprobs(const text::Tokenizer& tok, const std::vector<TokenLogprob>& lps, std::size_t& offset) {
  OJson tokens = OJson::array(), values = OJson::array(), tops = OJson::array(), offsets = OJson::array();
  for (const auto& lp : lps) {
    const std::string piece = tok.decode({lp.token}, /*skip_special_tokens=*/false);
    tokens.push_back(piece);
    values.push_back(lp.logprob);
    OJson top = OJson::object();
    for (const auto& [id, v] : lp.top) top[tok.decode({id}, false)] = v;
    tops.push_back(top);
    offsets.push_back(offset);
    offset += piece.size();
  }
  return {{"tokens", tokens}, {"token_logprobs", values}, {"top_logprobs", tops}, {"text_offset", offsets}};
}

// What an accepted request sends for one update from the engine: bytes (none while there is
// nothing to say), or `broken`: end the body unfinished (a non-streaming request that failed after
// its 200 went out, so the client sees a failed transfer rather than a success).
struct Piece {
  std::string bytes;
  bool broken = false;
};
using Render = std::function<Piece(const RequestState::Update&)>;

}  // namespace

struct Server::Impl {
  ServerOptions opt;
  Metrics metrics;
  std::vector<std::unique_ptr<ServedModel>> models;
  std::map<std::string, std::unique_ptr<Engine>> engines;  // by model id
  std::unique_ptr<Connections> conns;
  std::unique_ptr<HttpServer> http;
  int port = 0;
  std::atomic<std::uint64_t> next_id{0};
  std::string id_prefix;

  // Draining: generation requests accepted and not yet answered in full (a Ticket each, dropped
  // when httplib is done with the response), and whether new ones are refused.
  std::mutex drain_mu;
  std::condition_variable drain_cv;
  std::int64_t in_flight = 0;
  bool draining = false;

  struct Ticket {
    explicit Ticket(Impl& i) : impl(i) {}
    Ticket(const Ticket&) = delete;
    Ticket& operator=(const Ticket&) = delete;
    ~Ticket() {
      {
        std::lock_guard lock(impl.drain_mu);
        --impl.in_flight;
      }
      impl.drain_cv.notify_all();
    }
    Impl& impl;
  };
  // A ticket for a request about to be submitted; null once draining.
  std::shared_ptr<Ticket> enter() {
    std::lock_guard lock(drain_mu);
    if (draining) return nullptr;
    ++in_flight;
    return std::make_shared<Ticket>(*this);
  }
  bool is_draining() {
    std::lock_guard lock(drain_mu);
    return draining;
  }
  void drain() {
    std::unique_lock lock(drain_mu);
    draining = true;
    drain_cv.wait_for(lock, opt.drain_timeout, [&] { return in_flight == 0; });
  }

  ServedModel* find(const std::string& id) {
    for (auto& m : models)
      if (m->id == id) return m.get();
    return nullptr;
  }

  std::string new_id(const char* kind) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%012llx", static_cast<unsigned long long>(next_id.fetch_add(1)));
    return std::string(kind) + "-" + id_prefix + buf;
  }

  // The model named by a request (or the first one where naming is optional).
  ApiResult<ServedModel*> model_of(const std::string& name, bool optional) {
    if (name.empty() && optional) return models.front().get();
    if (auto* m = find(name)) return m;
    return api_error(404, "the model '" + name + "' does not exist", "invalid_request_error", "model_not_found", "model");
  }

  ApiResult<std::vector<std::int32_t>> render_chat(const ServedModel& m, const OJson& messages, const OJson& tools,
                                                   bool add_generation_prompt, bool add_special_tokens) {
    if (!m.chat_template)
      return api_error(400, "model '" + m.id + "' has no usable chat template: " + without_dirs(m, m.chat_template_error),
                       "invalid_request_error", "no_chat_template", "messages");
    auto text = apply_chat_template(*m.chat_template, messages, tools, add_generation_prompt, m.template_extra);
    if (!text)
      return api_error(400, "chat template: " + without_dirs(m, text.error().message), "invalid_request_error",
                       "invalid_messages", "messages");
    return m.tokenizer->encode(*text, add_special_tokens);
  }

  void models_route(httplib::Response& res) {
    OJson data = OJson::array();
    for (const auto& m : models)
      data.push_back({{"id", m->id}, {"object", "model"}, {"created", m->created}, {"owned_by", "met"},
                      {"root", m->assets.dir}, {"max_model_len", m->max_ctx}});
    reply(res, 200, {{"object", "list"}, {"data", data}});
  }

  void generate_route(Endpoint endpoint, const httplib::Request& req, httplib::Response& res);
  static void answer(const httplib::Request& req, httplib::Response& res, const char* content_type,
                     std::shared_ptr<RequestState> state, std::shared_ptr<Ticket> ticket, Render render);
  void tokenize_route(const httplib::Request& req, httplib::Response& res);
  void detokenize_route(const httplib::Request& req, httplib::Response& res);
  void install_routes();
};

void Server::Impl::generate_route(Endpoint endpoint, const httplib::Request& req, httplib::Response& res) {
  const bool chat = endpoint == Endpoint::chat;
  auto parsed = parse_generation(endpoint, req.body);
  if (auto* e = std::get_if<ApiError>(&parsed)) return reply_error(res, *e);
  const GenerationRequest r = std::move(std::get<GenerationRequest>(parsed));
  auto found = model_of(r.model, /*optional=*/false);
  if (auto* e = std::get_if<ApiError>(&found)) return reply_error(res, *e);
  ServedModel& m = *std::get<ServedModel*>(found);
  Engine& engine = *engines.at(m.id);

  GenParams g;
  if (chat) {
    if (r.tool_calls && m.tool_format == ToolFormat::none)
      return reply_error(res, invalid("model '" + m.id + "': its chat template shows no tool-call format met parses (Hermes " +
                                          "<tool_call> or Llama-3 JSON); send \"tool_choice\": \"none\" to render the tools " +
                                          "without parsing the answer",
                                      "tools", "unsupported_value"));
    auto ids = render_chat(m, r.messages, r.tools, /*add_generation_prompt=*/true, /*add_special_tokens=*/false);
    if (auto* e = std::get_if<ApiError>(&ids)) return reply_error(res, *e);
    g.prompt = std::move(std::get<std::vector<std::int32_t>>(ids));
  } else if (r.prompt_text) {
    g.prompt = m.tokenizer->encode(*r.prompt_text, /*add_special_tokens=*/true);
  } else {
    g.prompt = *r.prompt_ids;
  }
  const char* prompt_param = chat ? "messages" : "prompt";
  for (auto id : g.prompt)
    if (id >= m.vocab)
      return reply_error(res, invalid("token id " + std::to_string(id) + " is outside the vocabulary of " + std::to_string(m.vocab),
                                      prompt_param));
  const auto len = static_cast<std::int64_t>(g.prompt.size());
  if (len == 0) return reply_error(res, invalid("the prompt is empty", prompt_param));
  g.max_tokens = r.max_tokens ? *r.max_tokens : chat ? m.max_ctx - len : kDefaultCompletionTokens;
  // max_tokens is the client's (up to 2^63 - 1): compared with the room left, never added to len.
  if (len >= m.max_ctx || g.max_tokens > m.max_ctx - len)
    return reply_error(res, invalid("this model's maximum context length is " + std::to_string(m.max_ctx) +
                                        " tokens; the request has " + std::to_string(len) + " prompt tokens and asks for " +
                                        std::to_string(std::max<std::int64_t>(g.max_tokens, 0)) + " completion tokens",
                                    prompt_param, "context_length_exceeded"));
  g.sampling.temperature = static_cast<float>(r.temperature);
  g.sampling.top_p = static_cast<float>(r.top_p);
  g.sampling.top_k = r.top_k;
  g.sampling.seed = r.seed ? *r.seed : std::random_device{}();
  g.stop = r.stop;
  g.ignore_eos = r.ignore_eos;
  g.logprobs = r.logprobs;

  auto ticket = enter();
  if (!ticket) return reply_error(res, shutting_down());
  auto state = std::make_shared<RequestState>();
  switch (engine.submit(state, std::move(g))) {
    case Engine::Submit::accepted: break;
    case Engine::Submit::queue_full:
      return reply_error(res, api_error(429, "the server is at capacity for model '" + m.id + "'; retry later",
                                        "rate_limit_error", "queue_full"));
    case Engine::Submit::faulted:
      return reply_error(res, api_error(503, "model '" + m.id + "' is unavailable: " + engine.fault(), "server_error",
                                        "backend_fault"));
  }
  const std::string id = new_id(chat ? "chatcmpl" : "cmpl");
  const std::int64_t created = unix_now();
  const std::string model_id = m.id;
  auto usage = [len](std::int64_t completion) {
    return OJson{{"prompt_tokens", len}, {"completion_tokens", completion}, {"total_tokens", len + completion}};
  };
  res.status = 200;

  // With tools, the answer is parsed for calls: they become `tool_calls` (finish_reason
  // "tool_calls"), the text around them the content (null when there is none).
  const ToolFormat tool_format = r.tool_calls ? m.tool_format : ToolFormat::none;
  auto parsed_answer = [tool_format, names = r.tool_names, parallel = r.parallel_tool_calls](const std::string& text) {
    ParsedAnswer p = parse_tool_calls(tool_format, text, names);
    if (!parallel && p.calls.size() > 1) p.calls.resize(1);
    return p;
  };
  // Log-probabilities, when asked: gathered per update, shown in the endpoint's format.
  const text::Tokenizer* tok = &*m.tokenizer;
  const bool logprobs = r.logprobs >= 0;
  auto lp_offset = std::make_shared<std::size_t>(0);  // completions' text_offset so far
  auto logprobs_json = [=](const std::vector<TokenLogprob>& lps) {
    return chat ? chat_logprobs(*tok, lps) : completion_logprobs(*tok, lps, *lp_offset);
  };
  auto pending_lp = std::make_shared<std::vector<TokenLogprob>>();
  if (!r.stream) {
    auto text = std::make_shared<std::string>();
    return answer(req, res, "application/json", state, ticket, [=](const RequestState::Update& u) -> Piece {
      *text += u.text;
      pending_lp->insert(pending_lp->end(), u.logprobs.begin(), u.logprobs.end());
      if (!u.done) return {};
      if (u.error_status) return {.bytes = {}, .broken = true};
      OJson choice = {{"index", 0}};
      std::string finish = u.finish_reason;
      if (chat) {
        choice["message"] = {{"role", "assistant"}, {"content", *text}};
        if (tool_format != ToolFormat::none) {
          const ParsedAnswer p = parsed_answer(*text);
          if (!p.calls.empty()) {
            choice["message"]["content"] = p.content ? OJson(*p.content) : OJson(nullptr);
            choice["message"]["tool_calls"] = tool_calls_json(p.calls, "call-" + id);
            finish = "tool_calls";
          }
        }
      } else {
        choice["text"] = *text;
      }
      choice["logprobs"] = logprobs ? logprobs_json(*pending_lp) : OJson(nullptr);
      choice["finish_reason"] = finish;
      return {json_text({{"id", id}, {"object", chat ? "chat.completion" : "text_completion"}, {"created", created},
                         {"model", model_id}, {"choices", OJson::array({choice})}, {"usage", usage(u.completion_tokens)}})};
    });
  }

  const std::string chunk_object = chat ? "chat.completion.chunk" : "text_completion";
  const bool include_usage = r.include_usage;
  auto chunk = [=](const std::string* text, const char* finish) {
    OJson choice = {{"index", 0}};
    if (chat) {
      choice["delta"] = OJson::object();
      if (text) choice["delta"]["content"] = *text;
    } else {
      choice["text"] = text ? *text : "";
    }
    // The log-probabilities of the tokens since the last chunk that carried some.
    choice["logprobs"] = nullptr;
    if (logprobs && (text || finish) && !pending_lp->empty()) {
      choice["logprobs"] = logprobs_json(*pending_lp);
      pending_lp->clear();
    }
    choice["finish_reason"] = finish ? OJson(finish) : OJson(nullptr);
    OJson j = {{"id", id}, {"object", chunk_object}, {"created", created}, {"model", model_id}, {"choices", OJson::array({choice})}};
    if (include_usage) j["usage"] = nullptr;
    return j;
  };
  auto started = std::make_shared<bool>(false);
  // With tools: all the text so far, and how much of it went out as content (a call is held back
  // until the answer ends, then sent whole as tool_calls deltas).
  auto full = std::make_shared<std::string>();
  auto sent = std::make_shared<std::size_t>(0);
  res.set_header("Cache-Control", "no-cache");
  answer(req, res, "text/event-stream", state, ticket, [=](const RequestState::Update& u) -> Piece {
    std::string out;
    if (!*started) {
      *started = true;
      if (chat) {
        OJson first = chunk(nullptr, nullptr);
        first["choices"][0]["delta"] = {{"role", "assistant"}, {"content", ""}};
        out += sse(first);
      }
    }
    pending_lp->insert(pending_lp->end(), u.logprobs.begin(), u.logprobs.end());
    const char* finish = u.finish_reason.c_str();
    if (tool_format == ToolFormat::none) {
      if (!u.text.empty()) out += sse(chunk(&u.text, nullptr));
    } else {
      *full += u.text;
      const std::size_t free = u.done ? full->size() : tool_free_prefix(tool_format, *full);
      std::string text = free > *sent ? full->substr(*sent, free - *sent) : std::string();
      if (u.done && !u.error_status) {
        const ParsedAnswer p = parsed_answer(full->substr(*sent));
        if (!p.calls.empty()) {
          text = p.content.value_or("");
          finish = "tool_calls";
        }
        if (!text.empty()) out += sse(chunk(&text, nullptr));
        text.clear();
        auto calls = tool_calls_json(p.calls, "call-" + id);
        for (std::size_t i = 0; i < calls.size(); ++i) {
          OJson c = chunk(nullptr, nullptr);
          calls[i]["index"] = i;
          c["choices"][0]["delta"] = {{"tool_calls", OJson::array({calls[i]})}};
          out += sse(c);
        }
      }
      if (!text.empty()) out += sse(chunk(&text, nullptr));
      *sent = std::max(*sent, free);
    }
    if (!u.done) return {out};
    if (u.error_status) {
      const bool theirs = u.error_status < 500;  // the engine refused the request itself
      out += sse(error_envelope(api_error(u.error_status, u.error, theirs ? "invalid_request_error" : "server_error",
                                          theirs ? "invalid_value" : "backend_fault")));
    } else {
      out += sse(chunk(nullptr, finish));
      if (include_usage)
        out += sse({{"id", id}, {"object", chunk_object}, {"created", created}, {"model", model_id},
                    {"choices", OJson::array()}, {"usage", usage(u.completion_tokens)}});
    }
    return {out + "data: [DONE]\n\n"};
  });
}

// Each provider call waits up to kPoll for the engine and sends what `render` makes of the update;
// a failed write, or a dead client while there is nothing to send, cancels the request (the engine
// frees its slot at its next step). An empty write would end httplib's chunked loop, so none is
// made. The releaser runs when httplib is done with the response however it ended (also when
// stop() cut it off): it cancels a request still running (a no-op once it finished) and drops the
// drain ticket. An HTTP/1.0 client knows no chunked encoding: its body ends where the connection
// does, so its provider fails once everything is written, which makes httplib 0.11 close it (also
// when the client asked for Keep-Alive).
void Server::Impl::answer(const httplib::Request& req, httplib::Response& res, const char* content_type,
                          std::shared_ptr<RequestState> state, std::shared_ptr<Ticket> ticket, Render render) {
  const bool http10 = req.version == "HTTP/1.0";
  // What may be written while there is nothing to say, to learn whether a client that sent FIN
  // still reads: JSON's leading whitespace, or an SSE comment line.
  const std::string probe = std::string(content_type) == "text/event-stream" ? ":\n\n" : " ";
  auto probed = std::make_shared<std::chrono::steady_clock::time_point>();
  auto provider = [state, http10, probe, probed, render = std::move(render)](std::size_t, httplib::DataSink& sink) {
    const auto u = state->take(kPoll);
    Piece p = render(u);
    if (p.bytes.empty() && !u.done && Connections::peer_finished() && std::chrono::steady_clock::now() - *probed > kProbe) {
      *probed = std::chrono::steady_clock::now();
      p.bytes = probe;
    }
    if (!p.bytes.empty() && !(client_connected(sink) && sink.write(p.bytes.data(), p.bytes.size())))
      return state->cancel(), false;
    if (p.broken) return false;
    if (u.done) return sink.done(), !http10;
    if (!client_connected(sink)) return state->cancel(), false;
    return true;
  };
  // The answer has no read deadline; once it is over, the connection waits for its next request.
  Connections::answering();
  auto releaser = [state, ticket = std::move(ticket)](bool) {
    state->cancel();
    Connections::reading();
  };
  if (!http10) return res.set_chunked_content_provider(content_type, std::move(provider), std::move(releaser));
  res.set_header("Connection", "close");
  res.set_content_provider(content_type, std::move(provider), std::move(releaser));
}

void Server::Impl::tokenize_route(const httplib::Request& req, httplib::Response& res) {
  auto parsed = parse_tokenize(req.body);
  if (auto* e = std::get_if<ApiError>(&parsed)) return reply_error(res, *e);
  const auto& r = std::get<TokenizeRequest>(parsed);
  auto found = model_of(r.model, /*optional=*/true);
  if (auto* e = std::get_if<ApiError>(&found)) return reply_error(res, *e);
  const ServedModel& m = *std::get<ServedModel*>(found);
  std::vector<std::int32_t> ids;
  if (r.prompt) {
    ids = m.tokenizer->encode(*r.prompt, r.add_special_tokens.value_or(true));
  } else {
    auto rendered = render_chat(m, r.messages, r.tools, r.add_generation_prompt, r.add_special_tokens.value_or(false));
    if (auto* e = std::get_if<ApiError>(&rendered)) return reply_error(res, *e);
    ids = std::move(std::get<std::vector<std::int32_t>>(rendered));
  }
  reply(res, 200, {{"count", ids.size()}, {"max_model_len", m.max_ctx}, {"tokens", ids}});
}

void Server::Impl::detokenize_route(const httplib::Request& req, httplib::Response& res) {
  auto parsed = parse_detokenize(req.body);
  if (auto* e = std::get_if<ApiError>(&parsed)) return reply_error(res, *e);
  const auto& r = std::get<DetokenizeRequest>(parsed);
  auto found = model_of(r.model, /*optional=*/true);
  if (auto* e = std::get_if<ApiError>(&found)) return reply_error(res, *e);
  const ServedModel& m = *std::get<ServedModel*>(found);
  for (auto id : r.tokens)
    if (id >= m.tokenizer->vocab_size())
      return reply_error(res, invalid("token id " + std::to_string(id) + " is outside the vocabulary", "tokens"));
  reply(res, 200, {{"prompt", m.tokenizer->decode(r.tokens, /*skip_special_tokens=*/false)}});
}

void Server::Impl::install_routes() {
  http->set_payload_max_length(opt.max_body);
  // Wraps what httplib answers by itself in the envelope; an answer that already has a body (set
  // by a route, or sized for a provider by reply_and_close) is left as it is.
  http->set_error_handler(httplib::Server::HandlerWithResponse([this](const httplib::Request&, httplib::Response& res) {
    if (!res.body.empty() || res.content_length_ != 0) return httplib::Server::HandlerResponse::Unhandled;
    reply_error(res, res.status == 413
                         ? api_error(413, "the request body exceeds the limit of " + std::to_string(opt.max_body) + " bytes",
                                     "invalid_request_error", "body_too_large")
                         : http_error(res.status));
    return httplib::Server::HandlerResponse::Handled;
  }));
  http->set_exception_handler([](const httplib::Request&, httplib::Response& res, std::exception_ptr ep) {
    std::string what = "internal error";
    try {
      if (ep) std::rethrow_exception(ep);
    } catch (const std::exception& ex) {
      what += std::string(": ") + ex.what();
    } catch (...) {
    }
    reply_error(res, api_error(500, what, "server_error", "internal_error"));
  });
  http->set_pre_routing_handler([this](const httplib::Request& req, httplib::Response& res) {
    Connections::reading();  // this request's headers are in: its body (if any) has a deadline of its own
    if (auto e = refuse_framing(req, opt.max_body)) {
      reply_and_close(res, *e);
      return httplib::Server::HandlerResponse::Handled;
    }
    if (opt.api_key.empty()) return httplib::Server::HandlerResponse::Unhandled;
    const bool guarded = req.path.rfind("/v1/", 0) == 0 || req.path == "/tokenize" || req.path == "/detokenize";
    if (!guarded) return httplib::Server::HandlerResponse::Unhandled;
    const std::string auth = req.get_header_value("Authorization");
    const std::string prefix = "Bearer ";
    if (auth.rfind(prefix, 0) == 0 && same_key(auth.substr(prefix.size()), opt.api_key))
      return httplib::Server::HandlerResponse::Unhandled;
    res.set_header("WWW-Authenticate", "Bearer");
    reply_and_close(res,
                    api_error(401, auth.empty() ? "missing bearer token (Authorization: Bearer <api key>)" : "incorrect API key",
                              "invalid_request_error", "invalid_api_key"));
    return httplib::Server::HandlerResponse::Handled;
  });
  http->Get("/v1/models", [this](const httplib::Request&, httplib::Response& res) { models_route(res); });
  http->Post("/v1/chat/completions",
            [this](const httplib::Request& req, httplib::Response& res) { generate_route(Endpoint::chat, req, res); });
  http->Post("/v1/completions",
            [this](const httplib::Request& req, httplib::Response& res) { generate_route(Endpoint::completion, req, res); });
  http->Post("/tokenize", [this](const httplib::Request& req, httplib::Response& res) { tokenize_route(req, res); });
  http->Post("/detokenize", [this](const httplib::Request& req, httplib::Response& res) { detokenize_route(req, res); });
  auto health = [this](bool body) {
    return [this, body](const httplib::Request&, httplib::Response& res) {
      if (is_draining()) return reply_error(res, shutting_down());
      for (const auto& [id, e] : engines)
        if (auto f = e->fault(); !f.empty())
          return reply_error(res, api_error(503, "model '" + id + "' is unavailable: " + f, "server_error", "backend_fault"));
      res.status = 200;
      if (body) res.set_content(R"({"status":"ok"})", "application/json");
    };
  };
  http->Get("/health", health(false));
  http->Get("/healthz", health(true));
  http->Get("/metrics", [this](const httplib::Request&, httplib::Response& res) {
    res.set_content(metrics.render(), "text/plain; version=0.0.4; charset=utf-8");
  });
}

Server::Server(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

Server::~Server() {
  if (!impl_) return;
  impl_->engines.clear();  // fails what is still waiting; the HTTP pool has already drained
}

Expected<std::unique_ptr<Server>> Server::create(const ServerOptions& options) {
  if (options.assets.empty()) return fail("serve: give at least one --assets DIR");
  if (options.backend != "cpu" && options.backend != "cuda" && options.backend != "cpu-oracle")
    return fail("serve: --backend '" + options.backend + "': expected cpu, cuda or cpu-oracle");
  auto impl = std::make_unique<Impl>();
  impl->opt = options;
  std::random_device rd;
  char buf[16];
  std::snprintf(buf, sizeof buf, "%08x", rd());
  impl->id_prefix = buf;
  for (const auto& dir : options.assets) {
    MET_TRY(auto model, load_served_model(dir, options.backend));
    if (impl->find(model->id)) return fail(dir + ": a model named '" + model->id + "' is already served (from another --assets)");
    MET_TRY(auto engine, Engine::start(*model, impl->metrics, options.queue));
    impl->engines.emplace(model->id, std::move(engine));
    impl->models.push_back(std::move(model));
  }
  if (options.max_connections == 0) return fail("serve: --max-connections must be at least 1");
  if (options.read_timeout_s <= 0) return fail("serve: --read-timeout must be at least 1 second");
  impl->conns = std::make_unique<Connections>(Connections::Limits{
      .max_connections = options.max_connections,
      .read_timeout = std::chrono::seconds(options.read_timeout_s),
      .shed_after = std::min<std::chrono::milliseconds>(std::chrono::seconds(2), std::chrono::seconds(options.read_timeout_s)),
      .crowded = std::max<std::size_t>(1, options.max_connections / 2)});
  impl->http = std::make_unique<HttpServer>(*impl->conns);
  const std::size_t most = options.max_connections + kSpareThreads;
  impl->http->new_task_queue = [most] { return new ConnectionThreads(most); };
  impl->install_routes();
  if (options.port == 0) {
    impl->port = impl->http->bind_to_any_port(options.host);
    if (impl->port <= 0) return fail("serve: cannot bind " + options.host + " on any port");
  } else {
    if (!impl->http->bind_to_port(options.host, options.port))
      return fail("serve: cannot bind " + options.host + ":" + std::to_string(options.port));
    impl->port = options.port;
  }
  return std::unique_ptr<Server>(new Server(std::move(impl)));
}

int Server::port() const { return impl_->port; }

Expected<void> Server::run() {
  if (!impl_->http->listen_after_bind()) return fail("serve: the listener stopped with an error");
  return {};
}

void Server::stop() {
  impl_->drain();
  impl_->http->stop();
  impl_->conns->shutdown_all();
}

}  // namespace met::serve
