// cpu backend: tensor storage (mapped weights, one scratch arena, KV caches, IO buffers, generated
// tables computed from build.json), operand tables per instruction, and a persistent pool of stream
// workers. Worker 0 is the calling thread.
#include "interp/cpu_backend.hpp"

#include <algorithm>
#include <array>
#include <cstring>
#include <thread>
#include <vector>

#include "emit/opcodes.hpp"
#include "interp/collective_plan.hpp"
#include "interp/cpu_bodies.hpp"
#include "kernels/cpu/peers.hpp"
#include "interp/io_check.hpp"

namespace met::interp {

namespace {
constexpr std::size_t kMaxOperands = 12;  // Instr.tensors
constexpr std::size_t kBufferAlign = 64;
// Polls of a counter before blocking on it: the producing slice usually runs on another core and
// finishes within microseconds, and a futex sleep + wake costs more than that per wait. With more
// threads than cores (cpu-oracle's one worker per SM) the producer is usually not running while the
// waiter spins, so there a waiter blocks at once: the spins took three quarters of such a run.
constexpr std::uint32_t kSpinPolls = 1 << 11;

inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield");
#endif
}

// Blocks until c >= value: at most `spins` polls, then C++20 atomic wait.
void wait_at_least(const std::atomic<std::uint32_t>& c, std::uint32_t value, std::uint32_t spins) {
  std::uint32_t v = c.load(std::memory_order_acquire);
  for (std::uint32_t spin = 0; v < value && spin < spins; ++spin) {
    cpu_relax();
    v = c.load(std::memory_order_acquire);
  }
  while (v < value) {
    c.wait(v, std::memory_order_acquire);
    v = c.load(std::memory_order_acquire);
  }
}

// The rendezvous of the reference collectives, per slice: slice s of a collective meets slice s of
// the same instruction on every other rank. Before its body every rank has arrived (the slice's
// input is written: stream order and counters guarantee it on each rank), and no rank moves past
// the body until every rank's slice has read the inputs, so no rank overwrites a buffer a peer still
// reads. A cpu emit gives a collective one slice; a GPU class's packets (cpu-oracle) many, placed
// alike on every rank (src/emit/schedule.cpp), so the slices pair without a deadlock.
struct Collectives {
  std::uint32_t ranks = 1;
  std::uint32_t spins = kSpinPolls;                                    // wait_at_least's polls, every rank's
  std::vector<std::vector<std::size_t>> first;                         // [program][instr]: its slice 0's index below
  std::vector<std::unique_ptr<std::atomic<std::uint32_t>[]>> in, out;  // [program][slice of any instruction]
  std::vector<std::size_t> count;                                      // [program]: slices of every instruction

  void arrive(std::size_t p, std::size_t i, std::uint32_t s) { meet(in[p][first[p][i] + s]); }
  void depart(std::size_t p, std::size_t i, std::uint32_t s) { meet(out[p][first[p][i] + s]); }
  void meet(std::atomic<std::uint32_t>& c) const {
    if (ranks == 1) return;
    c.fetch_add(1, std::memory_order_acq_rel);
    c.notify_all();
    wait_at_least(c, ranks, spins);
  }
  void reset(std::size_t p) {
    for (std::size_t k = 0; k < count[p]; ++k) {
      in[p][k].store(0, std::memory_order_relaxed);
      out[p][k].store(0, std::memory_order_relaxed);
    }
  }
};

struct Aligned {
  std::unique_ptr<std::byte[]> raw;
  std::byte* data = nullptr;
  void allocate(std::uint64_t bytes) {
    raw = std::make_unique<std::byte[]>(bytes + kBufferAlign);
    auto p = reinterpret_cast<std::uintptr_t>(raw.get());
    data = raw.get() + ((kBufferAlign - p % kBufferAlign) % kBufferAlign);
    std::memset(data, 0, bytes);
  }
};
}  // namespace

