#include "interp/nccl.hpp"

#include <dlfcn.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <vector>

#include "interp/dl_resolve.hpp"

// The headers give the device communicator's layout (ncclDevComm, ncclDevCommRequirements): the
// device bodies are compiled against the same ones. CMake defines MET_NCCL_HEADERS when it found
// them (src/interp/CMakeLists.txt); without them the loader refuses with a message naming where
// it looked (MET_NCCL_INCLUDE_HINT).
#if MET_NCCL_HEADERS
#include <nccl.h>
#include <nccl_device/impl/comm__types.h>
#endif

namespace met::interp::nccl {

#if MET_NCCL_HEADERS
static_assert(kWinCollSymmetric == NCCL_WIN_COLL_SYMMETRIC && kWinAlign == NCCL_WIN_REQUIRED_ALIGNMENT);
#endif

bool built_with_headers() { return MET_NCCL_HEADERS != 0; }

int header_version() {
#if MET_NCCL_HEADERS
  return NCCL_VERSION_CODE;
#else
  return 0;
#endif
}

std::string version_string(int code) {
  return std::to_string(code / 10000) + "." + std::to_string(code / 100 % 100) + "." + std::to_string(code % 100);
}

Expected<void> check_version(int library_version, int built_version, const std::string& path) {
  if (library_version < kMinVersion)
    return fail("nccl: " + path + " is NCCL " + version_string(library_version) + "; tensor parallelism on cuda needs " +
                version_string(kMinVersion) + " or newer (the device API: ncclDevCommCreate, LSA barriers, symmetric windows)");
  if (library_version / 100 != built_version / 100)
    return fail("nccl: " + path + " is NCCL " + version_string(library_version) + " but met was built with the headers of " +
                version_string(built_version) + " (the device communicator's layout is theirs): point " + kLibraryEnv +
                " at an NCCL " + std::to_string(built_version / 10000) + "." + std::to_string(built_version / 100 % 100) +
                ".x library, or rebuild met against this one's headers");
  return {};
}

Expected<const Api*> open_library(const std::string& path) {
  if (!built_with_headers())
    return fail(std::string("nccl: this met was built without the NCCL headers (nccl.h and nccl_device.h, looked for in ") +
                MET_NCCL_INCLUDE_HINT +
                "), so it cannot lay out NCCL's device communicator; the cuda backend runs no tensor-parallel assets: rebuild "
                "where the NCCL 2.28+ headers are installed, or run these assets with --backend cpu");
  void* lib = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    const char* why = dlerror();
    return fail("nccl: cannot open " + path +
                (path.find('/') == std::string::npos
                     ? " (searched the loader's path: LD_LIBRARY_PATH, ld.so.cache, /lib, /usr/lib)"
                     : "") +
                ": " + (why ? why : "unknown") + "; install NCCL 2.28 or newer, or name the library in " + kLibraryEnv);
  }
  auto a = std::make_unique<Api>();
  std::string missing;
  resolve_symbol(lib, a->GetVersion, "ncclGetVersion", missing);
  resolve_symbol(lib, a->GetErrorString, "ncclGetErrorString", missing);
  resolve_symbol(lib, a->GetLastError, "ncclGetLastError", missing);
  resolve_symbol(lib, a->CommInitAll, "ncclCommInitAll", missing);
  resolve_symbol(lib, a->CommDestroy, "ncclCommDestroy", missing);
  resolve_symbol(lib, a->GroupStart, "ncclGroupStart", missing);
  resolve_symbol(lib, a->GroupEnd, "ncclGroupEnd", missing);
  resolve_symbol(lib, a->MemAlloc, "ncclMemAlloc", missing);
  resolve_symbol(lib, a->MemFree, "ncclMemFree", missing);
  resolve_symbol(lib, a->CommWindowRegister, "ncclCommWindowRegister", missing);
  resolve_symbol(lib, a->CommWindowDeregister, "ncclCommWindowDeregister", missing);
  resolve_symbol(lib, a->DevCommCreate, "ncclDevCommCreate", missing);
  resolve_symbol(lib, a->DevCommDestroy, "ncclDevCommDestroy", missing);
  // The version first: an old library lacks the device API, and that is the better message.
  if (a->GetVersion) {
    const Result r = a->GetVersion(&a->version);
    if (r != 0) {
      dlclose(lib);
      return fail("nccl: ncclGetVersion of " + path + " failed (ncclResult_t " + std::to_string(r) + ")");
    }
    if (auto v = check_version(a->version, header_version(), path); !v.ok()) {
      dlclose(lib);
      return fail(v.error().message);
    }
  }
  if (!missing.empty()) {
    dlclose(lib);
    return fail("nccl: " + path + " lacks " + missing + " (NCCL older than " + version_string(kMinVersion) + "?)");
  }
  a->path = path;
  // NVLink multicast (NVLS) stays off: its multicast objects can take a shared host's GPUs out of
  // service. Set before any communicator exists, whatever the caller's environment said.
  if (setenv("NCCL_NVLS_ENABLE", "0", /*overwrite=*/1) != 0) {
    dlclose(lib);
    return fail("nccl: cannot set NCCL_NVLS_ENABLE=0 in the environment: " + std::string(std::strerror(errno)));
  }
  // Kept for the process's life, as the library is: owned by a registry of every library opened
  // (the cached one, and any a caller such as a test opens again), not leaked.
  static std::mutex opened_mu;
  static std::vector<std::unique_ptr<Api>> opened;
  const std::lock_guard<std::mutex> hold(opened_mu);
  opened.push_back(std::move(a));
  return opened.back().get();
}

