// cpu backend: tensor storage (mapped weights, one scratch arena, KV caches, IO buffers, generated
// tables computed from build.json), operand tables per instruction, and a persistent pool of stream
// workers. Worker 0 is the calling thread.
#include "interp/cpu_backend.hpp"

#include <algorithm>
#include <cstring>
#include <thread>
#include <vector>

#include "emit/opcodes.hpp"
#include "interp/cpu_bodies.hpp"
#include "interp/io_check.hpp"

namespace met::interp {

namespace {
constexpr std::size_t kMaxOperands = 12;  // Instr.tensors
constexpr std::size_t kBufferAlign = 64;
// Polls of a counter before blocking on it: the producing slice usually runs on another core and
// finishes within microseconds, and a futex sleep + wake costs more than that per wait.
constexpr int kSpinPolls = 1 << 11;

inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield");
#endif
}

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

struct CpuBackend::Impl {
  const emit::PacketFile* packet = nullptr;
  std::optional<LoadedWeights> weights;
  std::vector<MetHostWeight> host;              // per manifest entry
  Aligned arena;
  std::vector<Aligned> owned;                   // KV, IO and generated tensors
  std::vector<std::uint64_t> owned_bytes;
  std::vector<void*> ptr;                       // per tensor handle
  std::vector<std::vector<std::array<void*, kMaxOperands>>> operands;  // [program][instr]
  std::vector<std::vector<CpuBody>> bodies;                            // [program][instr]
  std::vector<std::unique_ptr<std::atomic<std::uint32_t>[]>> counters; // [program][instr]

  std::uint32_t workers = 1;
  std::vector<std::thread> pool;
  std::atomic<std::uint32_t> generation{0};
  std::atomic<std::uint32_t> done{0};
  std::atomic<bool> stop{false};
  std::size_t current = 0;

