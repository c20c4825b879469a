#include "interp/cuda_driver.hpp"

#include <dlfcn.h>

#include <mutex>

#include "interp/dl_resolve.hpp"

namespace met::interp::cu {

namespace {

Expected<const Api*> open_api() {
  void* lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    const char* why = dlerror();
    return fail(std::string("cuda: cannot open libcuda.so.1 (no NVIDIA driver on this machine?): ") + (why ? why : "unknown"));
  }
  static Api a{};
  std::string missing;
  resolve_symbol(lib, a.Init, "cuInit", missing);
  resolve_symbol(lib, a.DriverGetVersion, "cuDriverGetVersion", missing);
  resolve_symbol(lib, a.DeviceGetCount, "cuDeviceGetCount", missing);
  resolve_symbol(lib, a.DeviceGet, "cuDeviceGet", missing);
  resolve_symbol(lib, a.DeviceGetAttribute, "cuDeviceGetAttribute", missing);
  resolve_symbol(lib, a.DeviceGetName, "cuDeviceGetName", missing);
  resolve_symbol(lib, a.DeviceTotalMem, "cuDeviceTotalMem_v2", missing);
  resolve_symbol(lib, a.DevicePrimaryCtxRetain, "cuDevicePrimaryCtxRetain", missing);
  resolve_symbol(lib, a.DevicePrimaryCtxRelease, "cuDevicePrimaryCtxRelease_v2", missing);
  resolve_symbol(lib, a.CtxSetCurrent, "cuCtxSetCurrent", missing);
  resolve_symbol(lib, a.ModuleLoadData, "cuModuleLoadData", missing);
  resolve_symbol(lib, a.ModuleUnload, "cuModuleUnload", missing);
  resolve_symbol(lib, a.ModuleGetFunction, "cuModuleGetFunction", missing);
  resolve_symbol(lib, a.ModuleGetGlobal, "cuModuleGetGlobal_v2", missing);
  resolve_symbol(lib, a.FuncSetAttribute, "cuFuncSetAttribute", missing);
  resolve_symbol(lib, a.OccupancyMaxActiveBlocksPerMultiprocessor, "cuOccupancyMaxActiveBlocksPerMultiprocessor", missing);
  resolve_symbol(lib, a.LaunchCooperativeKernel, "cuLaunchCooperativeKernel", missing);
  resolve_symbol(lib, a.LaunchKernel, "cuLaunchKernel", missing);
  resolve_symbol(lib, a.MemAlloc, "cuMemAlloc_v2", missing);
  resolve_symbol(lib, a.MemFree, "cuMemFree_v2", missing);
  resolve_symbol(lib, a.MemGetInfo, "cuMemGetInfo_v2", missing);
  resolve_symbol(lib, a.MemcpyHtoD, "cuMemcpyHtoD_v2", missing);
  resolve_symbol(lib, a.MemcpyDtoH, "cuMemcpyDtoH_v2", missing);
  resolve_symbol(lib, a.MemcpyDtoDAsync, "cuMemcpyDtoDAsync_v2", missing);
  resolve_symbol(lib, a.MemsetD8, "cuMemsetD8_v2", missing);
  resolve_symbol(lib, a.MemsetD32Async, "cuMemsetD32Async", missing);
  resolve_symbol(lib, a.StreamCreate, "cuStreamCreate", missing);
  resolve_symbol(lib, a.StreamDestroy, "cuStreamDestroy_v2", missing);
  resolve_symbol(lib, a.StreamSynchronize, "cuStreamSynchronize", missing);
  resolve_symbol(lib, a.EventCreate, "cuEventCreate", missing);
  resolve_symbol(lib, a.EventDestroy, "cuEventDestroy_v2", missing);
  resolve_symbol(lib, a.EventRecord, "cuEventRecord", missing);
  resolve_symbol(lib, a.EventSynchronize, "cuEventSynchronize", missing);
  resolve_symbol(lib, a.EventElapsedTime, "cuEventElapsedTime", missing);
  resolve_symbol(lib, a.GetErrorName, "cuGetErrorName", missing);
  resolve_symbol(lib, a.GetErrorString, "cuGetErrorString", missing);
  resolve_symbol(lib, a.TensorMapEncodeTiled, "cuTensorMapEncodeTiled", missing);
  if (!missing.empty()) return fail("cuda: libcuda.so.1 lacks " + missing + " (driver too old?)");
  MET_CU(a, Init(0));
  return &a;
}

}  // namespace

Expected<const Api*> api() {
  static std::once_flag once;
  static Expected<const Api*> result = fail("cuda: not initialised");
  std::call_once(once, [] { result = open_api(); });
  return result;
}

std::string describe(const Api& a, Result r, const char* call) {
  const char* name = nullptr;
  const char* text = nullptr;
  if (a.GetErrorName) a.GetErrorName(r, &name);
  if (a.GetErrorString) a.GetErrorString(r, &text);
  return std::string("cuda: cu") + call + ": " + (name ? name : "error " + std::to_string(r)) + " (" +
         (text ? text : "no description") + ")";
}

}  // namespace met::interp::cu