Expected<const Api*> api() {
  static std::once_flag once;
  static Expected<const Api*> result = fail("nccl: not initialised");
  std::call_once(once, [] {
    const char* env = std::getenv(kLibraryEnv);
    result = open_library(env && *env ? std::string(env) : std::string(kDefaultLibrary));
  });
  return result;
}

std::string describe(const Api& a, Result r, const char* call) {
  const char* text = a.GetErrorString ? a.GetErrorString(r) : nullptr;
  const char* last = a.GetLastError ? a.GetLastError(nullptr) : nullptr;
  std::string s = std::string("nccl: nccl") + call + ": " + (text ? text : "error") + " (ncclResult_t " + std::to_string(r) + ")";
  if (last && *last) s += ": " + std::string(last);
  return s;
}

#if MET_NCCL_HEADERS
Expected<std::vector<DevComm>> dev_comms_create(const Api& a, const std::vector<Comm>& comms, int lsa_barriers) {
  ncclDevCommRequirements req;
  std::memset(&req, 0, sizeof req);  // no resources, teams, GIN or LL all-to-all
  req.lsaMultimem = false;           // never NVLink multicast
  req.lsaBarrierCount = lsa_barriers;
  std::vector<ncclDevComm> out(comms.size());
  MET_NCCL(a, GroupStart());
  Result first = 0;
  for (std::size_t r = 0; r < comms.size(); ++r) {
    const Result x = a.DevCommCreate(comms[r], &req, &out[r]);
    if (x != 0 && first == 0) first = x;
  }
  MET_NCCL(a, GroupEnd());
  if (first != 0) return fail(describe(a, first, "DevCommCreate(comm, &requirements, &dev_comm)"));
  std::vector<DevComm> dev(comms.size());
  for (std::size_t r = 0; r < comms.size(); ++r) {
    dev[r].bytes.resize(sizeof(ncclDevComm));
    std::memcpy(dev[r].bytes.data(), &out[r], sizeof(ncclDevComm));
  }
  return dev;
}

Expected<void> dev_comms_destroy(const Api& a, const std::vector<Comm>& comms, const std::vector<DevComm>& dev) {
  MET_NCCL(a, GroupStart());
  Result first = 0;
  for (std::size_t r = 0; r < comms.size() && r < dev.size(); ++r) {
    if (dev[r].bytes.size() != sizeof(ncclDevComm)) continue;
    ncclDevComm d;
    std::memcpy(&d, dev[r].bytes.data(), sizeof d);
    const Result x = a.DevCommDestroy(comms[r], &d);
    if (x != 0 && first == 0) first = x;
  }
  MET_NCCL(a, GroupEnd());
  if (first != 0) return fail(describe(a, first, "DevCommDestroy(comm, &dev_comm)"));
  return {};
}
#else
Expected<std::vector<DevComm>> dev_comms_create(const Api&, const std::vector<Comm>&, int) {
  return fail("nccl: this met was built without the NCCL headers; no device communicator can be made");
}
Expected<void> dev_comms_destroy(const Api&, const std::vector<Comm>&, const std::vector<DevComm>&) { return {}; }
#endif

}  // namespace met::interp::nccl
