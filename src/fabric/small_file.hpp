#pragma once
// Reading small text files (/proc, /sys, cgroup limits) without iostreams:
// libtide is loaded into processes that carry another libstdc++ (PyTorch's
// wheels), and this library's iostreams crashed there inside the locale
// facets (session 25, kv_store.cpp). POSIX read needs no locale.

#include <cstddef>
#include <optional>
#include <string>

namespace tide::fabric {

// The file's bytes, at most maxBytes of them; nullopt if it cannot be opened or read.
std::optional<std::string> readSmallFile(const std::string& path, size_t maxBytes = 64 * 1024);

// The file's first whitespace-delimited word, nullopt if there is none.
std::optional<std::string> firstWordOfFile(const std::string& path);

}  // namespace tide::fabric
