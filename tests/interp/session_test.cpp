// Session (src/interp/session.cpp) on a tiny synth Llama, checked against generate() (itself checked
// against the fp32 reference in cpu_backend_test.cpp): sequences that join and leave between decode
// steps, reuse a freed slot, and run on the rung that holds the highest active slot. generate()
// (`met circuit run`) is a loop over the Session that `met serve` drives, so both sample the same
// tokens from the same seed; a second driver with its own program choice, IO fill or RNG stream
// (the old generate keyed the stream by sequence index) fails here.
#include <doctest/doctest.h>

#include <cstring>
#include <deque>
#include <map>

#include "interp/assets.hpp"
#include "interp/backend_factory.hpp"
#include "interp/generate.hpp"
#include "interp/session.hpp"
#include "tiny_model.hpp"

namespace {

using namespace met;

struct Fixture {
  std::filesystem::path assets;
  Fixture() {
    const auto ckpt = testing::tiny_checkpoint("session", testing::tiny_llama_config());
    testing::EmitSpec spec;
    spec.rungs = {1, 2, 4};
    spec.buckets = {8, 32};
    spec.max_ctx = 64;
    assets = testing::write_assets(ckpt, spec, "session-assets");
  }
};
Fixture& fx() {
  static Fixture f;
  return f;
}

struct Loaded {
  interp::Assets assets;
  std::unique_ptr<interp::Backend> backend;
};
std::unique_ptr<Loaded> load() {
  auto l = std::make_unique<Loaded>();
  auto a = interp::load_assets(fx().assets.string());
  REQUIRE_MESSAGE(a.ok(), (a.ok() ? "" : a.error().message));
  l->assets = std::move(*a);
  auto b = interp::make_backend("cpu", l->assets);
  REQUIRE_MESSAGE(b.ok(), (b.ok() ? "" : b.error().message));
  l->backend = std::move(*b);
  return l;
}

interp::Session session_of(Loaded& l) {
  auto s = interp::Session::create(*l.backend, l.assets.packet, l.assets.build);
  REQUIRE_MESSAGE(s.ok(), (s.ok() ? "" : s.error().message));
  return std::move(*s);
}

using Tokens = std::vector<std::int32_t>;

// The `met circuit run` path.
std::vector<Tokens> run_path(const std::vector<Tokens>& prompts, std::int64_t n, const interp::Sampling& s = {}) {
  auto l = load();
  interp::GenerateRequest req;
  req.prompts = prompts;
  req.max_tokens = n;
  req.sampling = s;
  auto r = interp::generate(*l->backend, l->assets.packet, l->assets.build, req);
  REQUIRE_MESSAGE(r.ok(), (r.ok() ? "" : r.error().message));
  return r->tokens;
}

Tokens alone(const Tokens& prompt, std::int64_t n, const interp::Sampling& s = {}) { return run_path({prompt}, n, s)[0]; }

std::vector<interp::SlotToken> step_of(interp::Session& s) {
  auto st = s.step();
  REQUIRE_MESSAGE(st.ok(), (st.ok() ? "" : st.error().message));
  return std::move(*st);
}

const std::vector<std::int32_t> kA = {1, 17, 42, 99, 7}, kB = {200, 100, 50, 25, 12, 6, 3, 1, 9, 9}, kC = {5, 6, 7};

// The `met serve` path, as serve::Engine::loop drives the Session: before each step it admits the
// requests that have arrived (FIFO, into the lowest free slots), then steps every active slot and
// frees the slots whose requests reached max_tokens.
struct Request {
  Tokens prompt;
  interp::Sampling sampling;
  std::int64_t arrives_at_step = 0;
};
std::vector<Tokens> serve_path(const std::vector<Request>& requests, std::int64_t max_tokens) {
  auto l = load();
  auto s = session_of(*l);
  std::vector<Tokens> out(requests.size());
  std::map<std::int64_t, std::size_t> by_slot;  // active slot -> request
  std::deque<std::size_t> waiting;
  std::size_t next = 0, finished = 0;
  auto on_token = [&](std::int64_t slot, std::int32_t token) {
    const std::size_t r = by_slot.at(slot);
    out[r].push_back(token);
    if (static_cast<std::int64_t>(out[r].size()) < max_tokens) return;
    s.remove(slot);
    by_slot.erase(slot);
    ++finished;
  };
  for (std::int64_t step = 0; finished < requests.size(); ++step) {
    REQUIRE(step < 1000);
    while (next < requests.size() && requests[next].arrives_at_step <= step) waiting.push_back(next++);
    while (!waiting.empty() && s.has_free_slot()) {
      const std::size_t r = waiting.front();
      waiting.pop_front();
      auto added = s.add(requests[r].prompt, requests[r].sampling);
      REQUIRE_MESSAGE(added.ok(), (added.ok() ? "" : added.error().message));
      by_slot[added->slot] = r;
      on_token(added->slot, added->token);
    }
    if (s.active() == 0) continue;
    for (const auto& t : step_of(s)) on_token(t.slot, t.token);
  }
  return out;
}

constexpr std::int64_t kSampledTokens = 20;
const interp::Sampling kSampled{/*temperature=*/0.9f, /*top_p=*/0.9f, /*top_k=*/40, /*seed=*/1234};

}  // namespace

