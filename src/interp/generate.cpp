// generate(): the request's checks (sequences, lengths, vocabulary, forced tokens) with messages that
// name the prompt, then Session::add per prompt and Session::step per decode step. Program choice,
// IO and sampling are the Session's.
#include "interp/generate.hpp"

#include <algorithm>
#include <chrono>

namespace met::interp {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

}  // namespace

Expected<GenerateResult> generate(Backend& backend, const emit::PacketFile& packet, const emit::BuildInfo& build,
                                  const GenerateRequest& req) {
  MET_TRY(Session session, Session::create(backend, packet, build));
  const std::int64_t vocab = session.vocab();
  const auto n_seq = static_cast<std::int64_t>(req.prompts.size());
  if (n_seq == 0) return fail("generate: no prompt");
  if (n_seq > session.max_slots())
    return fail("generate: " + std::to_string(n_seq) + " sequences, but the emit holds at most " +
                std::to_string(session.max_slots()));
  if (req.max_tokens < 1) return fail("generate: --max-tokens must be >= 1");
  for (std::size_t s = 0; s < req.prompts.size(); ++s) {
    const auto len = static_cast<std::int64_t>(req.prompts[s].size());
    if (len == 0) return fail("generate: prompt " + std::to_string(s) + " is empty");
    if (len + req.max_tokens - 1 > build.max_ctx)
      return fail("generate: prompt " + std::to_string(s) + " (" + std::to_string(len) + " tokens) plus " +
                  std::to_string(req.max_tokens) + " new tokens exceeds the emit's max context " + std::to_string(build.max_ctx));
    for (auto t : req.prompts[s])
      if (t < 0 || t >= vocab)
        return fail("generate: prompt " + std::to_string(s) + ": token id " + std::to_string(t) + " outside the vocabulary of " +
                    std::to_string(vocab));
  }
  if (!req.forced.empty()) {
    if (req.forced.size() != req.prompts.size())
      return fail("generate: " + std::to_string(req.forced.size()) + " forced token lists for " +
                  std::to_string(req.prompts.size()) + " prompts");
    for (std::size_t s = 0; s < req.forced.size(); ++s) {
      if (static_cast<std::int64_t>(req.forced[s].size()) + 1 < req.max_tokens)
        return fail("generate: forced tokens of sequence " + std::to_string(s) + " cover " +
                    std::to_string(req.forced[s].size()) + " steps; " + std::to_string(req.max_tokens - 1) + " needed");
      for (auto t : req.forced[s])
        if (t < 0 || t >= vocab) return fail("generate: forced token " + std::to_string(t) + " outside the vocabulary");
    }
  }
  MET_CHECK(backend.reset_kv());
  GenerateResult out;
  out.tokens.assign(static_cast<std::size_t>(n_seq), {});
  out.logits.assign(static_cast<std::size_t>(n_seq), {});
  std::vector<std::int64_t> slot(static_cast<std::size_t>(n_seq));
  auto record = [&](std::size_t seq, std::int32_t token) {
    if (req.keep_logits) out.logits[seq].push_back(session.logits(slot[seq]));
    out.tokens[seq].push_back(token);
  };

  const auto t0 = Clock::now();
  // The prompts share prefill launches; each prompt's logits are read after the launch that finished it.
  std::vector<std::size_t> seq_of(static_cast<std::size_t>(session.max_slots()));
  for (std::size_t s = 0; s < req.prompts.size(); ++s) {
    MET_TRY(slot[s], session.begin(req.prompts[s], req.sampling));
    seq_of[static_cast<std::size_t>(slot[s])] = s;
  }
  while (session.prefilling() > 0) {
    MET_TRY(const auto done, session.prefill());
    for (const auto& t : done) record(seq_of[static_cast<std::size_t>(t.slot)], t.token);
  }
  out.prefill_seconds = seconds_since(t0);

  const auto t1 = Clock::now();
  for (std::int64_t step = 1; step < req.max_tokens; ++step) {
    if (!req.forced.empty())
      for (std::size_t s = 0; s < slot.size(); ++s) session.force(slot[s], req.forced[s][static_cast<std::size_t>(step - 1)]);
    MET_TRY(const auto tokens, session.step());
    for (const auto& t : tokens) {
      const auto seq = static_cast<std::size_t>(std::find(slot.begin(), slot.end(), t.slot) - slot.begin());
      record(seq, t.token);
    }
    ++out.decode_steps;
  }
  out.decode_seconds = seconds_since(t1);
  return out;
}

}  // namespace met::interp
