// Plan validator (App. D): rejects waves where two contributors land on one
// GPU at one inbox block, and checks stale-block zeroing per generation.
#include <map>
#include <set>
#include <string>

#include "tide/plan.hpp"

namespace tide::plan {

std::vector<ValidationIssue> validateRsPlan(const Topology& topo, const RsPlan& plan) {
  std::vector<ValidationIssue> issues;
  const int m = topo.nodes;
  const int l = topo.gpusPerNode;
  using Block = std::pair<int, int>;  // (gpu, block)
  std::map<int, std::set<Block>> dirty;  // generation -> blocks holding data
  for (const RsWave& wave : plan.waves) {
    std::map<Block, int> owner;
    std::set<Block> written;
    for (int c : wave.contributors) {
      for (int s = 0; s < l; ++s) {
        const Block b{landingGpu(s, c, m, l), s};
        auto [it, fresh] = owner.emplace(b, c);
        if (!fresh) {
          ValidationIssue v;
          v.wave = wave.index;
          v.destGpu = b.first;
          v.block = b.second;
          v.contributors = {it->second, c};
          v.message = "wave " + std::to_string(wave.index) + ": contributors " +
                      std::to_string(it->second) + " and " + std::to_string(c) +
                      " both land on GPU " + std::to_string(b.first) + " inbox block " +
                      std::to_string(b.second) + " (M=" + std::to_string(m) + ", L=" +
                      std::to_string(l) + ", wave width " + std::to_string(plan.waveWidth) + ")";
          issues.push_back(v);
        }
        written.insert(b);
      }
    }
    std::set<Block>& gen = dirty[wave.generation];
    std::set<Block> zeroed;
    for (const InboxBlock& z : wave.zero) zeroed.insert({z.gpu, z.block});
    for (const Block& b : gen) {
      if (!written.count(b) && !zeroed.count(b)) {
        ValidationIssue v;
        v.wave = wave.index;
        v.destGpu = b.first;
        v.block = b.second;
        v.message = "wave " + std::to_string(wave.index) + ": stale inbox block " +
                    std::to_string(b.second) + " on GPU " + std::to_string(b.first) +
                    " is not zeroed before landing";
        issues.push_back(v);
      }
    }
    for (const Block& b : zeroed) {
      if (!gen.count(b) || written.count(b)) {
        ValidationIssue v;
        v.wave = wave.index;
        v.destGpu = b.first;
        v.block = b.second;
        v.message = "wave " + std::to_string(wave.index) + ": zeroes inbox block " +
                    std::to_string(b.second) + " on GPU " + std::to_string(b.first) +
                    " which is not stale";
        issues.push_back(v);
      }
    }
    gen = wave.clearAfterLanding ? std::set<Block>{} : written;
  }
  for (const auto& [generation, blocks] : dirty) {
    if (!blocks.empty()) {
      ValidationIssue v;
      v.message = "inbox generation " + std::to_string(generation) +
                  " is left holding data at the end of the call";
      issues.push_back(v);
    }
  }
  return issues;
}

}  // namespace tide::plan