TEST_CASE("one sequence stepped by the session gives generate()'s greedy tokens (a wrong position or slot breaks it)") {
  auto l = load();
  auto s = session_of(*l);
  auto added = s.add(kA, {});
  REQUIRE(added.ok());
  CHECK(added->slot == 0);
  std::vector<std::int32_t> got = {added->token};
  for (int i = 0; i < 7; ++i) {
    auto st = s.step();
    REQUIRE(st.ok());
    REQUIRE(st->size() == 1);
    got.push_back((*st)[0].token);
  }
  CHECK(got == alone(kA, 8));
}

TEST_CASE("a sequence that joins between decode steps leaves the running one unchanged, and gets its own tokens") {
  auto l = load();
  auto s = session_of(*l);
  auto a = s.add(kA, {});
  REQUIRE(a.ok());
  std::vector<std::int32_t> ta = {a->token}, tb;
  for (int i = 0; i < 3; ++i) ta.push_back(step_of(s)[0].token);
  auto b = s.add(kB, {});
  REQUIRE(b.ok());
  CHECK(b->slot == 1);
  tb.push_back(b->token);
  for (int i = 0; i < 4; ++i) {
    auto st = s.step();
    REQUIRE(st.ok());
    REQUIRE(st->size() == 2);
    ta.push_back((*st)[0].token);
    tb.push_back((*st)[1].token);
  }
  CHECK(ta == alone(kA, 8));
  CHECK(tb == alone(kB, 5));
}

TEST_CASE("a freed slot is reused by the next arrival, whose tokens ignore the old KV left in it") {
  auto l = load();
  auto s = session_of(*l);
  auto a = s.add(kB, {});
  auto b = s.add(kA, {});
  REQUIRE(a.ok());
  REQUIRE(b.ok());
  for (int i = 0; i < 3; ++i) REQUIRE(s.step().ok());
  s.remove(a->slot);
  CHECK(s.active() == 1);
  auto c = s.add(kC, {});
  REQUIRE(c.ok());
  CHECK(c->slot == 0);  // the lowest free slot
  std::vector<std::int32_t> tc = {c->token};
  for (int i = 0; i < 5; ++i) tc.push_back(step_of(s)[0].token);
  CHECK(tc == alone(kC, 6));
}

TEST_CASE("a step runs the smallest rung above the highest active slot") {
  auto l = load();
  auto s = session_of(*l);
  CHECK(s.max_slots() == 4);
  CHECK(s.rung_rows() == 0);
  for (int i = 0; i < 3; ++i) REQUIRE(s.add(kC, {}).ok());
  CHECK(s.rung_rows() == 4);  // slots 0..2
  s.remove(2);
  CHECK(s.rung_rows() == 2);
  s.remove(1);
  CHECK(s.rung_rows() == 1);
  s.remove(0);
  REQUIRE(s.add(kC, {}).ok());
  REQUIRE(s.add(kC, {}).ok());
  s.remove(0);
  CHECK(s.rung_rows() == 2);  // slot 1 alone still needs two rows: rows are sequences
  auto st = s.step();
  REQUIRE(st.ok());
  REQUIRE(st->size() == 1);
  CHECK((*st)[0].slot == 1);
}

