// `met serve`: the OpenAI-compatible HTTP server (cpp-httplib) over one Engine per model.
// Routes: GET /v1/models, POST /v1/chat/completions, POST /v1/completions (JSON or SSE with
// stream: true), POST /tokenize, POST /detokenize, GET /health, GET /healthz, GET /metrics.
// Binds 127.0.0.1 unless told otherwise; --api-key guards /v1/*, /tokenize and /detokenize.
// Architecture, limits, metrics and the disconnect and drain mechanisms: docs/arch/serve.md.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/expected.hpp"

namespace met::serve {

struct ServerOptions {
  std::vector<std::string> assets;  // one model per assets directory
  std::string backend = "cpu";      // cpu | cuda
  std::string host = "127.0.0.1";
  int port = 8080;                  // 0: any free port (printed once bound)
  std::string api_key;              // empty: no auth
  std::size_t max_body = 4u << 20;  // bytes of a request body; more is a 413
  std::size_t queue = 256;          // waiting requests per model beyond its slots; more is a 429
  std::size_t max_connections = 512;  // open TCP connections (each holds a worker); more get a 503
  std::int64_t read_timeout_s = 30;         // to send a request's headers, and then its body; over it, the connection is cut
  std::chrono::seconds drain_timeout{30};  // how long stop() waits for accepted requests to finish
};

class Server {
 public:
  // Loads every model, starts its engine and binds the socket.
  static Expected<std::unique_ptr<Server>> create(const ServerOptions& options);
  ~Server();
  int port() const;
  // Serves until stop() (from another thread); fails if the listener breaks.
  Expected<void> run();
  // Drains, then stops the listener: from the call on, new generation requests and /health answer
  // 503 (shutting_down) while the accepted ones run to their end, for at most drain_timeout; what
  // is still running then is cut off, and so is every connection left (idle, or a client still
  // sending its headers), so run() returns. Blocks for the drain; run() keeps serving meanwhile.
  void stop();

 private:
  struct Impl;
  explicit Server(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace met::serve