namespace {

// One simulated rank (the only one without --tp): its tensors, operand tables and stream workers.
// Rank 0's stream 0 is the calling thread; every other stream has a worker of its own.
struct Rank {
  const emit::PacketFile* packet = nullptr;
  Aligned arena;
  std::vector<Aligned> owned;                   // KV, IO and generated tensors
  std::vector<std::uint64_t> owned_bytes;
  std::vector<void*> ptr;                       // per tensor handle
  std::vector<std::vector<std::array<void*, kMaxOperands>>> operands;  // [program][instr]
  std::vector<std::vector<CpuBody>> bodies;                            // [program][instr]
  std::vector<std::vector<bool>> collective;                           // [program][instr]
  std::vector<std::unique_ptr<std::atomic<std::uint32_t>[]>> counters; // [program][instr]
  // [program][instr]: the counts some stream waits for, ascending. Only a slice that brings its
  // counter to one of them wakes the counter's waiters: at any other count none of them can go on,
  // and waking every waiter at every slice kept a GPU emit's hundreds of workers in the kernel.
  std::vector<std::vector<std::vector<std::uint32_t>>> wake_at;
  Collectives* coll = nullptr;

  std::uint32_t workers = 1;
  std::uint32_t first_pooled = 1;  // streams below it run on the caller (rank 0: stream 0)
  std::vector<std::thread> pool;
  std::atomic<std::uint32_t> generation{0};
  std::atomic<std::uint32_t> done{0};
  std::atomic<bool> stop{false};
  std::size_t current = 0;

  void walk(std::size_t program, std::uint32_t stream) {
    const auto& p = packet->programs[program];
    auto* ctr = counters[program].get();
    for (const auto& e : p.streams[stream]) {
      for (const auto& w : e.waits) wait_at_least(ctr[w.counter], w.value, coll->spins);
      const bool coll_here = collective[program][e.instr];
      if (coll_here) coll->arrive(program, e.instr, e.slice);  // every rank's input is written
      bodies[program][e.instr](p.instrs[e.instr], e.slice, operands[program][e.instr].data());
      if (coll_here) coll->depart(program, e.instr, e.slice);  // every rank has read them
      const std::uint32_t count = ctr[e.instr].fetch_add(1, std::memory_order_release) + 1;
      const auto& wake = wake_at[program][e.instr];
      if (std::binary_search(wake.begin(), wake.end(), count)) ctr[e.instr].notify_all();
    }
  }

  void worker(std::uint32_t stream) {
    std::uint32_t seen = 0;
    for (;;) {
      generation.wait(seen, std::memory_order_acquire);
      seen = generation.load(std::memory_order_acquire);
      if (stop.load(std::memory_order_acquire)) return;
      walk(current, stream);
      done.fetch_add(1, std::memory_order_release);
      done.notify_all();
    }
  }

  void start(std::size_t program) {
    const std::size_t n = packet->programs[program].instrs.size();
    for (std::size_t i = 0; i < n; ++i) counters[program][i].store(0, std::memory_order_relaxed);
    current = program;
    done.store(0, std::memory_order_relaxed);
    generation.fetch_add(1, std::memory_order_release);  // publishes counters, current and the IO inputs
    generation.notify_all();
  }

  void finish() {
    const std::uint32_t pooled = workers - first_pooled;
    std::uint32_t d = done.load(std::memory_order_acquire);
    while (d < pooled) {
      done.wait(d, std::memory_order_acquire);
      d = done.load(std::memory_order_acquire);
    }
  }

  ~Rank() {
    stop.store(true, std::memory_order_release);
    generation.fetch_add(1, std::memory_order_release);
    generation.notify_all();
    for (auto& t : pool) t.join();
  }
};

}  // namespace

struct CpuBackend::Impl {
  std::optional<LoadedWeights> weights;
  std::vector<MetHostWeight> host;  // per manifest entry, shared by the ranks
  Collectives coll;
  std::vector<std::unique_ptr<Rank>> ranks;
  // The `peers` operand of every collective instruction: each rank's copy of its input, rank order.
  std::vector<std::vector<MetPeers>> peers;  // [program][instr]
  std::vector<SlotBounds> bounds;            // [program]: what its slots fields may name (io_check.hpp)
};