TEST_CASE("seeded sampling per slot repeats whatever slot the request lands in") {
  const interp::Sampling samp{1.2f, 0.9f, 77};
  auto run = [&](int filler) {
    auto l = load();
    auto s = session_of(*l);
    for (int i = 0; i < filler; ++i) REQUIRE(s.add(kC, {}).ok());
    auto a = s.add(kA, samp);
    REQUIRE(a.ok());
    CHECK(a->slot == filler);
    std::vector<std::int32_t> t = {a->token};
    for (int i = 0; i < 6; ++i)
      for (const auto& x : step_of(s))
        if (x.slot == a->slot) t.push_back(x.token);
    return t;
  };
  CHECK(run(0) == run(2));
}

TEST_CASE("a full session, an empty prompt, a prompt that fills the context and an id outside the vocabulary are refused") {
  auto l = load();
  auto s = session_of(*l);
  CHECK_FALSE(s.add({}, {}).ok());
  CHECK_FALSE(s.add(std::vector<std::int32_t>(64, 3), {}).ok());
  CHECK_FALSE(s.add({1, 256}, {}).ok());
  for (int i = 0; i < 4; ++i) REQUIRE(s.add(kC, {}).ok());
  auto full = s.add(kC, {});
  REQUIRE_FALSE(full.ok());
  CHECK(full.error().message.find("busy") != std::string::npos);
}

TEST_CASE("run and serve sample the same tokens from the same seed (temperature, top-p, top-k), in any slot and arrival order") {
  // run: kA in slot 0 and kB in slot 1, prefilled together.
  const auto run = run_path({kA, kB}, kSampledTokens, kSampled);
  // serve: kB arrives first (slot 0); kA joins three steps later (slot 1) beside a greedy kC.
  const auto served = serve_path({{kB, kSampled, 0}, {kC, {}, 0}, {kA, kSampled, 3}}, kSampledTokens);
  REQUIRE(run[0].size() == static_cast<std::size_t>(kSampledTokens));
  CHECK(served[2] == run[0]);
  CHECK(served[0] == run[1]);
  // The sequences compared are sampled, not the argmax path, and the seed decides them.
  const auto greedy = run_path({kA, kB}, kSampledTokens);
  CHECK(run[0] != greedy[0]);
  CHECK(run[1] != greedy[1]);
  interp::Sampling other = kSampled;
  other.seed = 4321;
  CHECK(alone(kA, kSampledTokens, other) != run[0]);
}

TEST_CASE("run's sequences draw as served requests with the one seed do: sequence 1 is not on a stream of its own") {
  const auto run = run_path({kC, kB}, kSampledTokens, kSampled);
  CHECK(run[1] == alone(kB, kSampledTokens, kSampled));
}

TEST_CASE("teacher forcing through the session feeds the forced tokens and records the session's own choices") {
  const Tokens free_run = alone(kA, 8);
  auto l = load();
  interp::GenerateRequest req;
  req.prompts = {kA};
  req.max_tokens = 8;
  req.keep_logits = true;
  // Forcing the tokens greedy decoding chose reproduces it, logits included.
  req.forced = {free_run};
  auto r = interp::generate(*l->backend, l->assets.packet, l->assets.build, req);
  REQUIRE_MESSAGE(r.ok(), (r.ok() ? "" : r.error().message));
  CHECK(r->tokens[0] == free_run);
  REQUIRE(r->logits[0].size() == 8);
  CHECK(r->logits[0][0].size() == 256);
  // Forcing other tokens changes what later steps see, so their own choices move.
  req.forced = {Tokens(8, 3)};
  auto f = interp::generate(*l->backend, l->assets.packet, l->assets.build, req);
  REQUIRE(f.ok());
  CHECK(f->tokens[0][0] == free_run[0]);  // the prefill's token is not forced
  CHECK(f->tokens[0] != free_run);
}

