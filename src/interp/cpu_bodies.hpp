// The cpu class's dispatch: the CPU body of every opcode of the registry (kernels/common/ops.def),
// for one slice of one instruction. Each body names its operands (generated from the registry),
// offsets them to its slice and calls the kernels/cpu entry point of its op, so the cpu backend
// runs exactly the op bodies the cpu class compiles. GPU-class opcodes run the body of the op the
// registry names as their CPU reference (the oracle for their packets).
#pragma once

#include <cstdint>

#include "emit/packet.hpp"

namespace met::interp {

// operands[k] is the base of tensor k (null when absent); a checkpoint tensor arrives as a
// `const MetHostWeight*` (kernels/cpu/quant.hpp).
using CpuBody = void (*)(const emit::InstrDesc&, std::uint32_t slice, void* const* operands);

// The CPU body of an opcode number; null for numbers outside the registry.
CpuBody cpu_body(std::uint32_t opcode);

}  // namespace met::interp
