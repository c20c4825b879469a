// The engine (src/serve/scheduler.cpp) on a tiny synth Llama with a byte-per-token tokenizer: a
// request that would run past its slot's context ends there with "length" while the engine stays
// healthy, a request the session would refuse fails alone instead of faulting the model, and many
// client threads at once (the case ThreadSanitizer runs: ctest serve_tsan) leave no request behind.
#include <cmath>
#include <doctest/doctest.h>

#include <atomic>
#include <limits>
#include <string>
#include <thread>
#include <vector>

#include "interp/cpu_backend.hpp"
#include "interp/tiny_model.hpp"
#include "serve/metrics.hpp"
#include "serve/scheduler.hpp"
#include "serve/server_model.hpp"

namespace {

using namespace met;
using namespace std::chrono_literals;

constexpr std::int64_t kMaxCtx = 64;

// Token i is the string "t<i>"; no merges, so decode is a concatenation.
std::string tiny_tokenizer_json() {
  nlohmann::json vocab = nlohmann::json::object();
  for (int i = 0; i < 256; ++i) vocab["t" + std::to_string(i)] = i;
  return nlohmann::json{{"model", {{"type", "BPE"}, {"vocab", vocab}, {"merges", nlohmann::json::array()}}}}.dump();
}

struct Fixture {
  std::filesystem::path assets;
  Fixture(std::vector<std::int64_t> rungs, const std::string& dir) {
    const auto ckpt = testing::tiny_checkpoint("scheduler", testing::tiny_llama_config());
    testing::EmitSpec spec;
    spec.rungs = std::move(rungs);
    spec.buckets = {8, 32};
    spec.max_ctx = kMaxCtx;
    assets = testing::write_assets(ckpt, spec, dir);
  }
};
Fixture& fx() {
  static Fixture f({1, 2}, "scheduler-assets");
  return f;
}
// Four slots and head rows: enough for a burst of prompts to share one prefill launch.
Fixture& packed_fx() {
  static Fixture f({1, 4}, "scheduler-packed-assets");
  return f;
}

std::unique_ptr<serve::ServedModel> served(const std::filesystem::path& assets = fx().assets) {
  auto m = std::make_unique<serve::ServedModel>();
  auto a = interp::load_assets(assets.string());
  REQUIRE_MESSAGE(a.ok(), (a.ok() ? "" : a.error().message));
  m->assets = std::move(*a);
  auto b = interp::CpuBackend::create(m->assets);
  REQUIRE_MESSAGE(b.ok(), (b.ok() ? "" : b.error().message));
  m->backend = std::move(*b);
  auto t = text::Tokenizer::from_json(tiny_tokenizer_json(), "tiny tokenizer.json");
  REQUIRE_MESSAGE(t.ok(), (t.ok() ? "" : t.error().message));
  m->tokenizer.emplace(std::move(*t));
  m->id = "tiny";
  m->max_ctx = kMaxCtx;
  m->vocab = 256;
  return m;
}

// Waits (bounded) until the request is done; returns its last update.
serve::RequestState::Update wait_done(serve::RequestState& s) {
  serve::RequestState::Update last;
  std::int64_t tokens = 0;
  for (int i = 0; i < 600 && !last.done; ++i) {
    last = s.take(100ms);
    tokens = std::max(tokens, last.completion_tokens);
  }
  REQUIRE_MESSAGE(last.done, "the request did not finish within 60 s");
  last.completion_tokens = std::max(tokens, last.completion_tokens);
  return last;
}

serve::GenParams params(std::vector<std::int32_t> prompt, std::int64_t max_tokens) {
  serve::GenParams g;
  g.prompt = std::move(prompt);
  g.max_tokens = max_tokens;
  g.ignore_eos = true;
  return g;
}

}  // namespace

TEST_CASE("a request whose max_tokens runs past its slot's context ends at the context with length; the engine stays up") {
  auto m = served();
  serve::Metrics metrics;
  auto e = serve::Engine::start(*m, metrics, /*queue=*/4);
  REQUIRE_MESSAGE(e.ok(), (e.ok() ? "" : e.error().message));
  const std::vector<std::int32_t> prompt = {1, 17, 42, 99, 7, 3, 8, 11};
  auto overrun = std::make_shared<serve::RequestState>();
  REQUIRE((*e)->submit(overrun, params(prompt, std::numeric_limits<std::int64_t>::max())) == serve::Engine::Submit::accepted);
  const auto u = wait_done(*overrun);
  CHECK(u.error_status == 0);
  CHECK(u.finish_reason == "length");
  CHECK(u.completion_tokens == kMaxCtx - static_cast<std::int64_t>(prompt.size()));
  CHECK_MESSAGE((*e)->fault().empty(), (*e)->fault());  // a fault here is the 503-forever outage

  auto next = std::make_shared<serve::RequestState>();
  REQUIRE((*e)->submit(next, params(prompt, 4)) == serve::Engine::Submit::accepted);
  const auto v = wait_done(*next);
  CHECK(v.error_status == 0);
  CHECK(v.finish_reason == "length");
  CHECK(v.completion_tokens == 4);
}

