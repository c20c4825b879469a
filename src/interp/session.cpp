// Session: the per-slot bookkeeping, the program choice and the IO fill of packed prefill launches
// and decode steps, following the runtime contract in emit.hpp (prompts from row 0, padding rows
// last into the pad slots, the head reading each finished prompt's last row; decode row r is
// sequence r, an idle row writes the last slot of its own region). Programs are ordered by rows,
// then by packet index: a total order, so two programs of one size always resolve the same way.
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

StepIo StepIo::of(Backend& b, std::size_t program, const emit::KvRing& ring) {
  return {io_of<std::int32_t>(b, program, IoField::tokens),    io_of<std::int32_t>(b, program, IoField::positions),
          io_of<std::int64_t>(b, program, IoField::slots),     io_of<std::int64_t>(b, program, IoField::seq_base),
          io_of<std::int32_t>(b, program, IoField::seq_len),   io_of<std::int64_t>(b, program, IoField::ring_slots),
          io_of<std::int64_t>(b, program, IoField::ring_base), ring};
}

void StepIo::set(std::int64_t r, std::int32_t token, std::int64_t pos, std::int64_t slot, std::int64_t base) const {
  if (tokens) tokens[r] = token;
  if (positions) positions[r] = static_cast<std::int32_t>(pos);
  if (slots) slots[r] = slot;
  if (seq_base) seq_base[r] = base;
  if (seq_len) seq_len[r] = static_cast<std::int32_t>(pos + 1);
  if (ring_slots || ring_base) {
    const emit::KvRing::Rows rows = ring.map(slot, base, pos);
    if (ring_slots) ring_slots[r] = rows.slot;
    if (ring_base) ring_base[r] = rows.base;
  }
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
  for (std::size_t i = 0; i < packet.programs.size(); ++i) {
    if (packet.programs[i].kind != kind) continue;
    const std::string head = packet.programs[i].name + ".io." + emit::io_field_name(IoField::head_rows);
    std::int64_t heads = 0;
    for (const auto& t : packet.tensors)
      if (t.source == MET_SOURCE_IO && t.name == head && !t.shape.empty()) heads = static_cast<std::int64_t>(t.shape[0]);
    out.push_back({i, packet.programs[i].rows, heads});
  }
  std::sort(out.begin(), out.end(),
            [](const ProgramRows& a, const ProgramRows& b) { return a.rows < b.rows || (a.rows == b.rows && a.index < b.index); });
  return out;
}

namespace {

// The smallest bucket that holds `rows`, else the largest (`buckets` ascending, not empty).
const ProgramRows& bucket_for(const std::vector<ProgramRows>& buckets, std::int64_t rows) {
  auto it = std::find_if(buckets.begin(), buckets.end(), [&](const ProgramRows& p) { return p.rows >= rows; });
  return it == buckets.end() ? buckets.back() : *it;
}

}  // namespace

