// The cpu backend: executes packet programs on the host with sm_count worker threads, each walking
// its stream: wait on counters (acquire; a bounded spin, then C++20 atomic wait), run the opcode's
// cpu body for the slice, signal (release + notify). Same packets as the GPU; the oracle for it.
// A tensor-parallel emit (--tp N) runs as N simulated ranks in this process, each with its own
// tensors and sm_count workers, meeting at every collective (the reference all-reduce and gather).
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "interp/assets.hpp"
#include "interp/backend.hpp"
#include "interp/weights.hpp"

namespace met::interp {

class CpuBackend final : public Backend {
 public:
  // threads: 0 = the emit's SM count; any other count than the emit's is refused, as is another
  // class unless any_class: then a GPU class's packets run on the cpu bodies with one worker per
  // stream (the oracle the cuda backend is checked against; every opcode has a cpu body).
  static Expected<std::unique_ptr<CpuBackend>> create(const Assets& assets, std::uint32_t threads = 0, bool any_class = false);
  ~CpuBackend() override;

  std::string name() const override { return "cpu"; }
  void* io(std::size_t program, emit::IoField field) override;
  Expected<void> run(std::size_t program) override;
  Expected<void> reset_kv() override;
  Expected<void> write_tensor(std::size_t handle, const void* data, std::uint64_t bytes) override;
  Expected<void> read_tensor(std::size_t handle, void* data, std::uint64_t bytes) override;
  Expected<void> run_instruction(std::size_t program, std::size_t instr) override;

  struct Impl;  // the ranks (one without --tp), their workers and the collectives (cpu_backend.cpp)

 private:
  explicit CpuBackend(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// The refusal message of an emit made for another target (exposed for tests).
std::string target_mismatch(const Assets& assets, const std::string& backend_class, std::uint32_t threads);

}  // namespace met::interp
