// The CUDA driver API as met uses it: libcuda.so.1 opened at run time (met links no CUDA library,
// so the same binary runs on machines without a GPU), the handful of entry points the cuda backend
// and the device probe call, and one checking macro that turns every failing call into a located
// error naming the call and the driver's own error name and text.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "core/expected.hpp"

namespace met::interp::cu {

// The driver's own types, as its ABI defines them.
using Result = int;  // CUresult; 0 = CUDA_SUCCESS
using Device = int;
using DevicePtr = unsigned long long;
using Context = struct CtxSt*;
using Module = struct ModSt*;
using Function = struct FuncSt*;
using Stream = struct StreamSt*;
using Event = struct EventSt*;

// CUdevice_attribute / CUfunction_attribute values used here.
inline constexpr int kAttrClockRate = 13;            // kHz
inline constexpr int kAttrMultiprocessorCount = 16;
inline constexpr int kAttrMemoryClockRate = 36;      // kHz
inline constexpr int kAttrGlobalMemoryBusWidth = 37; // bits
inline constexpr int kAttrComputeMajor = 75;
inline constexpr int kAttrComputeMinor = 76;
inline constexpr int kAttrCooperativeLaunch = 95;
inline constexpr int kAttrMaxSmemPerBlockOptin = 97;
inline constexpr int kFuncMaxDynamicSmem = 8;

// CUtensorMap (opaque, 128 bytes, 64-byte aligned) and the cuTensorMapEncodeTiled values used here.
struct alignas(64) TensorMap {
  std::uint64_t opaque[16];
};
inline constexpr int kTmapBf16 = 9;          // CU_TENSOR_MAP_DATA_TYPE_BFLOAT16
inline constexpr int kTmapInterleaveNone = 0;
inline constexpr int kTmapSwizzle128 = 3;    // CU_TENSOR_MAP_SWIZZLE_128B
inline constexpr int kTmapL2Promote256 = 3;  // CU_TENSOR_MAP_L2_PROMOTION_L2_256B
inline constexpr int kTmapOobZero = 0;       // CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE: zeros

struct Api {
  Result (*Init)(unsigned);
  Result (*DriverGetVersion)(int*);
  Result (*DeviceGetCount)(int*);
  Result (*DeviceGet)(Device*, int);
  Result (*DeviceGetAttribute)(int*, int, Device);
  Result (*DeviceGetName)(char*, int, Device);
  Result (*DeviceTotalMem)(std::size_t*, Device);
  Result (*DevicePrimaryCtxRetain)(Context*, Device);
  Result (*DevicePrimaryCtxRelease)(Device);
  Result (*CtxSetCurrent)(Context);
  Result (*ModuleLoadData)(Module*, const void*);
  Result (*ModuleUnload)(Module);
  Result (*ModuleGetFunction)(Function*, Module, const char*);
  Result (*ModuleGetGlobal)(DevicePtr*, std::size_t*, Module, const char*);
  Result (*FuncSetAttribute)(Function, int, int);
  Result (*OccupancyMaxActiveBlocksPerMultiprocessor)(int*, Function, int, std::size_t);
  Result (*LaunchCooperativeKernel)(Function, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, Stream,
                                    void**);
  Result (*LaunchKernel)(Function, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, Stream, void**,
                         void**);
  Result (*MemAlloc)(DevicePtr*, std::size_t);
  Result (*MemFree)(DevicePtr);
  Result (*MemGetInfo)(std::size_t*, std::size_t*);
  Result (*MemcpyHtoD)(DevicePtr, const void*, std::size_t);
  Result (*MemcpyDtoH)(void*, DevicePtr, std::size_t);
  Result (*MemcpyDtoDAsync)(DevicePtr, DevicePtr, std::size_t, Stream);
  Result (*MemsetD8)(DevicePtr, unsigned char, std::size_t);
  Result (*MemsetD32Async)(DevicePtr, unsigned, std::size_t, Stream);
  Result (*StreamCreate)(Stream*, unsigned);
  Result (*StreamDestroy)(Stream);
  Result (*StreamSynchronize)(Stream);
  Result (*EventCreate)(Event*, unsigned);
  Result (*EventDestroy)(Event);
  Result (*EventRecord)(Event, Stream);
  Result (*EventSynchronize)(Event);
  Result (*EventElapsedTime)(float*, Event, Event);
  Result (*GetErrorName)(Result, const char**);
  Result (*GetErrorString)(Result, const char**);
  Result (*TensorMapEncodeTiled)(TensorMap*, int, std::uint32_t, void*, const std::uint64_t*, const std::uint64_t*,
                                 const std::uint32_t*, const std::uint32_t*, int, int, int, int);
};

// Opens libcuda.so.1 once and resolves every entry point (or says which is missing).
Expected<const Api*> api();

// "cuFoo(args): CUDA_ERROR_X (text)" for a failed call.
std::string describe(const Api& a, Result r, const char* call);

}  // namespace met::interp::cu

// Evaluates a driver call through `api` (a const cu::Api&) and returns a located failure from the
// enclosing function (which returns Expected<...>) when it does not succeed.
#define MET_CU(api, call)                                                     \
  do {                                                                        \
    const ::met::interp::cu::Result met_cu_r_ = (api).call;                   \
    if (met_cu_r_ != 0) return ::met::fail(::met::interp::cu::describe((api), met_cu_r_, #call)); \
  } while (0)
