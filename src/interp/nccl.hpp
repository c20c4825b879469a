// NCCL as the cuda backend uses it for tensor parallelism: libnccl.so.2 opened at run time (met
// links no NCCL, as it links no CUDA library; MET_NCCL_LIBRARY names another file), the entry
// points of communicators, symmetric windows and device communicators, and one checking macro that
// turns a failing call into an error naming the call and NCCL's own text. The library must be
// 2.28 or newer (the device API) and of the major.minor of the headers met was built with: the
// device communicator's layout (ncclDevComm, which the host copies to the device for the bodies)
// is theirs. NVLink multicast is forced off before any communicator exists.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "core/expected.hpp"

namespace met::interp::nccl {

// The library's own types, as its ABI defines them (nccl.h).
using Result = int;  // ncclResult_t; 0 = ncclSuccess
using Comm = struct CommSt*;
using Window = struct WindowSt*;
inline constexpr int kWinCollSymmetric = 0x01;    // NCCL_WIN_COLL_SYMMETRIC
inline constexpr std::uint64_t kWinAlign = 4096;  // NCCL_WIN_REQUIRED_ALIGNMENT
// The size a window is rounded up to: the 2 MiB the driver's virtual-memory allocations (which
// ncclMemAlloc makes) take on the GPUs met runs on, so the registered window is the whole
// allocation on every rank. A multiple of kWinAlign.
inline constexpr std::uint64_t kWinGranularity = std::uint64_t{2} << 20;
inline constexpr int kMinVersion = 22800;  // 2.28.0: ncclDevCommCreate and the LSA barriers
inline constexpr const char* kDefaultLibrary = "libnccl.so.2";
inline constexpr const char* kLibraryEnv = "MET_NCCL_LIBRARY";

struct Api {
  Result (*GetVersion)(int*);
  const char* (*GetErrorString)(Result);
  const char* (*GetLastError)(Comm);
  Result (*CommInitAll)(Comm*, int, const int*);
  Result (*CommDestroy)(Comm);
  Result (*GroupStart)();
  Result (*GroupEnd)();
  Result (*MemAlloc)(void**, std::size_t);
  Result (*MemFree)(void*);
  Result (*CommWindowRegister)(Comm, void*, std::size_t, Window*, int);
  Result (*CommWindowDeregister)(Comm, Window);
  Result (*DevCommCreate)(Comm, const void* requirements, void* out);  // ncclDevCommRequirements, ncclDevComm
  Result (*DevCommDestroy)(Comm, const void* dev_comm);
  int version = 0;   // ncclGetVersion's code (major x 10000 + minor x 100 + patch)
  std::string path;  // the file opened
};

// Whether met was built with the NCCL headers (nccl.h, nccl_device.h); without them no device
// communicator can be laid out and tensor-parallel runs on cuda are refused (api() says so).
bool built_with_headers();
// The NCCL version of those headers (NCCL_VERSION_CODE), 0 without them.
int header_version();

// Opens the library MET_NCCL_LIBRARY names (or libnccl.so.2 through the loader's path) once,
// resolves every entry point (or names the first missing one), checks its version and sets
// NCCL_NVLS_ENABLE=0 in the environment. Each later call returns the first outcome.
Expected<const Api*> api();
// The same, uncached, from `path` (what api() runs; exposed for tests).
Expected<const Api*> open_library(const std::string& path);

// Refuses a library older than 2.28 or of another major.minor than the headers (pure; tested).
Expected<void> check_version(int library_version, int built_version, const std::string& path);
// "2.28.9" of a version code.
std::string version_string(int code);

// "nccl: ncclFoo(args): <NCCL's text> (ncclResult_t n)" for a failed call.
std::string describe(const Api& a, Result r, const char* call);

// A device communicator: ncclDevCommCreate's output (the bytes of an ncclDevComm, which the host
// copies to device memory for the bodies) with every lsa barrier and multicast off.
struct DevComm {
  std::vector<std::byte> bytes;
};
// Creates one device communicator per communicator in one group (ncclDevCommCreate is collective):
// `lsa_barriers` LSA barriers each, no multimem.
Expected<std::vector<DevComm>> dev_comms_create(const Api& a, const std::vector<Comm>& comms, int lsa_barriers);
// Destroys them in one group (best effort: returns the first failure, destroys the rest).
Expected<void> dev_comms_destroy(const Api& a, const std::vector<Comm>& comms, const std::vector<DevComm>& dev);

}  // namespace met::interp::nccl

// Evaluates an NCCL call through `api` (a const nccl::Api&) and returns a located failure from the
// enclosing function (which returns Expected<...>) when it does not succeed.
#define MET_NCCL(api, call)                                                                             \
  do {                                                                                                  \
    const ::met::interp::nccl::Result met_nccl_r_ = (api).call;                                         \
    if (met_nccl_r_ != 0) return ::met::fail(::met::interp::nccl::describe((api), met_nccl_r_, #call)); \
  } while (0)
