#include "interp/optest.hpp"

#include <fmt/format.h>

#include <cmath>
#include <cstring>
#include <random>
#include <set>

#include "emit/abi_doc.hpp"
#include "emit/opcodes.hpp"
#include "interp/collective_plan.hpp"
#include "kernels/common/interp/smem.h"

namespace met::interp {

namespace {

float bf16_value(std::uint16_t b) {
  const std::uint32_t bits = static_cast<std::uint32_t>(b) << 16;
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}
std::uint16_t bf16_bits(float f) {  // round to nearest even (finite inputs)
  std::uint32_t bits;
  std::memcpy(&bits, &f, sizeof bits);
  return static_cast<std::uint16_t>((bits + 0x7fffu + ((bits >> 16) & 1u)) >> 16);
}

std::uint64_t mix(std::uint64_t a, std::uint64_t b) {
  std::uint64_t x = a ^ (b + 0x9e3779b97f4a7c15ull + (a << 6) + (a >> 2));
  x ^= x >> 31;
  x *= 0xbf58476d1ce4e5b9ull;
  return x ^ (x >> 29);
}
std::uint64_t hash(const std::string& s) {
  std::uint64_t h = 1469598103934665603ull;
  for (unsigned char c : s) h = (h ^ c) * 1099511628211ull;
  return h;
}

// Random bytes for an operand: bf16 and f32 values in [-1, 1) (split-state (max, sum) pairs kept
// sensible), integers in [0, bound).
std::string random_tensor(const emit::TensorDesc& t, std::uint64_t seed, std::int64_t bound, float spread = 1.0f) {
  std::mt19937_64 g(seed);
  std::uniform_real_distribution<float> u(-spread, spread);
  std::string out(t.bytes, '\0');
  const bool ml = t.name.size() >= 7 && t.name.compare(t.name.size() - 7, 7, "part_ml") == 0;
  switch (t.dtype) {
    case MET_DTYPE_BF16:
      for (std::uint64_t i = 0; i + 2 <= t.bytes; i += 2) {
        const std::uint16_t b = bf16_bits(u(g));
        std::memcpy(out.data() + i, &b, 2);
      }
      break;
    case MET_DTYPE_F32:
      for (std::uint64_t i = 0; i + 4 <= t.bytes; i += 4) {
        float f = u(g);
        if (ml) f = (i / 4) % 2 == 0 ? 2.0f * f : 1.5f + f;  // (max score, positive sum)
        std::memcpy(out.data() + i, &f, 4);
      }
      break;
    case MET_DTYPE_I32:
      for (std::uint64_t i = 0; i + 4 <= t.bytes; i += 4) {
        const auto v = static_cast<std::int32_t>(g() % static_cast<std::uint64_t>(std::max<std::int64_t>(1, bound)));
        std::memcpy(out.data() + i, &v, 4);
      }
      break;
    default:
      for (auto& c : out) c = static_cast<char>(g());
      break;
  }
  return out;
}

// The bound of an integer operand's random values: the vocabulary, except an expert op's routed
// ids, which take the experts and one id past them (a slot routed to no expert), so the routed
// experts are exercised and so is the bodies' handling of an id that is no expert.
// The grouped experts' ops name their experts (moe_group's ids take them and one past them) and
// read each slot's place (moe_combine's pos: the places and one past them, a place no slot has).
std::int64_t int_bound(const emit::OpcodeInfo& op, const emit::InstrDesc& d, const emit::PacketFile& f, std::size_t operand,
                       std::int64_t vocab) {
  const int ids = emit::tensor_index(op, "ids"), pos = emit::tensor_index(op, "pos");
  if (pos >= 0 && static_cast<std::size_t>(pos) == operand && !op.tensors[operand].write)
    return emit::named_int(op, d, "rows") * emit::named_int(op, d, "top_k") + 1;
  if (ids < 0 || static_cast<std::size_t>(ids) != operand || (op.family != "moe_gemv" && op.family != "moe_gemm")) return vocab;
  if (emit::int_index(op, "experts") >= 0) return emit::named_int(op, d, "experts") + 1;
  const bool down = op.name.starts_with("moe_down");
  const int w = emit::tensor_index(op, down ? "w_down" : "w_gate_up");
  const int per = emit::int_index(op, down ? "hidden" : "inter");
  if (w < 0 || per < 0 || d.tensors[static_cast<std::size_t>(w)] == MET_NO_TENSOR) return vocab;
  const auto& wt = f.tensors[d.tensors[static_cast<std::size_t>(w)]];
  const std::int64_t rows_per_expert = d.ints[static_cast<std::size_t>(per)] * (down ? 1 : 2);
  if (wt.shape.empty() || rows_per_expert <= 0) return vocab;
  return static_cast<std::int64_t>(wt.shape[0]) / rows_per_expert + 1;
}

// A grouped expert GEMM's tiles (moe_group's table, ops.def) of `slots` slots routed at random to
// `experts` experts and one id past them (slots of no expert): each expert's run of places from
// where the one before ended, in tiles of MET_MOE_WGMMA_BM.
std::string random_tiles(const emit::TensorDesc& t, std::uint64_t seed, std::int64_t slots, std::int64_t experts) {
  std::string out(t.bytes, '\0');
  if (experts <= 0 || t.bytes < 16) return out;
  std::mt19937_64 g(seed);
  std::vector<std::int64_t> count(static_cast<std::size_t>(experts), 0);
  for (std::int64_t s = 0; s < slots; ++s) {
    const auto e = static_cast<std::int64_t>(g() % static_cast<std::uint64_t>(experts + 1));
    if (e < experts) ++count[static_cast<std::size_t>(e)];
  }
  std::vector<std::int32_t> rows = {0, 0, 0, 0};
  std::int64_t first = 0;
  for (std::int64_t e = 0; e < experts; ++e) {
    for (std::int64_t j = 0; j < count[static_cast<std::size_t>(e)]; j += MET_MOE_WGMMA_BM)
      rows.insert(rows.end(), {static_cast<std::int32_t>(e), static_cast<std::int32_t>(first + j),
                               static_cast<std::int32_t>(std::min<std::int64_t>(MET_MOE_WGMMA_BM, count[static_cast<std::size_t>(e)] - j)), 0});
    first += count[static_cast<std::size_t>(e)];
  }
  rows[0] = static_cast<std::int32_t>(rows.size() / 4 - 1);
  std::memcpy(out.data(), rows.data(), std::min<std::size_t>(out.size(), rows.size() * 4));
  return out;
}

double value_at(const emit::TensorDesc& t, const std::string& b, std::uint64_t i) {
  switch (t.dtype) {
    case MET_DTYPE_BF16: {
      std::uint16_t v;
      std::memcpy(&v, b.data() + 2 * i, 2);
      return bf16_value(v);
    }
    case MET_DTYPE_F32: {
      float v;
      std::memcpy(&v, b.data() + 4 * i, 4);
      return v;
    }
    case MET_DTYPE_I32: {
      std::int32_t v;
      std::memcpy(&v, b.data() + 4 * i, 4);
      return v;
    }
    case MET_DTYPE_I64: {
      std::int64_t v;
      std::memcpy(&v, b.data() + 8 * i, 8);
      return static_cast<double>(v);
    }
    default: return static_cast<unsigned char>(b[i]);
  }
}


// The IO a program reads, consistent across rows: decode row r is sequence r at a random position
// of its own region; prefill rows are one sequence at positions off..off+rows-1 from a random off
// (a later chunk of a prompt: its keys before off are the cache's, and a sliding layer's ring
// wraps inside the launch where off + rows passes it), its head rows random rows.
void fill_io(Backend& b, const emit::PacketFile& f, std::size_t prog, const emit::BuildInfo& build, std::int64_t vocab,
             std::uint64_t seed, std::vector<std::pair<std::size_t, std::string>>& io) {
  const std::int64_t max_ctx = build.max_ctx;
  const emit::KvRing ring{build.max_ctx, build.max_seqs, build.kv_ring};
  const auto& p = f.programs[prog];
  const bool decode = p.kind == MET_PROGRAM_DECODE;
  std::mt19937_64 g(seed);
  std::vector<std::int32_t> tokens(p.rows), pos(p.rows), lens(p.rows);
  std::vector<std::int64_t> slots(p.rows), base(p.rows), ring_slots(p.rows), ring_base(p.rows);
  const std::int64_t room = max_ctx - static_cast<std::int64_t>(p.rows);  // the emit's buckets fit max_ctx
  const std::int64_t off = decode || room <= 0 ? 0 : static_cast<std::int64_t>(g() % static_cast<std::uint64_t>(room + 1));
  for (std::uint32_t r = 0; r < p.rows; ++r) {
    base[r] = decode ? static_cast<std::int64_t>(r) * max_ctx : 0;
    pos[r] = decode ? static_cast<std::int32_t>(g() % static_cast<std::uint64_t>(std::min<std::int64_t>(max_ctx, 300)))
                    : static_cast<std::int32_t>(off + r);
    slots[r] = base[r] + pos[r];
    lens[r] = pos[r] + 1;
    const emit::KvRing::Rows rows = ring.map(slots[r], base[r], pos[r]);
    ring_slots[r] = rows.slot;
    ring_base[r] = rows.base;
    tokens[r] = static_cast<std::int32_t>(g() % static_cast<std::uint64_t>(vocab));
  }
  for (std::size_t h = 0; h < f.tensors.size(); ++h) {
    const auto& t = f.tensors[h];
    if (t.source != MET_SOURCE_IO || t.name.rfind(p.name + ".io.", 0) != 0) continue;
    std::string bytes(t.bytes, '\0');
    auto put = [&](const void* src, std::size_t n) { std::memcpy(bytes.data(), src, std::min<std::size_t>(n, bytes.size())); };
    switch (static_cast<emit::IoField>(t.ref)) {
      case emit::IoField::tokens: put(tokens.data(), tokens.size() * 4); break;
      case emit::IoField::positions: put(pos.data(), pos.size() * 4); break;
      case emit::IoField::slots: put(slots.data(), slots.size() * 8); break;
      case emit::IoField::seq_base: put(base.data(), base.size() * 8); break;
      case emit::IoField::seq_len: put(lens.data(), lens.size() * 4); break;
      case emit::IoField::ring_slots: put(ring_slots.data(), ring_slots.size() * 8); break;
      case emit::IoField::ring_base: put(ring_base.data(), ring_base.size() * 8); break;
      case emit::IoField::head_rows: {  // each head row reads a random row of the program
        std::vector<std::int32_t> rows(t.bytes / 4);
        for (auto& r : rows) r = static_cast<std::int32_t>(g() % p.rows);
        put(rows.data(), rows.size() * 4);
        break;
      }
      case emit::IoField::sample_params: {  // every row samples: temperature, top_p, top_k, u
        std::vector<float> params;
        for (std::uint64_t r = 0; r < t.bytes / 16; ++r) {
          const float top_k[3] = {0.0f, 5.0f, 50.0f};
          params.insert(params.end(), {0.5f + static_cast<float>(g() % 1000) / 1000.0f, 0.5f + static_cast<float>(g() % 501) / 1000.0f,
                                       top_k[g() % 3], static_cast<float>(g() % 1000000) / 1000000.0f});
        }
        put(params.data(), params.size() * 4);
        break;
      }
      default: continue;  // outputs: filled per case
    }
    io.push_back({h, bytes});
    (void)b;
  }
}

}  // namespace

Expected<std::vector<OptestCase>> run_optest(Backend& test, Backend& ref, const Assets& a, const OptestOptions& o) {
  const auto& f = a.packet;
  std::int64_t vocab = 1;
  for (const auto& t : f.tensors)
    if (t.source == MET_SOURCE_IO && t.ref == static_cast<std::uint64_t>(emit::IoField::logits) && t.shape.size() == 2)
      vocab = static_cast<std::int64_t>(t.shape[1]);
  std::vector<OptestCase> out;
  std::set<std::string> seen;
  for (std::size_t pi = 0; pi < f.programs.size(); ++pi) {
    const auto& p = f.programs[pi];
    if (!o.programs.empty() && std::find(o.programs.begin(), o.programs.end(), p.name) == o.programs.end()) continue;
    std::vector<std::pair<std::size_t, std::string>> io;
    fill_io(test, f, pi, a.build, vocab, mix(o.seed, hash(p.name)), io);
    for (const auto& [h, bytes] : io) {
      MET_CHECK(test.write_tensor(h, bytes.data(), bytes.size()));
      MET_CHECK(ref.write_tensor(h, bytes.data(), bytes.size()));
    }
    for (std::size_t i = 0; i < p.instrs.size(); ++i) {
      const auto& d = p.instrs[i];
      const auto* op = emit::find_opcode(d.opcode);
      if (!op) return fail(fmt::format("{}: program {} instruction {}: unknown opcode {}", a.dir, p.name, i, d.opcode));
      // One case per distinct shape: layers repeat the same instruction with other weights.
      std::string sig = fmt::format("{} s{} ints[{}] imms[{}]", op->name, d.slices, fmt::join(d.ints, ","), fmt::join(d.imms, ","));
      for (auto h : d.tensors)
        if (h != MET_NO_TENSOR) sig += fmt::format(" {}", fmt::join(f.tensors[h].shape, "x"));
      if (!seen.insert(sig).second) continue;
      std::string ints;
      for (std::size_t k = 0; k < d.ints.size() && k < op->ints.size(); ++k)
        ints += fmt::format("{}{}={}", ints.empty() ? "" : " ", op->ints[k], d.ints[k]);
      OptestCase c;
      c.name = fmt::format("{} {}#{} slices={} {}", op->name, p.name, i, d.slices, ints);
      if (!o.filter.empty() && c.name.find(o.filter) == std::string::npos) continue;
      if (f.tp_ranks > 1 && is_collective(d.opcode)) {
        c.skipped = true;
        c.detail = fmt::format("not run: a collective of {} ranks meets every rank's slices, so it runs only in a whole step",
                               f.tp_ranks);
        out.push_back(std::move(c));
        continue;
      }
      // Fresh random scratch and KV operands (IO outputs too), the same on both sides.
      std::vector<std::pair<std::size_t, std::string>> inputs;
      for (std::size_t k = 0; k < d.tensors.size(); ++k) {
        const auto h = d.tensors[k];
        if (h == MET_NO_TENSOR) continue;
        const auto& t = f.tensors[h];
        const bool io_out = t.source == MET_SOURCE_IO &&
                            (t.ref == static_cast<std::uint64_t>(emit::IoField::logits) ||
                             t.ref == static_cast<std::uint64_t>(emit::IoField::out_tokens) ||
                             t.ref == static_cast<std::uint64_t>(emit::IoField::sampled_tokens));
        if (t.source != MET_SOURCE_SCRATCH && t.source != MET_SOURCE_KV && !io_out) continue;
        if (std::any_of(inputs.begin(), inputs.end(), [&](const auto& x) { return x.first == h; })) continue;
        // Logits in a real model's range (tens), so a final soft cap of 30 bends them in bf16.
        const bool logits = t.source == MET_SOURCE_IO && t.ref == static_cast<std::uint64_t>(emit::IoField::logits);
        const std::uint64_t tseed = mix(mix(o.seed, hash(c.name)), h);
        if (op->tensors[k].name == "tiles" && !op->tensors[k].write)
          inputs.push_back({h, random_tiles(t, tseed, emit::named_int(*op, d, "rows") * emit::named_int(*op, d, "top_k"),
                                            emit::named_int(*op, d, "experts"))});
        else
          inputs.push_back({h, random_tensor(t, tseed, int_bound(*op, d, f, k, vocab), logits ? 32.0f : 1.0f)});
      }
      for (const auto& [h, bytes] : inputs) {
        MET_CHECK(test.write_tensor(h, bytes.data(), bytes.size()));
        MET_CHECK(ref.write_tensor(h, bytes.data(), bytes.size()));
      }
      MET_CHECK(test.run_instruction(pi, i));
      MET_CHECK(ref.run_instruction(pi, i));
      // Compare every written operand over the elements either side changed.
      double num = 0, den = 0, max_abs = 0;
      std::uint64_t n = 0, int_mismatch = 0;
      bool nan_mismatch = false;
      for (std::size_t k = 0; k < d.tensors.size() && k < op->tensors.size(); ++k) {
        const auto h = d.tensors[k];
        if (h == MET_NO_TENSOR || !op->tensors[k].write || op->tensors[k].work) continue;
        const auto it = std::find_if(inputs.begin(), inputs.end(), [&](const auto& x) { return x.first == h; });
        if (it == inputs.end()) continue;
        const auto& t = f.tensors[h];
        std::string got(t.bytes, '\0'), want(t.bytes, '\0');
        MET_CHECK(test.read_tensor(h, got.data(), got.size()));
        MET_CHECK(ref.read_tensor(h, want.data(), want.size()));
        const std::uint64_t eb = emit::dtype_bytes(t.dtype);
        for (std::uint64_t e = 0; e < t.bytes / eb; ++e) {
          if (std::memcmp(got.data() + e * eb, it->second.data() + e * eb, eb) == 0 &&
              std::memcmp(want.data() + e * eb, it->second.data() + e * eb, eb) == 0)
            continue;
          ++n;
          const double x = value_at(t, got, e), y = value_at(t, want, e);
          if (t.dtype == MET_DTYPE_I32 || t.dtype == MET_DTYPE_I64) {
            if (x != y) ++int_mismatch;
            continue;
          }
          if (std::isnan(x) || std::isnan(y) || std::isinf(x) || std::isinf(y)) {
            if (!(x == y || (std::isnan(x) && std::isnan(y)))) nan_mismatch = true;
            continue;
          }
          num += (x - y) * (x - y);
          den += y * y;
          max_abs = std::max(max_abs, std::abs(x - y));
        }
      }
      c.elements = n;
      c.max_abs = max_abs;
      c.rel_err = den > 0 ? std::sqrt(num / den) : std::sqrt(num);
      c.pass = n > 0 && !nan_mismatch && int_mismatch == 0 && c.rel_err <= o.tolerance;
      if (n == 0) c.detail = "neither side wrote anything";
      if (nan_mismatch) c.detail = "non-finite values differ";
      if (int_mismatch) c.detail = fmt::format("{} integer outputs differ", int_mismatch);
      out.push_back(std::move(c));
    }
  }
  return out;
}

}  // namespace met::interp
