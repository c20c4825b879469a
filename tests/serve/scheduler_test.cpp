// The engine (src/serve/scheduler.cpp) on a tiny synth Llama with a byte-per-token tokenizer: a
// request that would run past its slot's context ends there with "length" while the engine stays
// healthy, and a request the session would refuse fails alone instead of faulting the model.
#include <cmath>
#include <doctest/doctest.h>

#include <limits>
#include <string>

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
  Fixture() {
    const auto ckpt = testing::tiny_checkpoint("scheduler", testing::tiny_llama_config());
    testing::EmitSpec spec;
    spec.rungs = {1, 2};
    spec.buckets = {8, 32};
    spec.max_ctx = kMaxCtx;
    assets = testing::write_assets(ckpt, spec, "scheduler-assets");
  }
};
Fixture& fx() {
  static Fixture f;
  return f;
}

std::unique_ptr<serve::ServedModel> served() {
  auto m = std::make_unique<serve::ServedModel>();
  auto a = interp::load_assets(fx().assets.string());
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
