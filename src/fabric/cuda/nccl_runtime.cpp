#include "fabric/cuda/nccl_runtime.hpp"

#include <dlfcn.h>
#include <nccl.h>

namespace tide::fabric::cuda {

void* loadedNccl() {
  static void* const lib = dlopen("libnccl.so.2", RTLD_NOW | RTLD_NOLOAD);
  return lib;
}

void* loadedNcclSymbol(const char* name) {
  void* lib = loadedNccl();
  return lib != nullptr ? dlsym(lib, name) : nullptr;
}

std::string ncclVersionString(int code) {
  return std::to_string(code / 10000) + "." + std::to_string(code / 100 % 100) + "." + std::to_string(code % 100);
}

std::string loadedNcclVersion() {
  int code = 0;
  return ncclGetVersion(&code) == ncclSuccess ? ncclVersionString(code) : std::string("unknown");
}

}  // namespace tide::fabric::cuda
