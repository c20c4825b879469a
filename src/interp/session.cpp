// Session: the per-slot bookkeeping, the program choice and the IO fill of prefill chunks and
// decode steps, following the runtime contract in emit.hpp (real prefill tokens in the last rows,
// padding rows into the pad slots; decode row r is sequence r, an idle row writes position 0 of its
// own free region). Programs are ordered by rows, then by packet index: a total order, so two
// programs of one size always resolve the same way.
#include "interp/session.hpp"

#include <algorithm>
#include <cmath>
#include <random>

#include "kernels/cpu/bf16.hpp"

namespace met::interp {
namespace {

using emit::IoField;

template <class T>
T* io_of(Backend& b, std::size_t program, IoField f) {
  return static_cast<T*>(b.io(program, f));
}

// Mixes a request's seed into the generator's key (a Weyl step), so nearby seeds start far apart.
constexpr std::uint64_t kSeedMix = 0x9E3779B97F4A7C15ull;

}  // namespace

StepIo StepIo::of(Backend& b, std::size_t program) {
  return {io_of<std::int32_t>(b, program, IoField::tokens), io_of<std::int32_t>(b, program, IoField::positions),
          io_of<std::int64_t>(b, program, IoField::slots), io_of<std::int64_t>(b, program, IoField::seq_base),
          io_of<std::int32_t>(b, program, IoField::seq_len)};
}

void StepIo::set(std::int64_t r, std::int32_t token, std::int64_t pos, std::int64_t slot, std::int64_t base) const {
  if (tokens) tokens[r] = token;
  if (positions) positions[r] = static_cast<std::int32_t>(pos);
  if (slots) slots[r] = slot;
  if (seq_base) seq_base[r] = base;
  if (seq_len) seq_len[r] = static_cast<std::int32_t>(pos + 1);
}

float next_uniform(const Sampling& s, std::uint64_t& draws) {
  std::mt19937_64 rng(s.seed * kSeedMix);
  rng.discard(draws++);
  const double u = static_cast<double>(rng() >> 11) * 0x1.0p-53;  // [0, 1), portable (no std distribution)
  return std::min(static_cast<float>(u), std::nextafter(1.0f, 0.0f));
}

void set_sample_params(Backend& backend, std::size_t program, std::int64_t row, const Sampling& s, std::uint64_t& draws) {
  auto* p = io_of<float>(backend, program, IoField::sample_params);
  if (!p) return;
  p += 4 * row;
  const bool greedy = s.temperature <= 0.0f;
  p[0] = greedy ? 0.0f : s.temperature;
  p[1] = s.top_p;
  p[2] = static_cast<float>(s.top_k);
  p[3] = greedy ? 0.0f : next_uniform(s, draws);
}

std::vector<ProgramRows> programs_by_rows(const emit::PacketFile& packet, std::uint32_t kind) {
  std::vector<ProgramRows> out;
  for (std::size_t i = 0; i < packet.programs.size(); ++i)
    if (packet.programs[i].kind == kind) out.push_back({i, packet.programs[i].rows});
  std::sort(out.begin(), out.end(),
            [](const ProgramRows& a, const ProgramRows& b) { return a.rows < b.rows || (a.rows == b.rows && a.index < b.index); });
  return out;
}

std::vector<PrefillChunk> prefill_chunks(const std::vector<ProgramRows>& buckets, std::int64_t len) {
  std::vector<PrefillChunk> out;
  for (std::int64_t start = 0; start < len;) {
    const std::int64_t rest = len - start;
    auto it = std::find_if(buckets.begin(), buckets.end(), [&](const ProgramRows& p) { return p.rows >= rest; });
    const ProgramRows& p = it == buckets.end() ? buckets.back() : *it;
    const std::int64_t n = std::min(rest, p.rows);
    out.push_back({p.index, p.rows, start, n, p.rows - n});
    start += n;
  }
  return out;
}

Expected<Session> Session::create(Backend& backend, const emit::PacketFile& packet, const emit::BuildInfo& build) {
  Session s;
  s.backend_ = &backend;
  s.prefill_ = programs_by_rows(packet, MET_PROGRAM_PREFILL);
  s.decode_ = programs_by_rows(packet, MET_PROGRAM_DECODE);
  for (const auto& t : packet.tensors)
    if (t.source == MET_SOURCE_IO && t.ref == static_cast<std::uint64_t>(IoField::logits) && t.shape.size() == 2)
      s.vocab_ = static_cast<std::int64_t>(t.shape[1]);
  if (s.prefill_.empty() || s.decode_.empty() || s.vocab_ == 0)
    return fail("session: model.pkt needs prefill and decode programs with logits");
  if (build.max_ctx < 2 || build.max_seqs < 1) return fail("session: build.json max_ctx and max_seqs must be positive");
  s.max_ctx_ = build.max_ctx;
  s.pad_base_ = build.max_seqs * build.max_ctx;
  s.slots_.resize(static_cast<std::size_t>(std::min(build.max_seqs, s.decode_.back().rows)));
  for (const auto& t : packet.tensors)
    if (t.source == MET_SOURCE_IO && t.ref == static_cast<std::uint64_t>(IoField::sample_params)) s.sampling_op_ = true;
  return s;
}

std::int64_t Session::active() const {
  return std::count_if(slots_.begin(), slots_.end(), [](const Slot& s) { return s.active; });
}

bool Session::has_free_slot() const {
  return std::any_of(slots_.begin(), slots_.end(), [](const Slot& s) { return !s.active; });
}

bool Session::is_active(std::int64_t slot) const {
  return slot >= 0 && slot < max_slots() && slots_[static_cast<std::size_t>(slot)].active;
}

std::int64_t Session::position(std::int64_t slot) const {
  return is_active(slot) ? slots_[static_cast<std::size_t>(slot)].next_pos : 0;
}

// Greedy rows take the argmax; others the sample op's token (its parameters were set before the run).
std::int32_t Session::pick(Slot& s, std::size_t program, std::int64_t row) {
  s.program = program;
  s.row = row;
  if (s.sampling.temperature <= 0.0f) return io_of<std::int32_t>(*backend_, program, IoField::out_tokens)[row];
  return io_of<std::int32_t>(*backend_, program, IoField::sampled_tokens)[row];
}

Expected<Session::Added> Session::add(const std::vector<std::int32_t>& prompt, const Sampling& sampling) {
  auto free = std::find_if(slots_.begin(), slots_.end(), [](const Slot& s) { return !s.active; });
  if (free == slots_.end()) return fail("session: all " + std::to_string(slots_.size()) + " slots are busy");
  const auto len = static_cast<std::int64_t>(prompt.size());
  if (len == 0) return fail("session: empty prompt");
  if (sampling.temperature > 0.0f && !sampling_op_)
    return fail("session: the assets have no sample op (emitted by an older met?); re-emit them to sample");
  if (len >= max_ctx_)
    return fail("session: prompt of " + std::to_string(len) + " tokens leaves no room in the context of " +
                std::to_string(max_ctx_));
  for (auto t : prompt)
    if (t < 0 || t >= vocab_)
      return fail("session: token id " + std::to_string(t) + " outside the vocabulary of " + std::to_string(vocab_));
  const std::int64_t slot = free - slots_.begin();
  Slot& s = *free;
  s = Slot{};
  s.sampling = sampling;
  const std::int64_t base = slot * max_ctx_;
  std::int32_t first = 0;
  for (const PrefillChunk& c : prefill_chunks(prefill_, len)) {
    const StepIo io = StepIo::of(*backend_, c.program);
    for (std::int64_t r = 0; r < c.rows; ++r) {
      const bool real = r >= c.pad;
      const std::int64_t at = real ? c.start + r - c.pad : 0;
      io.set(r, real ? prompt[static_cast<std::size_t>(at)] : 0, at, real ? base + at : pad_base_ + r, real ? base : pad_base_);
    }
    // The head reads the last row; only the chunk that ends the prompt draws a token.
    const bool last = c.start + c.n == len;
    set_sample_params(*backend_, c.program, 0, last ? s.sampling : Sampling{}, s.draws);
    MET_CHECK(backend_->run(c.program));
    if (last) first = pick(s, c.program, /*row=*/0);
  }
  s.active = true;
  s.next_pos = len;
  s.last = first;
  return Added{slot, first};
}

const Session::Prog* Session::rung_for(std::int64_t highest) const {
  auto it = std::find_if(decode_.begin(), decode_.end(), [&](const Prog& p) { return p.rows > highest; });
  return it == decode_.end() ? nullptr : &*it;
}

std::int64_t Session::rung_rows() const {
  std::int64_t highest = -1;
  for (std::size_t i = 0; i < slots_.size(); ++i)
    if (slots_[i].active) highest = static_cast<std::int64_t>(i);
  if (highest < 0) return 0;
  const Prog* p = rung_for(highest);
  return p ? p->rows : 0;
}

Expected<std::vector<SlotToken>> Session::step() {
  std::vector<SlotToken> out;
  std::int64_t highest = -1;
  for (std::size_t i = 0; i < slots_.size(); ++i) {
    if (!slots_[i].active) continue;
    highest = static_cast<std::int64_t>(i);
    if (slots_[i].next_pos >= max_ctx_)
      return fail("session: slot " + std::to_string(i) + " has filled its context of " + std::to_string(max_ctx_));
  }
  if (highest < 0) return out;
  const Prog* p = rung_for(highest);
  if (!p) return fail("session: no decode rung holds slot " + std::to_string(highest));
  const StepIo io = StepIo::of(*backend_, p->index);
  for (std::int64_t r = 0; r < p->rows; ++r) {
    const bool real = r < max_slots() && slots_[static_cast<std::size_t>(r)].active;
    const std::int64_t at = real ? slots_[static_cast<std::size_t>(r)].next_pos : 0;
    const std::int64_t base = r * max_ctx_;  // an idle row writes its own free region
    io.set(r, real ? slots_[static_cast<std::size_t>(r)].last : 0, at, base + at, base);
    std::uint64_t none = 0;
    Slot* s = real ? &slots_[static_cast<std::size_t>(r)] : nullptr;
    set_sample_params(*backend_, p->index, r, s ? s->sampling : Sampling{}, s ? s->draws : none);
  }
  MET_CHECK(backend_->run(p->index));
  for (std::int64_t r = 0; r <= highest; ++r) {
    Slot& s = slots_[static_cast<std::size_t>(r)];
    if (!s.active) continue;
    s.last = pick(s, p->index, r);
    ++s.next_pos;
    out.push_back({r, s.last});
  }
  return out;
}

void Session::remove(std::int64_t slot) {
  if (slot >= 0 && slot < max_slots()) slots_[static_cast<std::size_t>(slot)].active = false;
}

void Session::force(std::int64_t slot, std::int32_t token) {
  if (is_active(slot)) slots_[static_cast<std::size_t>(slot)].last = token;
}

std::vector<float> Session::logits(std::int64_t slot) const {
  if (!is_active(slot)) return {};
  const Slot& s = slots_[static_cast<std::size_t>(slot)];
  const auto* l = io_of<std::uint16_t>(*backend_, s.program, IoField::logits);
  std::vector<float> out(static_cast<std::size_t>(vocab_));
  for (std::int64_t i = 0; i < vocab_; ++i) out[static_cast<std::size_t>(i)] = cpu::bf16_to_f32(l[s.row * vocab_ + i]);
  return out;
}

}  // namespace met::interp
