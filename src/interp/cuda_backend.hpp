// The cuda backend: runs packet programs on an NVIDIA GPU through the persistent interpreter that
// nvcc built from kernels/<class>/interp.cu (embedded in met). Weights, KV caches, the scratch
// arena, generated tables and every program's tables live on the device; one run of a program is
// one cooperative launch (grid = the emit's SM count). The host patches only the per-step IO
// inputs (tokens, positions, slots, sequence bases and lengths, sampling parameters) and reads
// back the tokens (argmax and sampled), and the logits only when asked. A tensor-parallel emit
// (--tp N) runs in this process on N GPUs, rank r on device r, each with its own context, weights
// (its windows), KV, IO and arena; the arenas are one symmetric NCCL window through which the
// collectives' bodies reach their peers (kernels/common/interp/abi.h MetDevPeers).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "interp/assets.hpp"
#include "interp/backend.hpp"

namespace met::interp {

// The hopper interpreter image embedded at build time (empty when nvcc was absent).
struct InterpImage {
  const unsigned char* data = nullptr;
  std::size_t size = 0;
};
InterpImage hopper_interp_image();

// A GPU as its driver reports it: what a campaign holds to the device its assets were emitted for.
struct GpuFacts {
  std::string name;  // "NVIDIA H200"
  int sms = 0, compute_major = 0, compute_minor = 0;
  std::uint64_t total_bytes = 0;  // cuDeviceTotalMem
};
// Every GPU the driver sees, in ordinal order (the driver loaded at run time; fails without one).
Expected<std::vector<GpuFacts>> query_gpus();

class CudaBackend final : public Backend {
 public:
  // Refuses assets of another class, a device whose SM count or architecture differs from the
  // emit's, shapes the interpreter's bodies do not cover, and weights other than bf16. Under --tp
  // also ranks whose collectives do not pair, more ranks than GPUs, and a missing or old NCCL.
  // first_rank_only: a tensor-parallel emit's rank 0 alone on GPU 0, no collectives (optest).
  static Expected<std::unique_ptr<CudaBackend>> create(const Assets& assets, bool first_rank_only = false);
  ~CudaBackend() override;

  std::string name() const override { return "cuda"; }
  void* io(std::size_t program, emit::IoField field) override;
  Expected<void> run(std::size_t program) override;
  Expected<void> reset_kv() override;
  Expected<void> write_tensor(std::size_t handle, const void* data, std::uint64_t bytes) override;
  Expected<void> read_tensor(std::size_t handle, void* data, std::uint64_t bytes) override;
  Expected<void> run_instruction(std::size_t program, std::size_t instr) override;

  // Logits are copied back after a run only when wanted (greedy decoding needs just the tokens).
  void set_fetch_logits(bool on) override;
  // Records %globaltimer per stream entry (start after its waits, end after its signal).
  void set_timestamps(bool on);
  // Device time of the last run (CUDA events around the launch), milliseconds; under --tp the
  // slowest rank's.
  float last_run_ms() const;
  // Tensor-parallel ranks (1 without --tp) and each one's device time of the last run.
  std::size_t ranks() const;
  float rank_run_ms(std::size_t rank) const;
  // Per instruction of the last run with timestamps (of rank `rank`): wall time from its first
  // slice's start to its last slice's end, nanoseconds.
  std::vector<double> instr_times_ns(std::size_t program, std::size_t rank = 0) const;
  // Per instruction of the last run with timestamps: the mean time its slices take (start after
  // the waits to end after the signal) and the spread of their starts (last start - first start),
  // nanoseconds. A wall well over the mean slice is skew: slices that started late or ran long.
  struct SliceTimes {
    double mean_ns = 0, start_spread_ns = 0;
  };
  std::vector<SliceTimes> slice_times_ns(std::size_t program, std::size_t rank = 0) const;
  std::string device_name() const;  // rank 0's
  GpuFacts gpu(std::size_t rank) const;  // the device rank `rank` runs on
  // Bytes of device memory the backend holds (every rank's).
  std::uint64_t device_bytes() const;

 private:
  struct Impl;
  explicit CudaBackend(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// The interpreter body an opcode runs on cuda (0 = none), by opcode name.
std::uint32_t cuda_body_of(const std::string& opcode_name);

}  // namespace met::interp
