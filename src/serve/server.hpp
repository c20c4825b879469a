// `met serve`: the OpenAI-compatible HTTP server (cpp-httplib) over one Engine per model.
// Routes: GET /v1/models, POST /v1/chat/completions, POST /v1/completions (JSON or SSE with
// stream: true), POST /tokenize, POST /detokenize, GET /health, GET /healthz, GET /metrics.
// Binds 127.0.0.1 unless told otherwise; --api-key guards /v1/*, /tokenize and /detokenize.
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "core/expected.hpp"

namespace met::serve {

struct ServerOptions {
  std::vector<std::string> assets;  // one model per assets directory
  std::string host = "127.0.0.1";
  int port = 8080;                  // 0: any free port (printed once bound)
  std::string api_key;              // empty: no auth
  std::size_t max_body = 4u << 20;  // bytes of a request body; more is a 413
  std::size_t queue = 256;          // waiting requests per model beyond its slots; more is a 429
  std::size_t threads = 0;          // HTTP worker threads (each holds one request); 0: slots + queue + 8
};

class Server {
 public:
  // Loads every model, starts its engine and binds the socket.
  static Expected<std::unique_ptr<Server>> create(const ServerOptions& options);
  ~Server();
  int port() const;
  // Serves until stop() (from another thread); fails if the listener breaks.
  Expected<void> run();
  void stop();

 private:
  struct Impl;
  explicit Server(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace met::serve
