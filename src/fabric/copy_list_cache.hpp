// Which copy lists get a prebuilt replay, and which replays are kept: the
// policy of the CUDA fabric's copy graphs (cuda/copy_engine.hpp), without
// CUDA so that it is tested on CPUs.
//
// A list is a key of words (its copies' addresses and shapes). Its first
// sighting only remembers it: most lists recur (every step's all-gather and
// reduce-scatter of a group), but a replay costs about a millisecond to build.
// Its second sighting marks it wanted; the replay is built at the next
// buildWanted() (the owner calls it where building is safe: building a CUDA
// graph may wait for the whole device to idle), and every sighting after that
// gets it. A list whose build declines (memory that may not be replayed) is
// never built again. At most `maxReplays` are kept, the least recently used
// destroyed first; at most `maxLists` lists are remembered, lists seen only
// once making room when that many are.
//
// Lists the owner marks volatile (memory it does not own, e.g. gradients from
// a caching allocator) recur only as long as that memory comes back at the
// same addresses. Where it does not, their replays are built and hardly ever
// launched: a millisecond of host time each for nothing, every step. So
// volatile lists are built only while it pays: freely for the first
// `probeBuilds`, after that only while the volatile replays have been launched
// at least `launchesPerBuild` times per volatile replay built. The test is
// made at every later sighting of an unbuilt list and again when it would be
// built, so building resumes once the replays already built are launched
// often enough.
#pragma once

#include <cstddef>
#include <cstdint>
#include <iterator>
#include <unordered_map>
#include <utility>
#include <vector>

namespace tide::fabric {

template <typename Replay>  // a handle; Replay{} means none
class CopyListCache {
 public:
  struct Key {
    std::vector<int64_t> words;
    bool operator==(const Key&) const = default;
  };
  struct Stats {
    int64_t hits = 0;     // sightings answered with a replay
    int64_t built = 0;    // replays built
    int64_t dropped = 0;  // replays destroyed to stay under maxReplays
    int64_t volatileHits = 0;     // of hits: volatile lists'
    int64_t volatileBuilt = 0;    // of built: volatile lists'
    int64_t volatileSkipped = 0;  // times a volatile list was left unbuilt because it did not pay
  };
  struct VolatilePolicy {
    int64_t probeBuilds = 32;
    int64_t launchesPerBuild = 8;
  };

  CopyListCache(size_t maxLists, size_t maxReplays, VolatilePolicy policy = {})
      : maxLists_(maxLists), maxReplays_(maxReplays), policy_(policy) {}
  CopyListCache(const CopyListCache&) = delete;
  CopyListCache& operator=(const CopyListCache&) = delete;

  // The replay for this sighting of `key`, or Replay{} (copy the plain way).
  // isVolatile() -> bool: whether the list holds memory that may not come
  // back at the same addresses (see above); asked only at the list's first
  // sighting, which fixes it.
  template <typename IsVolatile>
  Replay sight(Key&& key, IsVolatile&& isVolatile) {
    auto it = lists_.find(key);
    if (it == lists_.end()) {
      // Lists beyond the live replays were seen once, are wanted, or were declined.
      if (lists_.size() >= maxLists_ && lists_.size() > live_) forgetOneOffs();
      if (lists_.size() < maxLists_) lists_.emplace(std::move(key), Entry{.isVolatile = isVolatile()});
      return Replay{};
    }
    Entry& e = it->second;
    if (e.replay == Replay{}) {
      if (!e.declined && !e.wanted && wanted_.size() < maxLists_) {
        if (e.isVolatile && !volatileBuildsPay()) {
          ++stats_.volatileSkipped;
          return Replay{};
        }
        e.wanted = true;
        wanted_.push_back(it->first);
      }
      return Replay{};
    }
    e.lastUse = ++tick_;
    ++stats_.hits;
    if (e.isVolatile) ++stats_.volatileHits;
    return e.replay;
  }
  // A list that is never volatile.
  Replay sight(Key&& key) {
    return sight(std::move(key), [] { return false; });
  }