TEST_CASE("a lone prompt is prefilled in the smallest bucket that holds its rest, else in the largest, its tokens in each launch's first rows") {
  using interp::ProgramRows;
  using interp::prefill_chunks;
  const std::vector<ProgramRows> buckets{{4, 64}, {2, 128}, {7, 512}};
  auto chunks = prefill_chunks(buckets, 100);
  REQUIRE(chunks.size() == 1);
  CHECK(chunks[0].program == 2);
  CHECK(chunks[0].rows == 128);
  CHECK(chunks[0].n == 100);
  CHECK(chunks[0].pad == 28);
  chunks = prefill_chunks(buckets, 1100);  // 512 + 512 + the rest of 76 in the bucket of 128
  REQUIRE(chunks.size() == 3);
  CHECK(chunks[0].program == 7);
  CHECK(chunks[0].start == 0);
  CHECK(chunks[0].pad == 0);
  CHECK(chunks[1].start == 512);
  CHECK(chunks[2].program == 2);
  CHECK(chunks[2].start == 1024);
  CHECK(chunks[2].n == 76);
  CHECK(chunks[2].pad == 52);
  std::int64_t covered = 0;
  for (const auto& c : prefill_chunks(buckets, 4096)) {
    CHECK(c.start == covered);
    CHECK(c.n + c.pad == c.rows);
    covered += c.n;
  }
  CHECK(covered == 4096);
}

namespace {

Tokens prompt_of(std::size_t n, std::int32_t salt) {
  Tokens t(n);
  for (std::size_t i = 0; i < n; ++i) t[i] = static_cast<std::int32_t>((salt * 37 + static_cast<std::int32_t>(i) * 11) % 256);
  return t;
}

// A prompt prefilled alone in a fresh session: its first token, the logits it was chosen from, and
// `n` greedy tokens in all.
struct Alone {
  std::int32_t first = 0;
  std::vector<float> logits;
  Tokens tokens;
};
Alone alone_session(const Tokens& prompt, const interp::Sampling& sampling, std::int64_t n) {
  auto l = load();
  auto s = session_of(*l);
  auto a = s.add(prompt, sampling);
  REQUIRE_MESSAGE(a.ok(), (a.ok() ? "" : a.error().message));
  Alone out{a->token, s.logits(a->slot), {a->token}};
  while (static_cast<std::int64_t>(out.tokens.size()) < n) out.tokens.push_back(step_of(s).at(0).token);
  return out;
}

}  // namespace

TEST_CASE("prompts of different lengths packed into shared prefill launches get the first token and logits, bit for bit, they get alone") {
  // Buckets of 8 and 32 rows, 4 head rows: the first launch packs 3 + 7 + 12 tokens and the first 10
  // of the 40-token prompt (a prompt longer than the largest bucket), the second its other 30. A
  // row that read another prompt's keys or position, a head row that read the wrong row, or a draw
  // taken from the wrong request's generator changes a token or a logit here.
  const std::vector<Tokens> prompts = {prompt_of(3, 1), prompt_of(7, 2), prompt_of(12, 3), prompt_of(40, 4)};
  const std::vector<interp::Sampling> sampling = {{}, kSampled, {}, interp::Sampling{0.7f, 1.0f, 0, 99}};
  auto l = load();
  auto s = session_of(*l);
  for (std::size_t i = 0; i < prompts.size(); ++i) {
    auto slot = s.begin(prompts[i], sampling[i]);
    REQUIRE_MESSAGE(slot.ok(), (slot.ok() ? "" : slot.error().message));
    CHECK(*slot == static_cast<std::int64_t>(i));
  }
  // The logits of a launch are read before the next one (which may run the same program) overwrites them.
  std::map<std::int64_t, std::pair<std::int32_t, std::vector<float>>> got;
  std::vector<std::size_t> per_launch;
  while (s.prefilling() > 0) {
    auto done = s.prefill();
    REQUIRE_MESSAGE(done.ok(), (done.ok() ? "" : done.error().message));
    per_launch.push_back(done->size());
    for (const auto& t : *done) got[t.slot] = {t.token, s.logits(t.slot)};
  }
  CHECK(s.prefill_launches() == 2);
  CHECK(per_launch == std::vector<std::size_t>{3, 1});
  REQUIRE(got.size() == prompts.size());
  for (std::size_t i = 0; i < prompts.size(); ++i) {
    INFO("prompt " << i << " of " << prompts[i].size() << " tokens");
    const auto& [token, logits] = got.at(static_cast<std::int64_t>(i));
    const Alone want = alone_session(prompts[i], sampling[i], 1);
    CHECK(token == want.first);
    REQUIRE(logits.size() == want.logits.size());
    CHECK(std::memcmp(logits.data(), want.logits.data(), logits.size() * sizeof(float)) == 0);
  }
}

