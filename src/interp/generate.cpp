// Prefill and decode scheduling on the host. Program choice: the smallest prefill bucket holding the
// rest of the prompt (else the largest, chunking), the smallest decode rung holding the highest
// sequence index (row r of a decode program is sequence r).
#include "interp/generate.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <numeric>
#include <random>

#include "../../kernels/cpu/bf16.hpp"

namespace met::interp {
namespace {

using Clock = std::chrono::steady_clock;
using emit::IoField;

double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

struct Prog {
  std::size_t index = 0;
  std::int64_t rows = 0;
};

template <class T>
T* field(Backend& b, std::size_t program, IoField f) {
  return static_cast<T*>(b.io(program, f));
}

std::vector<float> logits_row(Backend& b, std::size_t program, std::int64_t row, std::int64_t vocab) {
  const auto* l = field<std::uint16_t>(b, program, IoField::logits);
  std::vector<float> out(static_cast<std::size_t>(vocab));
  for (std::int64_t i = 0; i < vocab; ++i) out[static_cast<std::size_t>(i)] = cpu::bf16_to_f32(l[row * vocab + i]);
  return out;
}

}  // namespace

StepIo StepIo::of(Backend& b, std::size_t program) {
  return {field<std::int32_t>(b, program, IoField::tokens), field<std::int32_t>(b, program, IoField::positions),
          field<std::int64_t>(b, program, IoField::slots), field<std::int64_t>(b, program, IoField::seq_base),
          field<std::int32_t>(b, program, IoField::seq_len)};
}

void StepIo::set(std::int64_t r, std::int32_t token, std::int64_t pos, std::int64_t slot, std::int64_t base) const {
  if (tokens) tokens[r] = token;
  if (positions) positions[r] = static_cast<std::int32_t>(pos);
  if (slots) slots[r] = slot;
  if (seq_base) seq_base[r] = base;
  if (seq_len) seq_len[r] = static_cast<std::int32_t>(pos + 1);
}

float next_uniform(const Sampling& s, std::uint64_t& draws, std::uint64_t stream) {
  std::mt19937_64 rng(s.seed * 0x9E3779B97F4A7C15ull + stream);
  rng.discard(draws++);
  const double u = static_cast<double>(rng() >> 11) * 0x1.0p-53;  // [0, 1), portable (no std distribution)
  return std::min(static_cast<float>(u), std::nextafter(1.0f, 0.0f));
}

void set_sample_params(Backend& backend, std::size_t program, std::int64_t row, const Sampling& s, std::uint64_t& draws,
                       std::uint64_t stream) {
  auto* p = field<float>(backend, program, IoField::sample_params);
  if (!p) return;
  p += 4 * row;
  const bool greedy = s.temperature <= 0.0f;
  p[0] = greedy ? 0.0f : s.temperature;
  p[1] = s.top_p;
  p[2] = static_cast<float>(s.top_k);
  p[3] = greedy ? 0.0f : next_uniform(s, draws, stream);
}

Expected<GenerateResult> generate(Backend& backend, const emit::PacketFile& packet, const emit::BuildInfo& build,
                                  const GenerateRequest& req) {
  std::vector<Prog> prefill, decode;
  std::int64_t vocab = 0;
  for (std::size_t i = 0; i < packet.programs.size(); ++i) {
    const auto& p = packet.programs[i];
    (p.kind == MET_PROGRAM_PREFILL ? prefill : decode).push_back({i, p.rows});
  }
  for (const auto& t : packet.tensors)
    if (t.source == MET_SOURCE_IO && t.ref == static_cast<std::uint64_t>(IoField::logits) && t.shape.size() == 2)
      vocab = static_cast<std::int64_t>(t.shape[1]);
  auto by_rows = [](const Prog& a, const Prog& b) { return a.rows < b.rows; };
  std::sort(prefill.begin(), prefill.end(), by_rows);
  std::sort(decode.begin(), decode.end(), by_rows);
  if (prefill.empty() || decode.empty() || vocab == 0) return fail("assets: model.pkt needs prefill and decode programs with logits");
  const auto n_seq = static_cast<std::int64_t>(req.prompts.size());
  if (n_seq == 0) return fail("generate: no prompt");
  if (n_seq > build.max_seqs || n_seq > decode.back().rows)
    return fail("generate: " + std::to_string(n_seq) + " sequences, but the emit holds at most " +
                std::to_string(std::min(build.max_seqs, decode.back().rows)));
  if (req.max_tokens < 1) return fail("generate: --max-tokens must be >= 1");
  for (std::size_t s = 0; s < req.prompts.size(); ++s) {
    const auto len = static_cast<std::int64_t>(req.prompts[s].size());
    if (len == 0) return fail("generate: prompt " + std::to_string(s) + " is empty");
    if (len + req.max_tokens - 1 > build.max_ctx)
      return fail("generate: prompt " + std::to_string(s) + " (" + std::to_string(len) + " tokens) plus " +
                  std::to_string(req.max_tokens) + " new tokens exceeds the emit's max context " + std::to_string(build.max_ctx));
    for (auto t : req.prompts[s])
      if (t < 0 || t >= vocab) return fail("generate: prompt " + std::to_string(s) + ": token id " + std::to_string(t) + " outside the vocabulary of " + std::to_string(vocab));
  }
  if (!req.forced.empty()) {
    if (req.forced.size() != req.prompts.size())
      return fail("generate: " + std::to_string(req.forced.size()) + " forced token lists for " + std::to_string(req.prompts.size()) + " prompts");
    for (std::size_t s = 0; s < req.forced.size(); ++s) {
      if (static_cast<std::int64_t>(req.forced[s].size()) + 1 < req.max_tokens)
        return fail("generate: forced tokens of sequence " + std::to_string(s) + " cover " + std::to_string(req.forced[s].size()) +
                    " steps; " + std::to_string(req.max_tokens - 1) + " needed");
      for (auto t : req.forced[s])
        if (t < 0 || t >= vocab) return fail("generate: forced token " + std::to_string(t) + " outside the vocabulary");
    }
  }
  MET_CHECK(backend.reset_kv());
  GenerateResult out;
  out.tokens.assign(static_cast<std::size_t>(n_seq), {});
  out.logits.assign(static_cast<std::size_t>(n_seq), {});
  const bool greedy = req.sampling.temperature <= 0.0f;
  std::vector<std::uint64_t> draws(static_cast<std::size_t>(n_seq), 0);
  // Tokens come from the backend: the argmax for greedy requests, the sample op otherwise (its
  // parameters, with this draw's uniform number, are set before the run).
  if (!greedy)
    for (const auto& p : decode)
      if (!field<float>(backend, p.index, IoField::sample_params))
        return fail("generate: the assets have no sample op (emitted by an older met?); re-emit them to sample");
  auto pick = [&](std::size_t seq, std::size_t program, std::int64_t row) -> std::int32_t {
    if (req.keep_logits) out.logits[seq].push_back(logits_row(backend, program, row, vocab));
    return greedy ? field<std::int32_t>(backend, program, IoField::out_tokens)[row]
                  : field<std::int32_t>(backend, program, IoField::sampled_tokens)[row];
  };
  const std::int64_t pad_base = build.max_seqs * build.max_ctx;

  const auto t0 = Clock::now();
  for (std::int64_t s = 0; s < n_seq; ++s) {
    const auto& prompt = req.prompts[static_cast<std::size_t>(s)];
    const std::int64_t len = static_cast<std::int64_t>(prompt.size());
    const std::int64_t base = s * build.max_ctx;
    std::int64_t start = 0;
    while (start < len) {
      const std::int64_t rest = len - start;
      auto it = std::find_if(prefill.begin(), prefill.end(), [&](const Prog& p) { return p.rows >= rest; });
      const Prog& p = it == prefill.end() ? prefill.back() : *it;
      const std::int64_t n = std::min(rest, p.rows), pad = p.rows - n;
      const StepIo io = StepIo::of(backend, p.index);
      for (std::int64_t r = 0; r < p.rows; ++r) {
        const bool real = r >= pad;
        const std::int64_t ps = real ? start + r - pad : 0;
        io.set(r, real ? prompt[static_cast<std::size_t>(ps)] : 0, ps, real ? base + ps : pad_base + r, real ? base : pad_base);
      }
      // The head reads the last row; only the chunk that ends the prompt draws a token.
      Sampling off;
      set_sample_params(backend, p.index, 0, start + n == len ? req.sampling : off, draws[static_cast<std::size_t>(s)],
                        static_cast<std::uint64_t>(s));
      MET_CHECK(backend.run(p.index));
      start += n;
      if (start == len) out.tokens[static_cast<std::size_t>(s)].push_back(pick(static_cast<std::size_t>(s), p.index, 0));
    }
  }
  out.prefill_seconds = seconds_since(t0);

  const auto t1 = Clock::now();
  for (std::int64_t step = 1; step < req.max_tokens; ++step) {
    auto it = std::find_if(decode.begin(), decode.end(), [&](const Prog& p) { return p.rows >= n_seq; });
    const Prog& p = *it;
    const StepIo io = StepIo::of(backend, p.index);
    for (std::int64_t r = 0; r < p.rows; ++r) {
      const bool real = r < n_seq;
      const auto ur = static_cast<std::size_t>(r);
      // Position of the newest token: prompt + tokens generated so far - 1 (its K/V is not cached yet).
      const std::int64_t ps = real ? static_cast<std::int64_t>(req.prompts[ur].size() + out.tokens[ur].size()) - 1 : 0;
      const std::int64_t base = r * build.max_ctx;  // a padding row writes its own unused region
      const std::int32_t prev = real ? (req.forced.empty() ? out.tokens[ur].back() : req.forced[ur][static_cast<std::size_t>(step - 1)]) : 0;
      io.set(r, prev, ps, base + ps, base);
      Sampling off;
      set_sample_params(backend, p.index, r, real ? req.sampling : off, draws[real ? ur : 0], ur);
    }
    MET_CHECK(backend.run(p.index));
    for (std::int64_t r = 0; r < n_seq; ++r) out.tokens[static_cast<std::size_t>(r)].push_back(pick(static_cast<std::size_t>(r), p.index, r));
    ++out.decode_steps;
  }
  out.decode_seconds = seconds_since(t1);
  return out;
}

}  // namespace met::interp