  // Whether a volatile list sighted twice now would be built.
  bool volatileBuildsPay() const {
    return stats_.volatileBuilt < policy_.probeBuilds ||
           stats_.volatileHits >= policy_.launchesPerBuild * stats_.volatileBuilt;
  }

  bool hasWanted() const { return !wanted_.empty(); }

  // Builds the replay of every list wanted since the last call, in the order
  // they became wanted. build(const Key&) -> Replay (Replay{}: declined, never
  // asked again for this list); destroy(Replay) frees one dropped to stay
  // under maxReplays. Returns how many it built. Should build throw, the list
  // it threw on and those after it stay wanted for the next call (else they
  // would never be built: a wanted list is not queued again by its sightings).
  template <typename Build, typename Destroy>
  size_t buildWanted(Build&& build, Destroy&& destroy) {
    size_t built = 0;
    std::vector<Key> wanted;
    wanted.swap(wanted_);
    size_t next = 0;  // the first of `wanted` not yet done
    try {
      for (; next < wanted.size(); ++next) {
        const Key& key = wanted[next];
        auto it = lists_.find(key);
        if (it == lists_.end() || !it->second.wanted) continue;  // forgotten since (one-offs made room)
        Entry& e = it->second;
        if (e.isVolatile && !volatileBuildsPay()) {  // the probe ended among the lists wanted since the last call
          e.wanted = false;
          ++stats_.volatileSkipped;
          continue;
        }
        if (live_ >= maxReplays_) dropLeastRecent(destroy);  // never `e`: it holds no replay yet
        e.replay = build(it->first);
        e.wanted = false;  // (after build: a throw leaves it wanted, and requeued)
        e.declined = e.replay == Replay{};
        if (!e.declined) {
          e.lastUse = ++tick_;  // as recent as a launch now: built lists are not dropped before their first use
          ++live_;
          ++stats_.built;
          if (e.isVolatile) ++stats_.volatileBuilt;
          ++built;
        }
      }
    } catch (...) {  // the list it threw on and those after it stay wanted
      wanted_.insert(wanted_.begin(), std::make_move_iterator(wanted.begin() + static_cast<std::ptrdiff_t>(next)),
                     std::make_move_iterator(wanted.end()));
      throw;
    }
    return built;
  }

  // Every live replay, e.g. to destroy them all.
  template <typename F>
  void forEachReplay(F&& f) const {
    for (const auto& [key, entry] : lists_)
      if (entry.replay != Replay{}) f(entry.replay);
  }

  const Stats& stats() const { return stats_; }
  size_t lists() const { return lists_.size(); }
  size_t replays() const { return live_; }

 private:
  struct KeyHash {
    size_t operator()(const Key& k) const noexcept {
      uint64_t h = 1469598103934665603ull;  // FNV-1a over the words
      for (int64_t w : k.words) {
        h ^= static_cast<uint64_t>(w);
        h *= 1099511628211ull;
      }
      return static_cast<size_t>(h);
    }
  };
  struct Entry {
    Replay replay{};
    bool isVolatile = false;
    bool declined = false;
    bool wanted = false;  // sighted twice, waiting for buildWanted()
    uint64_t lastUse = 0;
  };

  void forgetOneOffs() {
    for (auto it = lists_.begin(); it != lists_.end();)
      it = it->second.replay == Replay{} ? lists_.erase(it) : std::next(it);
  }

  template <typename Destroy>
  void dropLeastRecent(Destroy& destroy) {
    auto oldest = lists_.end();
    for (auto it = lists_.begin(); it != lists_.end(); ++it)
      if (it->second.replay != Replay{} && (oldest == lists_.end() || it->second.lastUse < oldest->second.lastUse))
        oldest = it;
    if (oldest == lists_.end()) return;
    destroy(oldest->second.replay);
    lists_.erase(oldest);
    --live_;
    ++stats_.dropped;
  }

  size_t maxLists_;
  size_t maxReplays_;
  VolatilePolicy policy_;
  std::unordered_map<Key, Entry, KeyHash> lists_;
  std::vector<Key> wanted_;  // in the order they became wanted
  size_t live_ = 0;
  uint64_t tick_ = 0;
  Stats stats_;
};

}  // namespace tide::fabric