std::vector<PrefillChunk> prefill_chunks(const std::vector<ProgramRows>& buckets, std::int64_t len) {
  std::vector<PrefillChunk> out;
  for (std::int64_t start = 0; start < len;) {
    const std::int64_t rest = len - start;
    const ProgramRows& p = bucket_for(buckets, rest);
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
  for (const auto& p : s.prefill_)
    if (p.heads < 1 || !backend.io(p.index, IoField::head_rows))
      return fail("session: model.pkt's " + packet.programs[p.index].name + " has no head_rows to gather its head from; re-emit it");
  s.max_ctx_ = build.max_ctx;
  s.pad_base_ = build.max_seqs * build.max_ctx;
  s.ring_ = {build.max_ctx, build.max_seqs, build.kv_ring};
  s.slots_.resize(static_cast<std::size_t>(std::min(build.max_seqs, s.decode_.back().rows)));
  for (const auto& t : packet.tensors)
    if (t.source == MET_SOURCE_IO && t.ref == static_cast<std::uint64_t>(IoField::sample_params)) s.sampling_op_ = true;
  return s;
}

std::int64_t Session::active() const {
  return std::count_if(slots_.begin(), slots_.end(), [](const Slot& s) { return s.active; });
}

bool Session::has_free_slot() const {
  return std::any_of(slots_.begin(), slots_.end(), [](const Slot& s) { return !s.active && !s.prefilling; });
}

bool Session::is_prefilling(std::int64_t slot) const {
  return slot >= 0 && slot < max_slots() && slots_[static_cast<std::size_t>(slot)].prefilling;
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

Expected<void> Session::check(const std::vector<std::int32_t>& prompt, const Sampling& sampling) const {
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
  return {};
}

Expected<std::int64_t> Session::begin(const std::vector<std::int32_t>& prompt, const Sampling& sampling) {
  auto free = std::find_if(slots_.begin(), slots_.end(), [](const Slot& s) { return !s.active && !s.prefilling; });
  if (free == slots_.end()) return fail("session: all " + std::to_string(slots_.size()) + " slots are busy");
  MET_CHECK(check(prompt, sampling));
  const std::int64_t slot = free - slots_.begin();
  *free = Slot{};
  free->prefilling = true;
  free->sampling = sampling;
  pending_.push_back({slot, prompt, 0});
  return slot;
}

Expected<std::vector<SlotToken>> Session::prefill() {
  std::vector<SlotToken> out;
  if (pending_.empty()) return out;
  // What the launch takes: whole prompts oldest first while they fit the largest bucket, then the
  // next one's first part, one head row per prompt it finishes.
  const std::int64_t largest = prefill_.back().rows, max_heads = prefill_.back().heads;
  struct Part {
    std::size_t pending = 0;
    std::int64_t row0 = 0, n = 0;
    bool finishes = false;
  };
  std::vector<Part> parts;
  std::int64_t used = 0, heads = 0;
  for (std::size_t i = 0; i < pending_.size() && used < largest; ++i) {
    const std::int64_t rest = static_cast<std::int64_t>(pending_[i].prompt.size()) - pending_[i].done;
    const std::int64_t n = std::min(rest, largest - used);
    const bool finishes = n == rest;
    if (finishes && heads == max_heads) break;
    parts.push_back({i, used, n, finishes});
    used += n;
    heads += finishes ? 1 : 0;
  }
  const ProgramRows& p = bucket_for(prefill_, used);
  if (heads > p.heads)
    return fail("session: prefill_" + std::to_string(p.rows) + " has " + std::to_string(p.heads) + " head rows, fewer than " +
                std::to_string(heads) + " prompts");
  const StepIo io = StepIo::of(*backend_, p.index, ring_);
  auto* head_rows = static_cast<std::int32_t*>(backend_->io(p.index, emit::IoField::head_rows));
  for (std::int64_t h = 0; h < p.heads; ++h) {
    head_rows[h] = 0;  // an unused head row reads row 0 and its result is ignored
    std::uint64_t none = 0;
    set_sample_params(*backend_, p.index, h, Sampling{}, none);
  }
  std::int64_t head = 0;
  for (const Part& part : parts) {
    const Pending& q = pending_[part.pending];
    Slot& s = slots_[static_cast<std::size_t>(q.slot)];
    const std::int64_t base = q.slot * max_ctx_;
    for (std::int64_t k = 0; k < part.n; ++k) {
      const std::int64_t at = q.done + k;
      io.set(part.row0 + k, q.prompt[static_cast<std::size_t>(at)], at, base + at, base);
    }
    if (!part.finishes) continue;
    head_rows[head] = static_cast<std::int32_t>(part.row0 + part.n - 1);
    set_sample_params(*backend_, p.index, head, s.sampling, s.draws);
    ++head;
  }
  for (std::int64_t r = used; r < p.rows; ++r) io.set(r, 0, 0, pad_base_ + r, pad_base_);
  MET_CHECK(backend_->run(p.index));
  ++prefill_launches_;
  head = 0;
  for (const Part& part : parts) {
    Pending& q = pending_[part.pending];
    q.done += part.n;
    if (!part.finishes) continue;
    Slot& s = slots_[static_cast<std::size_t>(q.slot)];
    s.last = pick(s, p.index, head++);
    s.prefilling = false;
    s.active = true;
    s.next_pos = q.done;
    out.push_back({q.slot, s.last});
  }
  pending_.erase(std::remove_if(pending_.begin(), pending_.end(),
                                [](const Pending& q) { return q.done == static_cast<std::int64_t>(q.prompt.size()); }),
                 pending_.end());
  return out;
}

Expected<std::vector<Session::Added>> Session::add_many(const std::vector<std::vector<std::int32_t>>& prompts,
                                                        const std::vector<Sampling>& sampling) {
  if (sampling.size() != prompts.size())
    return fail("session: " + std::to_string(sampling.size()) + " samplings for " + std::to_string(prompts.size()) + " prompts");
  if (!pending_.empty())
    return fail("session: " + std::to_string(pending_.size()) + " begun prompt(s) still prefilling; run prefill() to their end first");
  const auto free = std::count_if(slots_.begin(), slots_.end(), [](const Slot& s) { return !s.active && !s.prefilling; });
  if (static_cast<std::int64_t>(prompts.size()) > free)
    return fail(free == 0 ? "session: all " + std::to_string(slots_.size()) + " slots are busy"
                          : "session: " + std::to_string(prompts.size()) + " prompts for " + std::to_string(free) +
                                " free slots (the others are busy)");
  for (std::size_t i = 0; i < prompts.size(); ++i) MET_CHECK(check(prompts[i], sampling[i]));
  std::vector<std::int64_t> slots;
  for (std::size_t i = 0; i < prompts.size(); ++i) {
    MET_TRY(const std::int64_t slot, begin(prompts[i], sampling[i]));
    slots.push_back(slot);
  }
  std::vector<Added> out(prompts.size());
  for (std::size_t i = 0; i < prompts.size(); ++i) out[i].slot = slots[i];
  auto mine = [&] {
    return std::any_of(slots.begin(), slots.end(), [&](std::int64_t slot) { return is_prefilling(slot); });
  };
  while (mine()) {
    MET_TRY(const auto done, prefill());
    for (const auto& t : done)
      for (std::size_t i = 0; i < slots.size(); ++i)
        if (slots[i] == t.slot) out[i].token = t.token;
  }
  return out;
}

Expected<Session::Added> Session::add(const std::vector<std::int32_t>& prompt, const Sampling& sampling) {
  MET_TRY(auto added, add_many({prompt}, {sampling}));
  return added.front();
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
  const StepIo io = StepIo::of(*backend_, p->index, ring_);
  for (std::int64_t r = 0; r < p->rows; ++r) {
    const bool real = r < max_slots() && slots_[static_cast<std::size_t>(r)].active;
    const std::int64_t base = r * max_ctx_;
    if (real) {
      const std::int64_t at = slots_[static_cast<std::size_t>(r)].next_pos;
      io.set(r, slots_[static_cast<std::size_t>(r)].last, at, base + at, base);
    } else {
      // An idle row (a free slot, or one whose prompt is still being prefilled) writes the last slot
      // of its own region, which a prompt never fills and its own decode writes before reading.
      io.set(r, 0, 0, base + max_ctx_ - 1, base);
    }
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
  if (slot < 0 || slot >= max_slots()) return;
  Slot& s = slots_[static_cast<std::size_t>(slot)];
  s.active = false;
  s.prefilling = false;
  pending_.erase(std::remove_if(pending_.begin(), pending_.end(), [&](const Pending& q) { return q.slot == slot; }), pending_.end());
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