TEST_CASE("a prompt the session refuses (fills the context, id outside the vocabulary) fails alone with 400") {
  auto m = served();
  serve::Metrics metrics;
  auto e = serve::Engine::start(*m, metrics, /*queue=*/4);
  REQUIRE_MESSAGE(e.ok(), (e.ok() ? "" : e.error().message));
  for (const auto& prompt : {std::vector<std::int32_t>(kMaxCtx, 5), std::vector<std::int32_t>{1, 2, 4096}}) {
    auto s = std::make_shared<serve::RequestState>();
    REQUIRE((*e)->submit(s, params(prompt, 2)) == serve::Engine::Submit::accepted);
    const auto u = wait_done(*s);
    CHECK(u.error_status == 400);
    CHECK_MESSAGE((*e)->fault().empty(), (*e)->fault());
  }
  auto ok = std::make_shared<serve::RequestState>();
  REQUIRE((*e)->submit(ok, params({1, 2, 3}, 2)) == serve::Engine::Submit::accepted);
  CHECK(wait_done(*ok).finish_reason == "length");
}

// What a handler thread does around the engine (server.cpp): tokenise, submit (retrying while the
// queue is full), read updates, and cancel when its client goes away, before admission or during
// generation. Catches an update lost between threads (a request that never ends), a request ended
// twice or not counted (the finished counters against the requests accepted), a running or waiting
// gauge left above 0, and, under ThreadSanitizer, any unsynchronised access between these threads,
// the engine thread (Session, IncrementalDecoder) and the /metrics renderer.
TEST_CASE("clients on eight threads submit, cancel and read /metrics while the engine steps: every request ends once, gauges return to 0") {
  constexpr int kClients = 8, kPerClient = 4;
  constexpr std::int64_t kMaxTokens = 6;
  auto m = served();
  serve::Metrics metrics;
  auto e = serve::Engine::start(*m, metrics, /*queue=*/2);
  REQUIRE_MESSAGE(e.ok(), (e.ok() ? "" : e.error().message));
  const std::vector<std::int32_t> ids = {1, 2, 3, 250};
  const std::string text = m->tokenizer->decode(ids, /*skip_special_tokens=*/true);
  const auto encoded = m->tokenizer->encode(text, /*add_special_tokens=*/false);

  enum class Cancel { no, before_admission, after_first_text };
  struct Outcome {
    Cancel cancel = Cancel::no;
    serve::RequestState::Update last;
    std::string text;
    bool tokenizer_agreed = false;
  };
  std::vector<std::vector<Outcome>> outcomes(kClients, std::vector<Outcome>(kPerClient));
  std::atomic<int> clients_left{kClients};
  std::vector<std::thread> clients;
  for (int c = 0; c < kClients; ++c)
    clients.emplace_back([&, c] {
      for (int r = 0; r < kPerClient; ++r) {
        Outcome& o = outcomes[static_cast<std::size_t>(c)][static_cast<std::size_t>(r)];
        o.cancel = static_cast<Cancel>((c + r) % 3);
        o.tokenizer_agreed = m->tokenizer->decode(ids, true) == text && m->tokenizer->encode(text, false) == encoded;
        auto state = std::make_shared<serve::RequestState>();
        std::vector<std::int32_t> prompt = {static_cast<std::int32_t>(1 + c), static_cast<std::int32_t>(100 + r), 7};
        while ((*e)->submit(state, params(prompt, kMaxTokens)) == serve::Engine::Submit::queue_full)
          std::this_thread::sleep_for(1ms);
        if (o.cancel == Cancel::before_admission) state->cancel();
        for (int i = 0; i < 600 && !o.last.done; ++i) {
          o.last = state->take(100ms);
          o.text += o.last.text;
          if (o.cancel == Cancel::after_first_text && !o.text.empty()) state->cancel();
        }
      }
      clients_left.fetch_sub(1);
    });
  std::size_t renders = 0;
  while (clients_left.load() > 0) {
    CHECK(metrics.render().find("vllm:num_requests_running") != std::string::npos);
    CHECK((*e)->fault().empty());
    ++renders;
    std::this_thread::sleep_for(2ms);
  }
  for (auto& t : clients) t.join();
  CHECK(renders > 0);

  std::uint64_t ended = 0, aborted = 0;
  for (const auto& per : outcomes)
    for (const auto& o : per) {
      CHECK(o.tokenizer_agreed);
      REQUIRE_MESSAGE(o.last.done, "a request did not finish within 60 s");
      CHECK(o.last.error_status == 0);
      if (o.cancel == Cancel::no) {
        CHECK(o.last.finish_reason == "length");
        CHECK(o.last.completion_tokens == kMaxTokens);
      } else {
        CHECK((o.last.finish_reason == "abort" || o.last.finish_reason == "length"));
        aborted += o.last.finish_reason == "abort";
      }
      ++ended;
    }
  CHECK(aborted > 0);  // a cancel reached the engine before the request's six tokens were out
  // The engine counts a request and publishes its gauges just after the request sees its end.
  auto counted = [](const serve::ModelMetrics& mm) {
    std::uint64_t n = 0;
    for (const auto& [reason, k] : mm.finished) n += k;
    return n;
  };
  serve::ModelMetrics after = metrics.snapshot("tiny");
  for (int i = 0; i < 500 && (after.running != 0 || after.waiting != 0 || counted(after) != ended); ++i) {
    std::this_thread::sleep_for(10ms);
    after = metrics.snapshot("tiny");
  }
  CHECK(after.running == 0);
  CHECK(after.waiting == 0);
  CHECK(counted(after) == ended);
  CHECK(after.finished["error"] == 0);
  CHECK_MESSAGE((*e)->fault().empty(), (*e)->fault());
}

