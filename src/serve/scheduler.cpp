// The engine loop: wait for work, admit waiting requests into free slots (their prompts begin),
// drop cancelled ones, run packed prefill launches (first tokens of the prompts they finish), run
// one decode step over the active slots, hand each token to its request (EOS, stop strings,
// max_tokens), publish the gauges. Only the engine thread touches the Session.
#include "serve/scheduler.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <numeric>

namespace met::serve {
namespace {

using Clock = std::chrono::steady_clock;

double seconds(Clock::duration d) { return std::chrono::duration<double>(d).count(); }

}  // namespace

TokenLogprob log_softmax_at(const std::vector<float>& row, std::int32_t token, int top) {
  double max = -INFINITY;
  for (float v : row) max = std::max(max, static_cast<double>(v));
  double sum = 0;
  for (float v : row) sum += std::exp(static_cast<double>(v) - max);
  const double lse = max + std::log(sum);
  auto lp = [&](std::int32_t id) { return static_cast<float>(static_cast<double>(row[static_cast<std::size_t>(id)]) - lse); };
  TokenLogprob out{token, lp(token), {}};
  const auto n = static_cast<std::size_t>(std::clamp<std::int64_t>(top, 0, static_cast<std::int64_t>(row.size())));
  std::vector<std::int32_t> ids(row.size());
  std::iota(ids.begin(), ids.end(), 0);
  std::partial_sort(ids.begin(), ids.begin() + static_cast<std::ptrdiff_t>(n), ids.end(), [&](std::int32_t a, std::int32_t b) {
    const float x = row[static_cast<std::size_t>(a)], y = row[static_cast<std::size_t>(b)];
    return x > y || (x == y && a < b);
  });
  for (std::size_t k = 0; k < n; ++k) out.top.emplace_back(ids[k], lp(ids[k]));
  return out;
}

// ---- RequestState ----------------------------------------------------------------------------

RequestState::Update RequestState::take(std::chrono::milliseconds timeout) {
  std::unique_lock lock(mu_);
  cv_.wait_for(lock, timeout, [&] { return !text_.empty() || done_; });
  Update u;
  u.text = std::move(text_);
  text_.clear();
  u.done = done_;
  u.finish_reason = reason_;
  u.completion_tokens = tokens_;
  u.error_status = status_;
  u.error = error_;
  u.logprobs = std::move(logprobs_);
  logprobs_.clear();
  return u;
}

void RequestState::add_logprob(TokenLogprob lp) {
  std::lock_guard lock(mu_);
  logprobs_.push_back(std::move(lp));
}

void RequestState::push(const std::string& text, std::int64_t completion_tokens) {
  {
    std::lock_guard lock(mu_);
    text_ += text;
    tokens_ = completion_tokens;
  }
  cv_.notify_all();
}

void RequestState::finish(const std::string& reason, std::int64_t completion_tokens) {
  {
    std::lock_guard lock(mu_);
    done_ = true;
    reason_ = reason;
    tokens_ = completion_tokens;
  }
  cv_.notify_all();
}

void RequestState::fail(int status, const std::string& message) {
  {
    std::lock_guard lock(mu_);
    done_ = true;
    reason_ = "error";
    status_ = status;
    error_ = message;
  }
  cv_.notify_all();
}

// ---- Engine ----------------------------------------------------------------------------------

struct Engine::Active {
  std::shared_ptr<RequestState> state;
  GenParams params;
  text::IncrementalDecoder decoder;
  std::string held;  // decoded text held back because it may begin a stop string
  std::int64_t tokens = 0;
  Clock::time_point arrival, last;
  std::string reason;  // set once finished
};

Engine::Engine(ServedModel& model, Metrics& metrics, std::size_t queue, interp::Session session)
    : model_(model), metrics_(metrics), queue_cap_(queue), session_(std::move(session)) {
  slots_ = session_.max_slots();
  active_.resize(static_cast<std::size_t>(slots_));
}

Expected<std::unique_ptr<Engine>> Engine::start(ServedModel& model, Metrics& metrics, std::size_t queue) {
  MET_TRY(interp::Session session, interp::Session::create(*model.backend, model.assets.packet, model.assets.build));
  metrics.add_model(model.id);
  std::unique_ptr<Engine> e(new Engine(model, metrics, queue, std::move(session)));
  e->thread_ = std::thread([raw = e.get()] { raw->loop(); });
  return e;
}

Engine::~Engine() {
  {
    std::lock_guard lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

std::string Engine::fault() const {
  std::lock_guard lock(mu_);
  return fault_;
}

Engine::Submit Engine::submit(std::shared_ptr<RequestState> state, GenParams params) {
  std::vector<std::pair<std::shared_ptr<RequestState>, GenParams>> one;
  one.emplace_back(std::move(state), std::move(params));
  return submit_many(std::move(one));
}

Engine::Submit Engine::submit_many(std::vector<std::pair<std::shared_ptr<RequestState>, GenParams>> requests) {
  {
    std::lock_guard lock(mu_);
    if (!fault_.empty()) return Submit::faulted;
    const auto busy = static_cast<std::size_t>(running_.load(std::memory_order_acquire));
    const std::size_t free = static_cast<std::size_t>(slots_) > busy ? static_cast<std::size_t>(slots_) - busy : 0;
    if (waiting_.size() + requests.size() > queue_cap_ + free) return Submit::queue_full;
    const auto now = Clock::now();
    for (auto& [state, params] : requests) waiting_.push_back({std::move(state), std::move(params), now});
    metrics_.update(model_.id, [&](ModelMetrics& m) { m.waiting = static_cast<std::int64_t>(waiting_.size()); });
  }
  cv_.notify_all();
  return Submit::accepted;
}

void Engine::publish_gauges() {
  std::int64_t waiting = 0;
  {
    std::lock_guard lock(mu_);
    waiting = static_cast<std::int64_t>(waiting_.size());
  }
  const std::int64_t running = busy();
  running_.store(running, std::memory_order_release);
  metrics_.update(model_.id, [&](ModelMetrics& m) {
    m.running = running;
    m.waiting = waiting;
  });
}

void Engine::loop() {
  for (;;) {
    std::vector<Waiting> admit_now;
    {
      std::unique_lock lock(mu_);
      cv_.wait(lock, [&] { return stop_ || !waiting_.empty() || busy() > 0; });
      if (stop_) break;
      std::int64_t free = slots_ - busy();
      while (free > 0 && !waiting_.empty()) {
        admit_now.push_back(std::move(waiting_.front()));
        waiting_.pop_front();
        --free;
      }
    }
    for (auto& w : admit_now) admit(std::move(w));
    for (std::size_t s = 0; s < active_.size(); ++s)
      if (active_[s] && active_[s]->state->cancelled()) {
        active_[s]->reason = "abort";
        active_[s]->state->finish("abort", active_[s]->tokens);
        release(static_cast<std::int64_t>(s), "abort");
      }
    publish_gauges();
    if (session_.prefilling() > 0) prefill_turn();
    if (session_.active() == 0) continue;
    session_.fetch_logits(std::any_of(active_.begin(), active_.end(), [](const auto& a) { return a && a->params.logprobs >= 0; }));
    auto step = session_.step();
    if (!step) {
      fail_all(step.error().message);
      continue;
    }
    for (const auto& st : *step) {
      auto& a = active_[static_cast<std::size_t>(st.slot)];
      if (a && on_token(*a, st.slot, st.token)) release(st.slot, a->reason);
    }
    publish_gauges();
  }
  // Shutting down: nobody will step these again.
  for (std::size_t s = 0; s < active_.size(); ++s)
    if (active_[s]) active_[s]->state->fail(503, "the server is shutting down");
  std::lock_guard lock(mu_);
  for (auto& w : waiting_) w.state->fail(503, "the server is shutting down");
  waiting_.clear();
}

void Engine::admit(Waiting w) {
  if (w.state->cancelled()) {
    w.state->finish("abort", 0);
    metrics_.update(model_.id, [](ModelMetrics& m) { ++m.finished["abort"]; });
    return;
  }
  // What Session::add refuses for the request's own sake fails that request alone; a refusal past
  // these checks is the backend's and fails them all.
  const auto prompt_tokens = static_cast<std::uint64_t>(w.params.prompt.size());
  std::string refused;
  if (w.params.prompt.empty())
    refused = "the prompt is empty";
  else if (static_cast<std::int64_t>(prompt_tokens) >= session_.max_ctx())
    refused =
        "the prompt of " + std::to_string(prompt_tokens) + " tokens fills the context of " + std::to_string(session_.max_ctx());
  for (auto id : w.params.prompt)
    if (refused.empty() && (id < 0 || id >= session_.vocab()))
      refused = "token id " + std::to_string(id) + " is outside the vocabulary";
  if (!refused.empty()) {
    w.state->fail(400, refused);
    metrics_.update(model_.id, [](ModelMetrics& m) { ++m.finished["error"]; });
    return;
  }
  auto slot = session_.begin(w.params.prompt, w.params.sampling);
  if (!slot) {
    w.state->fail(503, slot.error().message);
    fail_all(slot.error().message);
    return;
  }
  metrics_.update(model_.id, [&](ModelMetrics& m) { m.prompt_tokens += prompt_tokens; });
  active_[static_cast<std::size_t>(*slot)] = std::make_unique<Active>(
      Active{std::move(w.state), std::move(w.params), text::IncrementalDecoder(*model_.tokenizer, /*skip_special_tokens=*/true),
             {}, 0, w.arrival, w.arrival, {}});
}

void Engine::prefill_turn() {
  for (;;) {
    bool logprobs = false;
    for (std::size_t s = 0; s < active_.size(); ++s)
      if (active_[s] && session_.is_prefilling(static_cast<std::int64_t>(s)) && active_[s]->params.logprobs >= 0) logprobs = true;
    session_.fetch_logits(logprobs);
    auto done = session_.prefill();
    if (!done) {
      fail_all(done.error().message);
      return;
    }
    prefill_launches_.fetch_add(1, std::memory_order_acq_rel);
    for (const auto& t : *done) {
      auto& a = active_[static_cast<std::size_t>(t.slot)];
      if (a && on_token(*a, t.slot, t.token)) release(t.slot, a->reason);
    }
    publish_gauges();
    // Launches that give prompts their first tokens run back to back (the begun prompts bound
    // them); one that only carried a long prompt's chunk yields to a decode step.
    if (done->empty() || session_.prefilling() == 0) return;
  }
}

bool Engine::on_token(Active& a, std::int64_t slot, std::int32_t token) {
  const auto now = Clock::now();
  ++a.tokens;
  metrics_.update(model_.id, [&](ModelMetrics& m) {
    ++m.generation_tokens;
    if (a.tokens == 1) m.ttft.observe(seconds(now - a.arrival));
    else m.itl.observe(seconds(now - a.last));
  });
  a.last = now;
  // Appends `text` to what was held back; emits up to the first stop string (true: one was hit) or,
  // unless `final`, up to a tail that may still grow into a stop string.
  auto feed = [&](std::string text, bool final) {
    text = a.held + text;
    a.held.clear();
    std::size_t cut = std::string::npos;
    for (const auto& s : a.params.stop) cut = std::min(cut, text.find(s));
    if (cut != std::string::npos) {
      a.state->push(text.substr(0, cut), a.tokens);
      return true;
    }
    std::size_t hold = 0;
    if (!final)
      for (const auto& s : a.params.stop)
        for (std::size_t k = std::min(s.size() - 1, text.size()); k > hold; --k)
          if (text.compare(text.size() - k, k, s, 0, k) == 0) {
            hold = k;
            break;
          }
    a.held = text.substr(text.size() - hold);
    text.resize(text.size() - hold);
    a.state->push(text, a.tokens);
    return false;
  };
  const bool eos = !a.params.ignore_eos && model_.eos.count(token) > 0;
  // The EOS token ends the text without being part of it, so it has no entry either.
  if (a.params.logprobs >= 0 && !eos) a.state->add_logprob(log_softmax_at(session_.logits(slot), token, a.params.logprobs));
  if (eos) {
    feed(a.decoder.finish(), /*final=*/true);
    a.reason = "stop";
  } else if (feed(a.decoder.push(token), /*final=*/false)) {
    a.reason = "stop";
  } else if (a.tokens >= a.params.max_tokens || session_.position(slot) + 1 >= session_.max_ctx()) {
    a.reason = feed(a.decoder.finish(), /*final=*/true) ? "stop" : "length";
  } else {
    return false;
  }
  a.state->finish(a.reason, a.tokens);
  return true;
}

void Engine::release(std::int64_t slot, const std::string& reason) {
  auto& a = active_[static_cast<std::size_t>(slot)];
  const double e2e = seconds(Clock::now() - a->arrival);
  metrics_.update(model_.id, [&](ModelMetrics& m) {
    m.e2e.observe(e2e);
    ++m.finished[reason];
  });
  session_.remove(slot);
  a.reset();
  const std::int64_t running = busy();
  running_.store(running, std::memory_order_release);
  metrics_.update(model_.id, [&](ModelMetrics& m) { m.running = running; });
}

void Engine::fail_all(const std::string& message) {
  const std::string msg = "backend fault: " + message;
  std::fprintf(stderr, "serve: model '%s': %s; its requests now fail with 503\n", model_.id.c_str(), msg.c_str());
  std::deque<Waiting> waiting;
  {
    std::lock_guard lock(mu_);
    fault_ = msg;
    waiting.swap(waiting_);
  }
  for (std::size_t s = 0; s < active_.size(); ++s)
    if (active_[s]) {
      active_[s]->state->fail(503, msg);
      session_.remove(static_cast<std::int64_t>(s));
      active_[s].reset();
      metrics_.update(model_.id, [](ModelMetrics& m) { ++m.finished["error"]; });
    }
  for (auto& w : waiting) w.state->fail(503, msg);
  publish_gauges();
}

}  // namespace met::serve
