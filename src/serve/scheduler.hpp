// Continuous batching for one model: a bounded waiting queue and one engine thread that owns the
// interpreter Session. Each turn of the engine admits waiting requests into free slots (their
// prompts begin prefilling), runs packed prefill launches over the prompts still prefilling
// (several prompts share one; back to back while each gives prompts their first tokens, and a
// launch that only carries a chunk of a long prompt ends them), then one decode step for every
// active slot, so a long prompt never stalls the running streams for more than a chunk; a request
// leaves its slot when it finishes (EOS, a stop string, max_tokens) or is cancelled (its client
// went away). Detokenisation and
// stop strings run on the engine thread so a request stops at exactly the token that ends it.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "interp/generate.hpp"
#include "interp/session.hpp"
#include "serve/metrics.hpp"
#include "serve/server_model.hpp"

namespace met::serve {

// One generated token's log-probability under the model's distribution (the log-softmax of its
// logits row, before temperature, top-p and top-k), and the `top` most likely tokens of that row.
struct TokenLogprob {
  std::int32_t token = 0;
  float logprob = 0;
  std::vector<std::pair<std::int32_t, float>> top;  // most likely first
};
// log_softmax(row)[token] and the `top` largest entries of log_softmax(row) (ties: lower id first).
TokenLogprob log_softmax_at(const std::vector<float>& row, std::int32_t token, int top);

struct GenParams {
  std::vector<std::int32_t> prompt;
  int logprobs = -1;  // -1: none; else log-probabilities per token with this many alternatives
  std::int64_t max_tokens = 16;
  interp::Sampling sampling;
  std::vector<std::string> stop;  // stop strings: the text ends before the first one, which is not emitted
  bool ignore_eos = false;
};

// What a request's HTTP handler reads; the engine writes. Shared by both.
class RequestState {
 public:
  struct Update {
    std::string text;  // text completed since the last take
    bool done = false;
    std::string finish_reason;  // stop | length | abort
    std::int64_t completion_tokens = 0;
    int error_status = 0;  // non-zero: the request failed (503: backend fault)
    std::string error;
    std::vector<TokenLogprob> logprobs;  // one per token generated since the last take (when asked)
  };
  // Blocks until there is new text, the request is done, or `timeout` passes.
  Update take(std::chrono::milliseconds timeout);
  // The client went away: the engine frees the slot at its next step.
  void cancel() { cancelled_.store(true, std::memory_order_release); }
  bool cancelled() const { return cancelled_.load(std::memory_order_acquire); }

  // Engine side.
  void push(const std::string& text, std::int64_t completion_tokens);
  void add_logprob(TokenLogprob lp);  // read with the next push's text
  void finish(const std::string& reason, std::int64_t completion_tokens);
  void fail(int status, const std::string& message);

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::string text_;
  bool done_ = false;
  std::string reason_;
  std::int64_t tokens_ = 0;
  int status_ = 0;
  std::string error_;
  std::vector<TokenLogprob> logprobs_;
  std::atomic<bool> cancelled_{false};
};

class Engine {
 public:
  enum class Submit { accepted, queue_full, faulted };

  // `queue`: waiting requests beyond the busy slots (0: none wait). The model must outlive it.
  static Expected<std::unique_ptr<Engine>> start(ServedModel& model, Metrics& metrics, std::size_t queue);
  ~Engine();

  Submit submit(std::shared_ptr<RequestState> state, GenParams params);
  // Several requests that arrive together: admitted in one turn of the engine (so their prompts
  // share prefill launches), all accepted or none.
  Submit submit_many(std::vector<std::pair<std::shared_ptr<RequestState>, GenParams>> requests);
  // Prefill launches the engine has run (each may carry several prompts).
  std::int64_t prefill_launches() const { return prefill_launches_.load(std::memory_order_acquire); }
  // Non-empty once the backend failed: every later request is refused (503).
  std::string fault() const;
  std::int64_t slots() const { return slots_; }

 private:
  struct Waiting {
    std::shared_ptr<RequestState> state;
    GenParams params;
    std::chrono::steady_clock::time_point arrival;
  };
  struct Active;
  Engine(ServedModel& model, Metrics& metrics, std::size_t queue, interp::Session session);
  void loop();
  void admit(Waiting w);
  // Runs packed prefill launches and hands each finished prompt its first token: back to back while
  // each launch finishes a prompt, until one carries only a long prompt's chunk or none is left.
  void prefill_turn();
  std::int64_t busy() const { return session_.active() + session_.prefilling(); }
  // Applies the token generated in `slot`; returns true when the request finished (its slot is to be
  // freed). A request whose prompt and completion fill the context finishes with "length" (the
  // count the server checks max_tokens against), so no step ever overruns its slot.
  bool on_token(Active& a, std::int64_t slot, std::int32_t token);
  void release(std::int64_t slot, const std::string& reason);
  void fail_all(const std::string& message);
  void publish_gauges();

  ServedModel& model_;
  Metrics& metrics_;
  std::size_t queue_cap_;
  interp::Session session_;
  std::int64_t slots_ = 0;

  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Waiting> waiting_;
  bool stop_ = false;
  std::string fault_;
  std::atomic<std::int64_t> running_{0};  // busy slots (decoding or prefilling), as the engine last published them
  std::atomic<std::int64_t> prefill_launches_{0};

  std::vector<std::unique_ptr<Active>> active_;  // per slot; engine thread only
  std::thread thread_;
};

}  // namespace met::serve
