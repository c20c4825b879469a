// A batch of prompts run to a fixed length (`met circuit run`, the benches, the oracle): a loop over
// the Session (session.hpp), the one host driver `met serve` also uses. Sequence i is added i-th, so
// it lands in slot i; every sequence draws from the request's one Sampling exactly as a served
// request with that Sampling would.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/expected.hpp"
#include "emit/emit.hpp"
#include "emit/packet.hpp"
#include "interp/backend.hpp"
#include "interp/session.hpp"

namespace met::interp {

struct GenerateRequest {
  std::vector<std::vector<std::int32_t>> prompts;  // one per sequence; sequence i owns KV region i
  std::int64_t max_tokens = 16;                    // generated tokens per sequence
  Sampling sampling;
  bool keep_logits = false;
  // Teacher forcing (the oracle on random-weight models, whose exact logit ties make free-running
  // greedy paths a coin toss): when set, decode step s feeds forced[seq][s - 1], the reference's
  // token, instead of the sequence's own; tokens and logits still record met's own choices.
  std::vector<std::vector<std::int32_t>> forced;
};

struct GenerateResult {
  std::vector<std::vector<std::int32_t>> tokens;
  // Per sequence: the logits of the prompt's last position, then of each decode step.
  std::vector<std::vector<std::vector<float>>> logits;
  double prefill_seconds = 0, decode_seconds = 0;
  std::int64_t decode_steps = 0;
};

// Zeroes the KV caches, prefills every prompt, then decodes max_tokens - 1 steps for all of them.
Expected<GenerateResult> generate(Backend& backend, const emit::PacketFile& packet, const emit::BuildInfo& build,
                                  const GenerateRequest& request);

}  // namespace met::interp
