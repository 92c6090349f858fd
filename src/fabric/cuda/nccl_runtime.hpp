// What the NCCL library loaded in this process provides, asked at run time.
// libtide links NCCL entry points that every NCCL it runs with (>= 2.28) has;
// newer ones (host-side LSA pointers, host RMA: >= 2.29) are looked up here,
// so that a libtide built against newer headers still loads beside an older
// NCCL (PyTorch's, e.g. 2.28.9) and refuses only what needs the newer one,
// with a message, where it is needed.
#pragma once

#include <string>

namespace tide::fabric::cuda {

// The libnccl.so.2 this process already loaded (through libtide's link or
// PyTorch's, whichever came first); null when none is loaded under that name.
void* loadedNccl();

// `name` in loadedNccl(); null when absent.
void* loadedNcclSymbol(const char* name);

// NCCL_VERSION_CODE form (major * 10000 + minor * 100 + patch) as "2.28.9".
std::string ncclVersionString(int code);

// The loaded NCCL's version (ncclGetVersion), as ncclVersionString gives it.
std::string loadedNcclVersion();

}  // namespace tide::fabric::cuda