namespace {

void* rank_io(const Rank& rk, std::size_t program, emit::IoField field) {
  const auto& tensors = rk.packet->tensors;
  const std::string suffix = std::string(".io.") + emit::io_field_name(field);
  const std::string name = rk.packet->programs[program].name + suffix;
  for (std::size_t i = 0; i < tensors.size(); ++i)
    if (tensors[i].source == MET_SOURCE_IO && tensors[i].ref == static_cast<std::uint64_t>(field) && tensors[i].name == name)
      return rk.ptr[i];
  return nullptr;
}

// The IO fields the host fills before a step (emit::io_input) go from rank 0 to the others.
Expected<void> copy_inputs(const Rank& from, Rank& to, std::size_t program) {
  for (std::uint32_t field = 0; field < emit::kIoFields; ++field) {
    const auto f = static_cast<emit::IoField>(field);
    if (!emit::io_input(f)) continue;
    void* src = rank_io(from, program, f);
    void* dst = rank_io(to, program, f);
    if (!src && !dst) continue;
    if (!src || !dst) return fail(std::string("cpu backend: io field ") + emit::io_field_name(f) + " is on some ranks only");
    std::uint64_t bytes = 0;
    for (std::size_t i = 0; i < from.ptr.size(); ++i)
      if (from.ptr[i] == src) bytes = from.owned_bytes[i];
    std::memcpy(dst, src, bytes);
  }
  return {};
}

}  // namespace

std::string target_mismatch(const Assets& a, const std::string& backend_class, std::uint32_t threads) {
  const bool cpu_target = a.packet.target_class == "cpu";
  return a.dir + " were emitted for class '" + a.packet.target_class + "' with " + std::to_string(a.packet.sm_count) +
         (cpu_target ? " threads" : " SMs") + "; this backend runs class '" + backend_class + "' with " +
         std::to_string(threads) + " threads";
}

