// `met serve`: thin wiring. Parses flags, builds the server (src/serve/server.hpp), serves until
// SIGINT or SIGTERM. The signals are blocked in every thread and taken by one sigwait thread, so
// no handler runs inside the server's locks.
#include <pthread.h>
#include <signal.h>

#include <cstdio>
#include <thread>

#include "cli/commands.hpp"
#include "serve/server.hpp"

namespace met::cli {
namespace {

int run_serve(const serve::ServerOptions& o) {
  ::signal(SIGPIPE, SIG_IGN);  // a client that hangs up mid-stream is a failed write, not a death
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGINT);
  sigaddset(&stop_signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);  // before any thread starts: they inherit it

  auto server = serve::Server::create(o);
  if (!server) {
    std::fprintf(stderr, "error: %s\n", server.error().message.c_str());
    return 1;
  }
  std::thread waiter([&] {
    int sig = 0;
    sigwait(&stop_signals, &sig);
    if (sig != 0) (*server)->stop();
  });
  std::fprintf(stderr, "serve: listening on http://%s:%d\n", o.host.c_str(), (*server)->port());
  std::fflush(stderr);
  auto ran = (*server)->run();
  // The listener ended without a signal (an error): wake the waiter so it can be joined.
  pthread_kill(waiter.native_handle(), SIGTERM);
  waiter.join();
  if (!ran) {
    std::fprintf(stderr, "error: %s\n", ran.error().message.c_str());
    return 1;
  }
  std::fprintf(stderr, "serve: stopped\n");
  return 0;
}

}  // namespace

void add_serve_command(CLI::App& app, std::vector<Command>& out) {
  auto o = std::make_shared<serve::ServerOptions>();
  auto* serve = app.add_subcommand("serve", "serve emitted assets over an OpenAI-compatible HTTP API");
  serve->add_option("--assets", o->assets, "assets directory from `met circuit emit`; repeat to serve several models")->required();
  serve->add_option("--backend", o->backend, "cpu | cuda (the hopper interpreter; assets emitted for h100-sxm or h200-sxm) | cpu-oracle (a GPU emit on the cpu bodies)")
      ->capture_default_str();
  serve->add_option("--host", o->host, "address to bind (loopback unless told otherwise)")->capture_default_str();
  serve->add_option("--port", o->port, "TCP port; 0 picks a free one (printed)")->capture_default_str()->check(CLI::Range(0, 65535));
  serve->add_option("--api-key", o->api_key, "require 'Authorization: Bearer KEY' on /v1/*, /tokenize and /detokenize");
  serve->add_option("--max-body", o->max_body, "largest request body in bytes (larger: 413)")->capture_default_str();
  serve->add_option("--queue", o->queue, "requests per model that may wait for a slot (more: 429)")->capture_default_str();
  serve->add_option("--max-connections", o->max_connections, "open TCP connections at once, each served by a thread of its own (more: 503 too_many_connections)")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  serve->add_option("--read-timeout", o->read_timeout_s,
                    "seconds a client has to send a request's headers, and then its body (over it: the connection is cut)")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  out.push_back({serve, [o] { return run_serve(*o); }});
}

}  // namespace met::cli
