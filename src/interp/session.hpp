// The one host driver over a Backend (docs/arch/overview.md): a fixed set of sequence slots (the
// emit's max_seqs, at most the largest decode rung), each owning KV region
// [slot*max_ctx, (slot+1)*max_ctx). begin() reserves a free slot for a prompt, prefill() runs one
// packed prefill launch over the begun prompts, step() decodes one token for every active slot,
// remove() frees a slot; sequences join and leave between steps, and a long prompt's chunks
// alternate with decode steps when the caller interleaves prefill() and step(). add() and
// add_many() prefill to the end in one call. `met serve` drives it (src/serve/scheduler.cpp);
// generate() (generate.hpp, `met circuit run`) is a loop over it, so both pick programs, fill the
// IO and draw samples the same way.
//
// Packing: a prefill launch takes the begun prompts oldest first, each whole while its rest fits
// the largest bucket's free rows, the next one's first part when it does not (so a prompt longer
// than a bucket runs in chunks), and at most one prompt per head row; rows carry their own
// position, KV slot and seq_base, prompts side by side from row 0, padding rows last. The launch
// runs the smallest bucket that holds its rows, and its head reads the last row of every prompt
// the launch finishes (head_rows), so each gets its first token from that launch.
//
// Slot choice: begin() takes the LOWEST free slot. Row r of a decode program is sequence r, so a step
// runs the smallest rung whose rows exceed the highest active slot; keeping the active set packed
// at the bottom keeps that rung small. A hole left by a finished sequence is filled by the next
// arrival; active sequences are never moved (that would mean copying their KV).
//
// Sampling: a request's draws are fixed by its Sampling alone (seed, temperature, top-p, top-k),
// whatever slot it lands in and whoever else runs beside it.
#pragma once

#include <cstdint>
#include <vector>

#include "core/expected.hpp"
#include "emit/emit.hpp"
#include "emit/packet.hpp"
#include "interp/backend.hpp"

namespace met::interp {

struct Sampling {
  float temperature = 0.0f;  // 0: greedy (the program's argmax)
  float top_p = 1.0f;
  std::int32_t top_k = 0;  // 0: off
  std::uint64_t seed = 0;
};

// The per-step IO inputs of one program (null where the program lacks the field).
struct StepIo {
  std::int32_t* tokens = nullptr;
  std::int32_t* positions = nullptr;
  std::int64_t* slots = nullptr;
  std::int64_t* seq_base = nullptr;
  std::int32_t* seq_len = nullptr;
  std::int64_t* ring_slots = nullptr;  // the ring caches' slot and base of each row (emit.hpp)
  std::int64_t* ring_base = nullptr;
  emit::KvRing ring;
  static StepIo of(Backend& backend, std::size_t program, const emit::KvRing& ring);
  // Row r feeds `token` at position `pos` of the sequence whose cache region starts at `base`;
  // its K/V go to `slot`, and it attends to pos + 1 keys. The ring caches' rows follow from these
  // (emit::KvRing::map).
  void set(std::int64_t r, std::int32_t token, std::int64_t pos, std::int64_t slot, std::int64_t base) const;
};

// The uniform number in [0, 1) of a request's next draw: a 64-bit Mersenne twister keyed by the
// seed, advanced by one per drawn token. The backend's `sample` op turns it into a token
// (kernels/cpu/sample.hpp has the rule).
float next_uniform(const Sampling& s, std::uint64_t& draws);

// Fills row `row` of a program's sample_params: greedy rows (temperature <= 0) are skipped by the
// sample op; others get their temperature, top-p, top-k and the next uniform number.
void set_sample_params(Backend& backend, std::size_t program, std::int64_t row, const Sampling& s, std::uint64_t& draws);

struct SlotToken {
  std::int64_t slot = 0;
  std::int32_t token = 0;
};

// A program and its rows (a prefill bucket or a decode rung).
struct ProgramRows {
  std::size_t index = 0;
  std::int64_t rows = 0;
  std::int64_t heads = 0;  // rows of its head_rows IO field (prefill: the prompts a launch can finish)
};
// The packet's programs of one kind (MET_PROGRAM_PREFILL or MET_PROGRAM_DECODE), by rows ascending.
std::vector<ProgramRows> programs_by_rows(const emit::PacketFile& packet, std::uint32_t kind);

// One launch of a lone prompt's prefill: `program` of `rows` rows holds tokens [start, start + n)
// in its first n rows, the last `pad` rows padding.
struct PrefillChunk {
  std::size_t program = 0;
  std::int64_t rows = 0, start = 0, n = 0, pad = 0;
};
// The launches that prefill `len` tokens: each takes the smallest bucket that holds the rest of the
// prompt, or else the largest (`buckets` ascending by rows, not empty; len > 0).
std::vector<PrefillChunk> prefill_chunks(const std::vector<ProgramRows>& buckets, std::int64_t len);

class Session {
 public:
  // The backend and packet must outlive the session. Fails when the packet lacks prefill or decode
  // programs with logits.
  static Expected<Session> create(Backend& backend, const emit::PacketFile& packet, const emit::BuildInfo& build);