CpuBackend::CpuBackend(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

CpuBackend::~CpuBackend() = default;

namespace {

// A rank's tensors and operand tables over its packet; weights come from the shared host views.
Expected<void> build_rank(Rank& rk, const Assets& a, const emit::PacketFile& pf, std::vector<MetHostWeight>& host) {
  rk.packet = &pf;
  rk.workers = pf.sm_count;
  const auto& tensors = pf.tensors;
  const std::string file = a.dir + "/" + (pf.tp_rank == 0 ? std::string("model.pkt") : rank_packet_name(static_cast<int>(pf.tp_rank)));
  std::uint64_t arena = 0;
  for (const auto& t : tensors)
    if (t.source == MET_SOURCE_SCRATCH) arena = std::max(arena, t.ref + t.bytes);
  rk.arena.allocate(arena);
  rk.ptr.assign(tensors.size(), nullptr);
  rk.owned.resize(tensors.size());
  rk.owned_bytes.assign(tensors.size(), 0);
  for (std::size_t i = 0; i < tensors.size(); ++i) {
    const auto& t = tensors[i];
    switch (t.source) {
      case MET_SOURCE_CHECKPOINT: {
        if (t.ref >= host.size())
          return fail(file + ": tensor '" + t.name + "' names weights.json entry " + std::to_string(t.ref) + " of " +
                      std::to_string(host.size()));
        const auto& hw = host[t.ref];
        if (t.shape.size() == 1 && hw.format != MET_WEIGHT_BF16)
          return fail(a.dir + "/weights.json: vector weight '" + t.name + "' must be bf16 for the cpu bodies");
        rk.ptr[i] = &host[t.ref];
        break;
      }
      case MET_SOURCE_SCRATCH: rk.ptr[i] = rk.arena.data + t.ref; break;
      case MET_SOURCE_GENERATED: {
        MET_TRY(std::string bytes, emit::generated_table(t, a.build, file));
        rk.owned[i].allocate(t.bytes);
        std::memcpy(rk.owned[i].data, bytes.data(), bytes.size());
        rk.ptr[i] = rk.owned[i].data;
        break;
      }
      case MET_SOURCE_KV:
      case MET_SOURCE_IO:
        rk.owned[i].allocate(t.bytes);
        rk.owned_bytes[i] = t.bytes;
        rk.ptr[i] = rk.owned[i].data;
        break;
      default: return fail(file + ": tensor '" + t.name + "': source " + std::to_string(t.source) + " is not run by the cpu backend");
    }
  }
  for (const auto& p : pf.programs) {
    std::vector<std::array<void*, kMaxOperands>> opnds;
    std::vector<CpuBody> rows;
    std::vector<bool> coll;
    for (std::size_t k = 0; k < p.instrs.size(); ++k) {
      const auto& d = p.instrs[k];
      const CpuBody body = cpu_body(d.opcode);
      if (!body)
        return fail(file + ": program " + p.name + " instruction " + std::to_string(k) + ": opcode " + std::to_string(d.opcode) +
                    " has no cpu body");
      std::array<void*, kMaxOperands> o{};
      for (std::size_t t = 0; t < d.tensors.size() && t < kMaxOperands; ++t)
        o[t] = d.tensors[t] == MET_NO_TENSOR ? nullptr : rk.ptr[d.tensors[t]];
      opnds.push_back(o);
      rows.push_back(body);
      coll.push_back(emit::int_index(*emit::find_opcode(d.opcode), "ranks") >= 0);
    }
    rk.operands.push_back(std::move(opnds));
    rk.bodies.push_back(std::move(rows));
    rk.collective.push_back(std::move(coll));
    rk.counters.push_back(std::make_unique<std::atomic<std::uint32_t>[]>(std::max<std::size_t>(1, p.instrs.size())));
    // Every wait names an instruction of its program: the packet reader refuses any other.
    std::vector<std::vector<std::uint32_t>> wake(p.instrs.size());
    for (const auto& stream : p.streams)
      for (const auto& e : stream)
        for (const auto& w : e.waits) wake[w.counter].push_back(w.value);
    for (auto& v : wake) {
      std::sort(v.begin(), v.end());
      v.erase(std::unique(v.begin(), v.end()), v.end());
    }
    rk.wake_at.push_back(std::move(wake));
  }
  return {};
}

// Points every collective's `peers` operand, on every rank, at the table of the ranks' inputs.
// The ranks' programs must agree instruction by instruction: each collective pairs with its peers'.
Expected<void> wire_collectives(CpuBackend::Impl& m, const Assets& a) {
  const auto& r0 = *m.ranks[0]->packet;
  m.peers.resize(r0.programs.size());
  m.coll.ranks = static_cast<std::uint32_t>(m.ranks.size());
  for (std::size_t p = 0; p < r0.programs.size(); ++p) {
    const auto& instrs = r0.programs[p].instrs;
    m.peers[p].assign(instrs.size(), MetPeers{});
    std::vector<std::size_t> first(instrs.size());
    std::size_t slices = 0;
    for (std::size_t i = 0; i < instrs.size(); ++i) {
      first[i] = slices;
      slices += instrs[i].slices;
    }
    m.coll.first.push_back(std::move(first));
    m.coll.count.push_back(slices);
    m.coll.in.push_back(std::make_unique<std::atomic<std::uint32_t>[]>(std::max<std::size_t>(1, slices)));
    m.coll.out.push_back(std::make_unique<std::atomic<std::uint32_t>[]>(std::max<std::size_t>(1, slices)));
    for (std::size_t r = 1; r < m.ranks.size(); ++r)
      if (!same_placement(r0.programs[p], m.ranks[r]->packet->programs[p]))
        return fail(a.dir + "/" + rank_packet_name(static_cast<int>(r)) + ": program " + r0.programs[p].name +
                    " places its slices on other streams than rank 0's; the ranks' collectives would not pair");
    for (std::size_t i = 0; i < instrs.size(); ++i) {
      const emit::OpcodeInfo* op = emit::find_opcode(instrs[i].opcode);
      for (std::size_t r = 1; r < m.ranks.size(); ++r) {
        const auto& other = m.ranks[r]->packet->programs[p];
        if (other.instrs.size() != instrs.size() || other.instrs[i].opcode != instrs[i].opcode ||
            other.instrs[i].slices != instrs[i].slices)
          return fail(a.dir + "/" + rank_packet_name(static_cast<int>(r)) + ": program " + other.name + " instruction " +
                      std::to_string(i) + " differs from rank 0's; the ranks' collectives would not pair");
      }
      if (!m.ranks[0]->collective[p][i]) continue;
      for (std::size_t t = 0; t < op->tensors.size(); ++t) {
        if (op->tensors[t].kind != "peers") continue;
        MetPeers& table = m.peers[p][i];
        table.ranks = static_cast<std::int32_t>(m.ranks.size());
        for (std::size_t r = 0; r < m.ranks.size(); ++r) {
          const auto h = m.ranks[r]->packet->programs[p].instrs[i].tensors[t];
          if (h == MET_NO_TENSOR) return fail(a.dir + ": program " + instrs[i].scope + ": a collective without its input");
          table.part[r] = m.ranks[r]->ptr[h];
        }
        for (auto& rk : m.ranks) rk->operands[p][i][t] = &table;
      }
    }
  }
  return {};
}

}  // namespace

Expected<std::unique_ptr<CpuBackend>> CpuBackend::create(const Assets& a, std::uint32_t threads, bool any_class) {
  const std::uint32_t want = threads ? threads : a.packet.sm_count;
  if ((a.packet.target_class != "cpu" && !any_class) || want != a.packet.sm_count)
    return fail(target_mismatch(a, any_class ? a.packet.target_class : "cpu", want));
  if (a.other_ranks.size() + 1 != a.packet.tp_ranks)
    return fail(a.dir + ": model.pkt is rank 0 of " + std::to_string(a.packet.tp_ranks) + " but " +
                std::to_string(a.other_ranks.size() + 1) + " rank packets were loaded");
  auto impl = std::make_unique<Impl>();
  MET_TRY(LoadedWeights w, LoadedWeights::load(a.weights, a.checkpoint_dir));
  impl->weights.emplace(std::move(w));
  for (std::size_t e = 0; e < impl->weights->size(); ++e) {
    MET_TRY(MetHostWeight h, impl->weights->host_weight(e));
    impl->host.push_back(h);
  }
  std::vector<const emit::PacketFile*> files{&a.packet};
  for (const auto& p : a.other_ranks) files.push_back(&p);
  for (std::size_t r = 0; r < files.size(); ++r) {
    impl->ranks.push_back(std::make_unique<Rank>());
    Rank& rk = *impl->ranks.back();
    rk.coll = &impl->coll;
    rk.first_pooled = r == 0 ? 1 : 0;
    MET_CHECK(build_rank(rk, a, *files[r], impl->host));
  }
  MET_CHECK(wire_collectives(*impl, a));
  // Spin only while every stream worker of every rank can have a core of its own.
  std::uint64_t threads_total = 0;
  for (const auto& rk : impl->ranks) threads_total += rk->workers;
  const unsigned cores = std::thread::hardware_concurrency();
  impl->coll.spins = cores != 0 && threads_total > cores ? 0 : kSpinPolls;  // every rank's waits read it
  for (std::size_t p = 0; p < a.packet.programs.size(); ++p) impl->bounds.push_back(slot_bounds(a.packet, p));
  for (auto& rk : impl->ranks) {
    Rank* raw = rk.get();
    for (std::uint32_t s = raw->first_pooled; s < raw->workers; ++s) raw->pool.emplace_back([raw, s] { raw->worker(s); });
  }
  return std::unique_ptr<CpuBackend>(new CpuBackend(std::move(impl)));
}

void* CpuBackend::io(std::size_t program, emit::IoField field) { return rank_io(*impl_->ranks[0], program, field); }

Expected<void> CpuBackend::run(std::size_t program) {
  auto& m = *impl_;
  Rank& r0 = *m.ranks[0];
  if (program >= r0.packet->programs.size()) return fail("cpu backend: no program " + std::to_string(program));
  MET_CHECK(check_step_io(r0.packet->programs[program], m.bounds[program],
                          static_cast<const std::int64_t*>(io(program, emit::IoField::slots)),
                          static_cast<const std::int64_t*>(io(program, emit::IoField::ring_slots))));
  // Every rank runs the step on the same inputs: rank 0's IO (what the host filled) is copied to
  // the others; the outputs the host reads are rank 0's, which the gather made whole.
  for (std::size_t r = 1; r < m.ranks.size(); ++r) MET_CHECK(copy_inputs(r0, *m.ranks[r], program));
  m.coll.reset(program);
  for (auto& rk : m.ranks) rk->start(program);
  r0.walk(program, 0);
  for (auto& rk : m.ranks) rk->finish();
  return {};
}

Expected<void> CpuBackend::reset_kv() {
  for (auto& rk : impl_->ranks) {
    const auto& tensors = rk->packet->tensors;
    for (std::size_t i = 0; i < tensors.size(); ++i)
      if (tensors[i].source == MET_SOURCE_KV) std::memset(rk->owned[i].data, 0, rk->owned_bytes[i]);
  }
  return {};
}

namespace {
// A tensor the harness may fill or read: scratch, KV and IO live in host memory the backend owns.
Expected<std::byte*> host_bytes(const emit::PacketFile& f, const std::vector<void*>& ptr, std::size_t h, std::uint64_t bytes) {
  if (h >= f.tensors.size()) return fail("cpu backend: no tensor " + std::to_string(h));
  const auto& t = f.tensors[h];
  if (t.source != MET_SOURCE_SCRATCH && t.source != MET_SOURCE_KV && t.source != MET_SOURCE_IO)
    return fail("cpu backend: tensor '" + t.name + "' is not scratch, KV or IO");
  if (bytes != t.bytes) return fail("cpu backend: tensor '" + t.name + "' holds " + std::to_string(t.bytes) + " bytes, not " + std::to_string(bytes));
  return static_cast<std::byte*>(ptr[h]);
}
}  // namespace

Expected<void> CpuBackend::write_tensor(std::size_t h, const void* data, std::uint64_t bytes) {
  MET_TRY(std::byte* p, host_bytes(*impl_->ranks[0]->packet, impl_->ranks[0]->ptr, h, bytes));
  std::memcpy(p, data, bytes);
  return {};
}

Expected<void> CpuBackend::read_tensor(std::size_t h, void* data, std::uint64_t bytes) {
  MET_TRY(std::byte* p, host_bytes(*impl_->ranks[0]->packet, impl_->ranks[0]->ptr, h, bytes));
  std::memcpy(data, p, bytes);
  return {};
}

// Slices are independent within an instruction: they run on up to the machine's cores.
Expected<void> CpuBackend::run_instruction(std::size_t program, std::size_t instr) {
  auto& m = *impl_->ranks[0];
  if (program >= m.packet->programs.size() || instr >= m.packet->programs[program].instrs.size())
    return fail("cpu backend: no instruction " + std::to_string(instr) + " in program " + std::to_string(program));
  const auto& d = m.packet->programs[program].instrs[instr];
  const CpuBody body = m.bodies[program][instr];
  void* const* o = m.operands[program][instr].data();
  const unsigned n = std::max(1u, std::min(std::thread::hardware_concurrency(), d.slices));
  std::vector<std::thread> pool;
  for (unsigned w = 0; w < n; ++w)
    pool.emplace_back([&, w] {
      for (std::uint32_t s = w; s < d.slices; s += n) body(d, s, o);
    });
  for (auto& t : pool) t.join();
  return {};
}

}  // namespace met::interp