TEST_CASE("add_many packs its prompts into shared launches and hands back each prompt's slot and first token in order") {
  const std::vector<Tokens> prompts = {kA, kB, kC};
  auto l = load();
  auto s = session_of(*l);
  auto added = s.add_many(prompts, {{}, {}, {}});
  REQUIRE_MESSAGE(added.ok(), (added.ok() ? "" : added.error().message));
  CHECK(s.prefill_launches() == 1);  // 5 + 10 + 3 rows in the bucket of 32
  REQUIRE(added->size() == 3);
  for (std::size_t i = 0; i < prompts.size(); ++i) {
    CHECK((*added)[i].slot == static_cast<std::int64_t>(i));
    CHECK((*added)[i].token == alone(prompts[i], 1)[0]);
  }
  CHECK_FALSE(s.add_many({kA, kB}, {{}, {}}).ok());  // one slot left
  CHECK_FALSE(s.add_many({kA}, {}).ok());            // a sampling per prompt
  CHECK(s.active() == 3);
  s.remove(2);
  REQUIRE(s.begin(kC, {}).ok());  // a begun prompt would finish in add's launch, its token lost: refused
  const auto pending = s.add(kA, {});
  REQUIRE_FALSE(pending.ok());
  CHECK(pending.error().message.find("still prefilling") != std::string::npos);
}

TEST_CASE("decode steps run between the chunks of a long prompt, and neither the running sequence nor the prompt notices") {
  const Tokens running = prompt_of(5, 7), long_prompt = prompt_of(40, 8);
  constexpr std::int64_t kSteps = 6;
  const Alone run_alone = alone_session(running, {}, kSteps + 1), long_alone = alone_session(long_prompt, {}, kSteps);
  auto l = load();
  auto s = session_of(*l);
  // The running sequence sits in slot 1, the long prompt in slot 0 below it: the decode steps taken
  // while it prefills run rung 2, whose idle row 0 must not write into the prompt's KV.
  REQUIRE(s.add(kC, {}).ok());
  auto r = s.add(running, {});
  REQUIRE(r.ok());
  REQUIRE(r->slot == 1);
  s.remove(0);
  auto slot = s.begin(long_prompt, {});
  REQUIRE(slot.ok());
  CHECK(*slot == 0);
  CHECK(s.is_prefilling(0));
  CHECK(s.active() == 1);
  Tokens run_tokens = {r->token}, long_tokens;
  for (int i = 0; i < 2; ++i) {  // a chunk of 32, a step, the last 8 tokens, a step
    auto done = s.prefill();
    REQUIRE(done.ok());
    if (i == 0) CHECK(done->empty());
    if (i == 1) {
      REQUIRE(done->size() == 1);
      long_tokens.push_back(done->front().token);
    }
    const auto st = step_of(s);
    for (const auto& t : st) (t.slot == 1 ? run_tokens : long_tokens).push_back(t.token);
  }
  CHECK(s.prefilling() == 0);
  while (static_cast<std::int64_t>(long_tokens.size()) < kSteps)
    for (const auto& t : step_of(s)) (t.slot == 1 ? run_tokens : long_tokens).push_back(t.token);
  run_tokens.resize(std::min(run_tokens.size(), run_alone.tokens.size()));
  CHECK(run_tokens == Tokens(run_alone.tokens.begin(), run_alone.tokens.begin() + static_cast<std::ptrdiff_t>(run_tokens.size())));
  CHECK(long_tokens == long_alone.tokens);
}

TEST_CASE("a prefilling slot can be removed: its prompt leaves the queue and the slot is free again") {
  auto l = load();
  auto s = session_of(*l);
  REQUIRE(s.begin(prompt_of(40, 5), {}).ok());
  REQUIRE(s.prefill().ok());
  CHECK(s.prefilling() == 1);
  CHECK(s.is_prefilling(0));
  s.remove(0);
  CHECK(s.prefilling() == 0);
  CHECK_FALSE(s.is_prefilling(0));
  auto a = s.add(kA, {});
  REQUIRE(a.ok());
  CHECK(a->slot == 0);
  CHECK(a->token == alone(kA, 1)[0]);
}
