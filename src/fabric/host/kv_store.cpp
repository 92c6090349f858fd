#include "fabric/host/kv_store.hpp"

#include <algorithm>
#include <chrono>
#include <cerrno>
#include <cstdlib>

#include "fabric/seconds_text.hpp"
#include "tide/fabric.hpp"

namespace tide::fabric::host {

void storeBarrier(KeyValueStore& store, const std::string& key, int participants,
                  double timeoutSeconds) {
  const std::string arrived = key + "/arrived";
  const std::string open = key + "/open";
  // The last to arrive opens the barrier: waiters then need one key, not a
  // polled counter.
  if (store.add(arrived, 1) == participants) store.set(open, "1");
  try {
    store.get(open, timeoutSeconds);
  } catch (const FabricError& e) {
    // Only a timeout is about who arrived; any other failure of the store
    // (an unreadable directory, a broken connection) is its own.
    if (e.kind() != FabricError::Kind::kTimeout) throw;
    throw FabricError(FabricError::Kind::kTimeout,
                      "barrier '" + key + "': " + std::to_string(store.add(arrived, 0)) + " of " +
                          std::to_string(participants) + " arrived within " +
                          secondsText(timeoutSeconds) + " (" + e.what() + ")");
  }
}

std::vector<uint64_t> storeAllGatherWords(KeyValueStore& store, const std::string& key, int rank, int ranks,
                                          const std::vector<uint64_t>& mine, double timeoutSeconds) {
  using Clock = std::chrono::steady_clock;
  const auto deadline = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                           std::chrono::duration<double>(timeoutSeconds));
  // Decimal text by hand, not through iostreams: in a process that loaded
  // another libstdc++ first (a Python with torch on the GPU host), this
  // library's ostringstream crashed in its locale facets (session 25).
  std::string text;
  for (const uint64_t w : mine) text += std::to_string(w) + ' ';
  store.set(key + "/" + std::to_string(rank), text);
  std::vector<uint64_t> all;
  all.reserve(static_cast<size_t>(ranks) * mine.size());
  std::string missing;
  for (int peer = 0; peer < ranks; ++peer) {
    if (peer == rank) {
      all.insert(all.end(), mine.begin(), mine.end());
      continue;
    }
    std::string value;
    try {
      // One deadline for the whole gather; a peer found late still counts.
      value = store.get(key + "/" + std::to_string(peer),
                        std::max(0.0, std::chrono::duration<double>(deadline - Clock::now()).count()));
    } catch (const FabricError& e) {
      if (e.kind() != FabricError::Kind::kTimeout) throw;
      missing += (missing.empty() ? "" : ", ") + std::to_string(peer);
      continue;
    }
    size_t got = 0;
    const char* at = value.c_str();
    for (;;) {
      while (*at == ' ') ++at;
      if (*at == '\0') break;
      const bool digit = *at >= '0' && *at <= '9';  // strtoull would take a sign or spaces
      char* end = nullptr;
      errno = 0;
      const unsigned long long w = std::strtoull(at, &end, 10);
      if (!digit || end == at || errno != 0 || (*end != ' ' && *end != '\0'))
        throw FabricError(FabricError::Kind::kUsage, "all-gather '" + key + "': rank " + std::to_string(peer) +
                                                         " published '" + value + "', not decimal words");
      if (got++ < mine.size()) all.push_back(static_cast<uint64_t>(w));
      at = end;
    }
    if (got != mine.size())
      throw FabricError(FabricError::Kind::kUsage, "all-gather '" + key + "': rank " + std::to_string(peer) +
                                                       " published " + (got > mine.size() ? "more" : std::to_string(got)) +
                                                       " words, this rank " +
                                                       std::to_string(mine.size()));
  }
  if (!missing.empty())
    throw FabricError(FabricError::Kind::kTimeout, "all-gather '" + key + "': rank " + std::to_string(rank) +
                                                       " waited " + secondsText(timeoutSeconds) +
                                                       " and never heard from rank(s) " + missing);
  return all;
}

}  // namespace tide::fabric::host
