// Backend: what the host driver (generate.hpp) needs from an executor of packet programs: run one
// program to completion, and host-visible IO buffers per program. The cpu backend is the
// reference; the cuda backend (later) implements the same interface over device memory.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "core/expected.hpp"
#include "emit/emit.hpp"

namespace met::interp {

class Backend {
 public:
  virtual ~Backend() = default;
  virtual std::string name() const = 0;
  // Host pointer to an IO tensor of a program (nullptr when the program has none of that field).
  virtual void* io(std::size_t program, emit::IoField field) = 0;
  // Runs every stream of the program to completion; the IO inputs must be filled before.
  virtual Expected<void> run(std::size_t program) = 0;
  // Zeroes the KV caches (a new set of sequences).
  virtual Expected<void> reset_kv() = 0;

  // For the opcode harness (optest.hpp): the bytes of a scratch, KV or IO tensor by handle, and one
  // instruction run on its own (every slice, no waits) with whatever its operands hold.
  virtual Expected<void> write_tensor(std::size_t handle, const void* data, std::uint64_t bytes) = 0;
  virtual Expected<void> read_tensor(std::size_t handle, void* data, std::uint64_t bytes) = 0;
  virtual Expected<void> run_instruction(std::size_t program, std::size_t instr) = 0;

  // Whether io(program, logits) must hold the logits after a run. A backend whose IO lives in host
  // memory always has them (the default ignores this); the cuda backend copies them back only when
  // asked (greedy and sampled tokens come back without them).
  virtual void set_fetch_logits(bool on) { (void)on; }
};

}  // namespace met::interp
