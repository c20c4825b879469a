#include "interp/cuda_driver.hpp"

#include <dlfcn.h>

#include <mutex>

namespace met::interp::cu {

namespace {

// Resolves `name` into `slot`; records the first missing symbol.
template <class F>
void resolve(void* lib, F& slot, const char* name, std::string& missing) {
  void* p = dlsym(lib, name);
  if (!p && missing.empty()) missing = name;
  slot = reinterpret_cast<F>(p);
}

Expected<const Api*> open_api() {
  void* lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    const char* why = dlerror();
    return fail(std::string("cuda: cannot open libcuda.so.1 (no NVIDIA driver on this machine?): ") + (why ? why : "unknown"));
  }
  static Api a{};
  std::string missing;
  resolve(lib, a.Init, "cuInit", missing);
  resolve(lib, a.DriverGetVersion, "cuDriverGetVersion", missing);
  resolve(lib, a.DeviceGetCount, "cuDeviceGetCount", missing);
  resolve(lib, a.DeviceGet, "cuDeviceGet", missing);
  resolve(lib, a.DeviceGetAttribute, "cuDeviceGetAttribute", missing);
  resolve(lib, a.DeviceGetName, "cuDeviceGetName", missing);
  resolve(lib, a.DeviceTotalMem, "cuDeviceTotalMem_v2", missing);
  resolve(lib, a.DevicePrimaryCtxRetain, "cuDevicePrimaryCtxRetain", missing);
  resolve(lib, a.DevicePrimaryCtxRelease, "cuDevicePrimaryCtxRelease_v2", missing);
  resolve(lib, a.CtxSetCurrent, "cuCtxSetCurrent", missing);
  resolve(lib, a.ModuleLoadData, "cuModuleLoadData", missing);
  resolve(lib, a.ModuleUnload, "cuModuleUnload", missing);
  resolve(lib, a.ModuleGetFunction, "cuModuleGetFunction", missing);
  resolve(lib, a.ModuleGetGlobal, "cuModuleGetGlobal_v2", missing);
  resolve(lib, a.FuncSetAttribute, "cuFuncSetAttribute", missing);
  resolve(lib, a.OccupancyMaxActiveBlocksPerMultiprocessor, "cuOccupancyMaxActiveBlocksPerMultiprocessor", missing);
  resolve(lib, a.LaunchCooperativeKernel, "cuLaunchCooperativeKernel", missing);
  resolve(lib, a.LaunchKernel, "cuLaunchKernel", missing);
  resolve(lib, a.MemAlloc, "cuMemAlloc_v2", missing);
  resolve(lib, a.MemFree, "cuMemFree_v2", missing);
  resolve(lib, a.MemGetInfo, "cuMemGetInfo_v2", missing);
  resolve(lib, a.MemcpyHtoD, "cuMemcpyHtoD_v2", missing);
  resolve(lib, a.MemcpyDtoH, "cuMemcpyDtoH_v2", missing);
  resolve(lib, a.MemcpyDtoDAsync, "cuMemcpyDtoDAsync_v2", missing);
  resolve(lib, a.MemsetD8, "cuMemsetD8_v2", missing);
  resolve(lib, a.MemsetD32Async, "cuMemsetD32Async", missing);
  resolve(lib, a.StreamCreate, "cuStreamCreate", missing);
  resolve(lib, a.StreamDestroy, "cuStreamDestroy_v2", missing);
  resolve(lib, a.StreamSynchronize, "cuStreamSynchronize", missing);
  resolve(lib, a.EventCreate, "cuEventCreate", missing);
  resolve(lib, a.EventDestroy, "cuEventDestroy_v2", missing);
  resolve(lib, a.EventRecord, "cuEventRecord", missing);
  resolve(lib, a.EventSynchronize, "cuEventSynchronize", missing);
  resolve(lib, a.EventElapsedTime, "cuEventElapsedTime", missing);
  resolve(lib, a.GetErrorName, "cuGetErrorName", missing);
  resolve(lib, a.GetErrorString, "cuGetErrorString", missing);
  resolve(lib, a.TensorMapEncodeTiled, "cuTensorMapEncodeTiled", missing);
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
