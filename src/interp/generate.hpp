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
  std::int32_t top_k = 0;    // 0: off
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

// The per-step IO inputs of one program (null where the program lacks the field).
struct StepIo {
  std::int32_t* tokens = nullptr;
  std::int32_t* positions = nullptr;
  std::int64_t* slots = nullptr;
  std::int64_t* seq_base = nullptr;
  std::int32_t* seq_len = nullptr;
  static StepIo of(Backend& backend, std::size_t program);
  // Row r feeds `token` at position `pos` of the sequence whose cache region starts at `base`;
  // its K/V go to `slot`, and it attends to pos + 1 keys.
  void set(std::int64_t r, std::int32_t token, std::int64_t pos, std::int64_t slot, std::int64_t base) const;
};

// The uniform number in [0, 1) of a sequence's next draw: a 64-bit Mersenne twister keyed by the
// seed and the sequence's stream, advanced by one per drawn token. The backend's `sample` op turns
// it into a token (kernels/cpu/sample.hpp has the rule).
float next_uniform(const Sampling& s, std::uint64_t& draws, std::uint64_t stream);

// Fills row `row` of a program's sample_params: greedy rows (temperature <= 0) are skipped by the
// sample op; others get their temperature, top-p, top-k and the next uniform number.
void set_sample_params(Backend& backend, std::size_t program, std::int64_t row, const Sampling& s, std::uint64_t& draws,
                       std::uint64_t stream);

}  // namespace met::interp