  std::int64_t max_slots() const { return static_cast<std::int64_t>(slots_.size()); }
  std::int64_t max_ctx() const { return max_ctx_; }
  std::int64_t vocab() const { return vocab_; }
  std::int64_t active() const;  // slots that decode (prefilling ones excluded)
  bool has_free_slot() const;   // neither active nor prefilling
  bool is_active(std::int64_t slot) const;
  // Tokens the slot's KV holds plus the pending one: the position the next step writes.
  std::int64_t position(std::int64_t slot) const;

  // Reserves the lowest free slot for `prompt`; its prefill runs in the next prefill() launches.
  // Refuses an empty prompt, an id outside the vocabulary, a prompt that fills the context, and a
  // full session.
  Expected<std::int64_t> begin(const std::vector<std::int32_t>& prompt, const Sampling& sampling);
  // Prompts begun whose prefill has not finished.
  std::int64_t prefilling() const { return static_cast<std::int64_t>(pending_.size()); }
  bool is_prefilling(std::int64_t slot) const;
  // One packed prefill launch (the packing rule above); the first token of every prompt it
  // finished, whose slots are active from now on. Nothing to prefill: no launch, no tokens.
  Expected<std::vector<SlotToken>> prefill();
  // Prefill launches run so far (what packing saves shows here).
  std::int64_t prefill_launches() const { return prefill_launches_; }

  // Prefills `prompt` into the lowest free slot and samples its first token (begin, then prefill
  // until it is done). Refused as begin() refuses, and while prompts begun by begin() are still
  // prefilling (their first tokens would come out of these launches and be lost).
  struct Added {
    std::int64_t slot = 0;
    std::int32_t token = 0;
  };
  Expected<Added> add(const std::vector<std::int32_t>& prompt, const Sampling& sampling);
  // Several prompts packed into shared launches, each in the next lowest free slot; in prompt order.
  // `sampling` has one entry per prompt. All are checked before any is begun.
  Expected<std::vector<Added>> add_many(const std::vector<std::vector<std::int32_t>>& prompts,
                                        const std::vector<Sampling>& sampling);
  // One decode step for every active slot (in slot order). A slot whose context is full is refused:
  // the caller removes sequences before they reach max_ctx.
  Expected<std::vector<SlotToken>> step();
  // Frees an active or prefilling slot.
  void remove(std::int64_t slot);

  // Teacher forcing: the next step feeds `token` for an active slot instead of the slot's own last
  // token (which add() or step() still returned as its choice).
  void force(std::int64_t slot, std::int32_t token);
  // The logits the slot's latest token was chosen from (its row of the program that chose it), valid
  // until that program runs again (read them after each prefill() or step()); empty for an
  // inactive slot. The cuda backend copies logits back only when asked.
  std::vector<float> logits(std::int64_t slot) const;
  // Whether the next add() and step() leave the logits readable by logits() (Backend::set_fetch_logits).
  void fetch_logits(bool on) { backend_->set_fetch_logits(on); }

  // The decode rung a step with these active slots runs (exposed for tests).
  std::int64_t rung_rows() const;

 private:
  using Prog = ProgramRows;
  struct Slot {
    bool active = false;
    bool prefilling = false;  // begun: its prompt is in pending_
    std::int64_t next_pos = 0;  // position of `last` (its K/V is written by the next step)
    std::int32_t last = 0;
    Sampling sampling;
    std::uint64_t draws = 0;
    std::size_t program = 0;  // where the latest token was chosen: program and row of its head
    std::int64_t row = 0;
  };
  // A begun prompt: `done` of its tokens are in its slot's KV.
  struct Pending {
    std::int64_t slot = 0;
    std::vector<std::int32_t> prompt;
    std::int64_t done = 0;
  };
  Session() = default;
  Expected<void> check(const std::vector<std::int32_t>& prompt, const Sampling& sampling) const;
  std::int32_t pick(Slot& s, std::size_t program, std::int64_t row);
  const Prog* rung_for(std::int64_t highest) const;

  Backend* backend_ = nullptr;
  std::vector<Prog> prefill_, decode_;
  std::vector<Slot> slots_;
  std::vector<Pending> pending_;  // oldest first
  std::int64_t prefill_launches_ = 0;
  std::int64_t max_ctx_ = 0, vocab_ = 0, pad_base_ = 0;
  emit::KvRing ring_;
  bool sampling_op_ = false;  // the programs carry a sample op (non-greedy requests need it)
};

}  // namespace met::interp
