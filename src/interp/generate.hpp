// The host driver over a Backend: prefill each sequence (chunks of the prefill buckets, real tokens
// in the last rows, padding rows into the pad slots), then decode steps for all sequences at once
// at the smallest rung that holds them, sampling on the host (greedy or temperature/top-p, seeded).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/expected.hpp"
#include "emit/emit.hpp"
#include "emit/packet.hpp"
#include "interp/backend.hpp"

namespace met::interp {

struct Sampling {
  float temperature = 0.0f;  // 0: greedy (the program's argmax)
  float top_p = 1.0f;
  std::uint64_t seed = 0;
};

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

Expected<GenerateResult> generate(Backend& backend, const emit::PacketFile& packet, const emit::BuildInfo& build,
                                  const GenerateRequest& request);

// Temperature / top-p sampling of one row of logits with a 64-bit Mersenne twister (exposed for tests).
std::int32_t sample(const std::vector<float>& logits, const Sampling& s, std::uint64_t& state_draws, std::uint64_t stream);

}  // namespace met::interp