TEST_CASE("requests that arrive together share one prefill launch and each gets the tokens it gets alone") {
  auto m = served(packed_fx().assets);
  const std::vector<std::vector<std::int32_t>> prompts = {{5, 6, 7}, {1, 17, 42, 99, 7, 3}, {200, 100, 50, 25, 12, 6, 3, 1, 9},
                                                          {9, 8, 7, 6, 5, 4, 3, 2, 1, 0, 11, 12}};  // 30 rows: one bucket of 32
  constexpr std::int64_t kTokens = 4;
  // What each prompt generates alone (generate() on its own session).
  std::vector<std::string> alone;
  for (const auto& p : prompts) {
    interp::GenerateRequest req;
    req.prompts = {p};
    req.max_tokens = kTokens;
    auto r = interp::generate(*m->backend, m->assets.packet, m->assets.build, req);
    REQUIRE_MESSAGE(r.ok(), (r.ok() ? "" : r.error().message));
    alone.push_back(m->tokenizer->decode(r->tokens[0], /*skip_special_tokens=*/true));
  }
  serve::Metrics metrics;
  auto e = serve::Engine::start(*m, metrics, /*queue=*/4);
  REQUIRE_MESSAGE(e.ok(), (e.ok() ? "" : e.error().message));
  std::vector<std::shared_ptr<serve::RequestState>> states;
  std::vector<std::pair<std::shared_ptr<serve::RequestState>, serve::GenParams>> burst;
  for (const auto& p : prompts) {
    states.push_back(std::make_shared<serve::RequestState>());
    burst.emplace_back(states.back(), params(p, kTokens));
  }
  REQUIRE((*e)->submit_many(std::move(burst)) == serve::Engine::Submit::accepted);
  for (std::size_t i = 0; i < states.size(); ++i) {
    INFO("request " << i);
    std::string text;
    serve::RequestState::Update u;
    for (int k = 0; k < 600 && !u.done; ++k) {
      u = states[i]->take(100ms);
      text += u.text;
    }
    REQUIRE(u.done);
    CHECK(u.error_status == 0);
    CHECK(u.completion_tokens == kTokens);
    CHECK(text == alone[i]);
  }
  CHECK((*e)->prefill_launches() == 1);  // one launch per request fails here
  // more than the slots at once: the queue takes the rest, and they go out as slots free up
  auto over = std::vector<std::pair<std::shared_ptr<serve::RequestState>, serve::GenParams>>{};
  for (int i = 0; i < 9; ++i) over.emplace_back(std::make_shared<serve::RequestState>(), params(prompts[0], 1));
  CHECK((*e)->submit_many(std::move(over)) == serve::Engine::Submit::queue_full);  // 9 > 4 free slots + a queue of 4
  CHECK_MESSAGE((*e)->fault().empty(), (*e)->fault());
}

TEST_CASE("log_softmax_at: the token's log-probability and the top entries, most likely first, ties by id") {
  const std::vector<float> row = {1.0f, 3.0f, 3.0f, -2.0f};
  double sum = 0;
  for (float v : row) sum += std::exp(static_cast<double>(v));
  const auto lp = met::serve::log_softmax_at(row, 0, 3);
  CHECK(lp.token == 0);
  CHECK(lp.logprob == doctest::Approx(1.0 - std::log(sum)).epsilon(1e-6));
  REQUIRE(lp.top.size() == 3);
  CHECK(lp.top[0].first == 1);
  CHECK(lp.top[1].first == 2);
  CHECK(lp.top[2].first == 0);
  CHECK(lp.top[0].second == doctest::Approx(3.0 - std::log(sum)).epsilon(1e-6));
  CHECK(met::serve::log_softmax_at(row, 3, 0).top.empty());
  CHECK(met::serve::log_softmax_at(row, 3, 9).top.size() == 4);
}
