// Resolving a run-time library's entry points (libcuda.so.1, libnccl.so.2: met links neither): each
// symbol into its typed slot, the first one missing remembered for the error.
#pragma once

#include <dlfcn.h>

#include <string>

namespace met::interp {

template <class F>
void resolve_symbol(void* lib, F& slot, const char* name, std::string& missing) {
  void* p = dlsym(lib, name);
  if (!p && missing.empty()) missing = name;
  slot = reinterpret_cast<F>(p);
}

}  // namespace met::interp