  void walk(std::size_t program, std::uint32_t stream) {
    const auto& p = packet->programs[program];
    auto* ctr = counters[program].get();
    for (const auto& e : p.streams[stream]) {
      for (const auto& w : e.waits) {
        std::uint32_t v = ctr[w.counter].load(std::memory_order_acquire);
        for (int spin = 0; v < w.value && spin < kSpinPolls; ++spin) {
          cpu_relax();
          v = ctr[w.counter].load(std::memory_order_acquire);
        }
        while (v < w.value) {
          ctr[w.counter].wait(v, std::memory_order_acquire);
          v = ctr[w.counter].load(std::memory_order_acquire);
        }
      }
      bodies[program][e.instr](p.instrs[e.instr], e.slice, operands[program][e.instr].data());
      ctr[e.instr].fetch_add(1, std::memory_order_release);
      ctr[e.instr].notify_all();
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
};

std::string target_mismatch(const Assets& a, const std::string& backend_class, std::uint32_t threads) {
  const bool cpu_target = a.packet.target_class == "cpu";
  return a.dir + " were emitted for class '" + a.packet.target_class + "' with " + std::to_string(a.packet.sm_count) +
         (cpu_target ? " threads" : " SMs") + "; this backend runs class '" + backend_class + "' with " +
         std::to_string(threads) + " threads";
}

CpuBackend::CpuBackend(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

CpuBackend::~CpuBackend() {
  if (!impl_) return;
  impl_->stop.store(true, std::memory_order_release);
  impl_->generation.fetch_add(1, std::memory_order_release);
  impl_->generation.notify_all();
  for (auto& t : impl_->pool) t.join();
}

Expected<std::unique_ptr<CpuBackend>> CpuBackend::create(const Assets& a, std::uint32_t threads, bool any_class) {
  const std::uint32_t want = threads ? threads : a.packet.sm_count;
  if ((a.packet.target_class != "cpu" && !any_class) || want != a.packet.sm_count)
    return fail(target_mismatch(a, any_class ? a.packet.target_class : "cpu", want));
  auto impl = std::make_unique<Impl>();
  impl->packet = &a.packet;
  impl->workers = a.packet.sm_count;
  MET_TRY(LoadedWeights w, LoadedWeights::load(a.weights, a.checkpoint_dir));
  impl->weights.emplace(std::move(w));
  for (std::size_t e = 0; e < impl->weights->size(); ++e) {
    MET_TRY(MetHostWeight h, impl->weights->host_weight(e));
    impl->host.push_back(h);
  }
  const auto& tensors = a.packet.tensors;
  std::uint64_t arena = 0;
  for (const auto& t : tensors)
    if (t.source == MET_SOURCE_SCRATCH) arena = std::max(arena, t.ref + t.bytes);
  impl->arena.allocate(arena);
  impl->ptr.assign(tensors.size(), nullptr);
  impl->owned.resize(tensors.size());
  impl->owned_bytes.assign(tensors.size(), 0);
  for (std::size_t i = 0; i < tensors.size(); ++i) {
    const auto& t = tensors[i];
    switch (t.source) {
      case MET_SOURCE_CHECKPOINT: {
        if (t.ref >= impl->host.size())
          return fail(a.dir + "/model.pkt: tensor '" + t.name + "' names weights.json entry " + std::to_string(t.ref) +
                      " of " + std::to_string(impl->host.size()));
        const auto& hw = impl->host[t.ref];
        if (t.shape.size() == 1 && hw.format != MET_WEIGHT_BF16)
          return fail(a.dir + "/weights.json: vector weight '" + t.name + "' must be bf16 for the cpu bodies");
        impl->ptr[i] = &impl->host[t.ref];
        break;
      }
      case MET_SOURCE_SCRATCH: impl->ptr[i] = impl->arena.data + t.ref; break;
      case MET_SOURCE_GENERATED: {
        MET_TRY(std::string bytes, emit::generated_table(t, a.build, a.dir + "/model.pkt"));
        impl->owned[i].allocate(t.bytes);
        std::memcpy(impl->owned[i].data, bytes.data(), bytes.size());
        impl->ptr[i] = impl->owned[i].data;
        break;
      }
      case MET_SOURCE_KV:
      case MET_SOURCE_IO:
        impl->owned[i].allocate(t.bytes);
        impl->owned_bytes[i] = t.bytes;
        impl->ptr[i] = impl->owned[i].data;
        break;
      default: return fail(a.dir + "/model.pkt: tensor '" + t.name + "': source " + std::to_string(t.source) + " is not run by the cpu backend");
    }
  }
  for (const auto& p : a.packet.programs) {
    std::vector<std::array<void*, kMaxOperands>> opnds;
    std::vector<CpuBody> rows;
    for (std::size_t k = 0; k < p.instrs.size(); ++k) {
      const auto& d = p.instrs[k];
      const CpuBody body = cpu_body(d.opcode);
      if (!body)
        return fail(a.dir + "/model.pkt: program " + p.name + " instruction " + std::to_string(k) + ": opcode " +
                    std::to_string(d.opcode) + " has no cpu body");
      std::array<void*, kMaxOperands> o{};
      for (std::size_t t = 0; t < d.tensors.size() && t < kMaxOperands; ++t)
        o[t] = d.tensors[t] == MET_NO_TENSOR ? nullptr : impl->ptr[d.tensors[t]];
      opnds.push_back(o);
      rows.push_back(body);
    }
    impl->operands.push_back(std::move(opnds));
    impl->bodies.push_back(std::move(rows));
    impl->counters.push_back(std::make_unique<std::atomic<std::uint32_t>[]>(std::max<std::size_t>(1, p.instrs.size())));
  }
  auto* raw = impl.get();
  for (std::uint32_t s = 1; s < raw->workers; ++s) raw->pool.emplace_back([raw, s] { raw->worker(s); });
  return std::unique_ptr<CpuBackend>(new CpuBackend(std::move(impl)));
}

void* CpuBackend::io(std::size_t program, emit::IoField field) {
  const auto& tensors = impl_->packet->tensors;
  const std::string suffix = std::string(".io.") + emit::io_field_name(field);
  const std::string name = impl_->packet->programs[program].name + suffix;
  for (std::size_t i = 0; i < tensors.size(); ++i)
    if (tensors[i].source == MET_SOURCE_IO && tensors[i].ref == static_cast<std::uint64_t>(field) && tensors[i].name == name)
      return impl_->ptr[i];
  return nullptr;
}

Expected<void> CpuBackend::run(std::size_t program) {
  auto& m = *impl_;
  if (program >= m.packet->programs.size()) return fail("cpu backend: no program " + std::to_string(program));
  MET_CHECK(check_step_io(*m.packet, program, static_cast<const std::int64_t*>(io(program, emit::IoField::slots))));
  const std::size_t n = m.packet->programs[program].instrs.size();
  for (std::size_t i = 0; i < n; ++i) m.counters[program][i].store(0, std::memory_order_relaxed);
  m.current = program;
  m.done.store(0, std::memory_order_relaxed);
  m.generation.fetch_add(1, std::memory_order_release);  // publishes counters, current and the IO inputs
  m.generation.notify_all();
  m.walk(program, 0);
  const std::uint32_t others = m.workers - 1;
  std::uint32_t d = m.done.load(std::memory_order_acquire);
  while (d < others) {
    m.done.wait(d, std::memory_order_acquire);
    d = m.done.load(std::memory_order_acquire);
  }
  return {};
}

Expected<void> CpuBackend::reset_kv() {
  const auto& tensors = impl_->packet->tensors;
  for (std::size_t i = 0; i < tensors.size(); ++i)
    if (tensors[i].source == MET_SOURCE_KV) std::memset(impl_->owned[i].data, 0, impl_->owned_bytes[i]);
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
  MET_TRY(std::byte* p, host_bytes(*impl_->packet, impl_->ptr, h, bytes));
  std::memcpy(p, data, bytes);
  return {};
}

Expected<void> CpuBackend::read_tensor(std::size_t h, void* data, std::uint64_t bytes) {
  MET_TRY(std::byte* p, host_bytes(*impl_->packet, impl_->ptr, h, bytes));
  std::memcpy(data, p, bytes);
  return {};
}

// Slices are independent within an instruction: they run on up to the machine's cores.
Expected<void> CpuBackend::run_instruction(std::size_t program, std::size_t instr) {
  auto& m = *impl_;
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
