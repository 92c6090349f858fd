// The host run's memory check: what the host can still give (MemAvailable and
// the memory cgroup, read from a fake root), and a run needing more refused
// with a message instead of being killed by the OOM killer; and the need it
// counts against what a run really holds at its peak.
#include <gtest/gtest.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <random>
#include <stdexcept>
#include <string>

#include "bench/host_memory.hpp"
#include "bench/host_run.hpp"

namespace tide::bench {
namespace {

namespace fs = std::filesystem;

class FakeRoot {
 public:
  FakeRoot() : dir_(fs::temp_directory_path() / ("tide-host-memory-" + std::to_string(std::random_device{}()))) {}
  ~FakeRoot() { fs::remove_all(dir_); }
  void write(const std::string& path, const std::string& text) const {
    const fs::path p = dir_ / path.substr(1);
    fs::create_directories(p.parent_path());
    std::ofstream(p) << text;
  }
  std::string root() const { return dir_.string(); }

 private:
  fs::path dir_;
};

constexpr int64_t kGiB = int64_t{1} << 30;

// A field of /proc/self/status in bytes ("VmRSS", "VmHWM"), -1 if absent.
int64_t statusBytes(const std::string& field) {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind(field + ":", 0) == 0) return std::stoll(line.substr(field.size() + 1)) * 1024;  // kB
  return -1;
}

// Resets the process's peak resident size to its current one (Linux >= 4.0).
bool resetPeakResident() {
  std::ofstream out("/proc/self/clear_refs");
  out << "5";
  out.flush();
  return static_cast<bool>(out);
}

TEST(HostMemory, MemAvailableAloneWithoutACgroupLimit) {
  FakeRoot r;
  r.write("/proc/meminfo", "MemTotal:       16000000 kB\nMemFree:  100 kB\nMemAvailable:    4194304 kB\n");
  r.write("/proc/self/cgroup", "0::/job\n");
  r.write("/sys/fs/cgroup/job/memory.max", "max\n");
  r.write("/sys/fs/cgroup/job/memory.current", "123\n");
  EXPECT_EQ(hostMemoryAvailable(r.root()), 4 * kGiB);
}

TEST(HostMemory, ACgroupV2LimitBelowMemAvailableWins) {
  FakeRoot r;
  r.write("/proc/meminfo", "MemAvailable:    4194304 kB\n");
  r.write("/proc/self/cgroup", "0::/job\n");
  r.write("/sys/fs/cgroup/job/memory.max", std::to_string(2 * kGiB) + "\n");
  r.write("/sys/fs/cgroup/job/memory.current", std::to_string(kGiB / 2) + "\n");
  EXPECT_EQ(hostMemoryAvailable(r.root()), 2 * kGiB - kGiB / 2);
}

TEST(HostMemory, ACgroupV1MemoryControllerIsRead) {
  FakeRoot r;
  r.write("/proc/meminfo", "MemAvailable:    4194304 kB\n");
  r.write("/proc/self/cgroup", "12:cpu,cpuacct:/x\n4:memory:/job\n");
  r.write("/sys/fs/cgroup/memory/job/memory.limit_in_bytes", std::to_string(kGiB) + "\n");
  r.write("/sys/fs/cgroup/memory/job/memory.usage_in_bytes", std::to_string(3 * kGiB) + "\n");
  EXPECT_EQ(hostMemoryAvailable(r.root()), 0);  // over its limit already: nothing left
}

TEST(HostMemory, NothingReadableSaysSo) {
  FakeRoot r;
  r.write("/proc/meminfo", "MemTotal: 1 kB\n");
  EXPECT_EQ(hostMemoryAvailable(r.root()), std::nullopt);
}

TEST(HostMemory, ARunNeedingMoreThanTheHostHasIsRefusedWithItsNeed) {
  // 64 ranks (8 nodes of 8), each with a 2 TiB bf16 parameter's landing and gradient: far beyond any host.
  HostRunOptions o;
  o.topo = plan::Topology::make(8, 8);
  o.specs = {plan::ParamSpec{{int64_t{1} << 24, int64_t{1} << 16}, plan::DType::kBF16}};
  try {
    runOnHost(o);
    FAIL() << "a 256 TiB host run was not refused";
  } catch (const std::invalid_argument& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("needs about"), std::string::npos) << what;
    EXPECT_NE(what.find("64 ranks"), std::string::npos) << what;
    EXPECT_NE(what.find("available"), std::string::npos) << what;
  }
}

TEST(HostMemory, ANeedPast2To63BytesIsRefusedNotWrapped) {
  // 8192 ranks, each with 256 fp32 gradients of 2^40 elements (2^50 bytes): 2^63 bytes of
  // gradients alone, which int64 arithmetic wrapped to a negative need that passed.
  HostRunOptions o;
  o.topo = plan::Topology::make(1024, 8);
  o.specs.assign(256, plan::ParamSpec{{int64_t{1} << 40}, plan::DType::kBF16});
  o.gradDtype = plan::DType::kFP32;
  try {
    runOnHost(o);
    FAIL() << "a 2^63-byte host run was not refused";
  } catch (const std::invalid_argument& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("needs about"), std::string::npos) << what;
    EXPECT_NE(what.find("8192 ranks"), std::string::npos) << what;
  }
}

// What the guard counts covers what a run holds at its peak: the run once held
// copies of every rank's gradients and outputs (the reference's) that it did
// not count, 40 % over its count here, so a run the guard let through could
// still meet the OOM killer. Accumulating, so both copies are made.
TEST(HostMemory, TheNeedCountedCoversARunsPeak) {
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
  GTEST_SKIP() << "a sanitizer's shadow memory is part of the resident size";
#endif
  if (!resetPeakResident() || statusBytes("VmHWM") < 0) GTEST_SKIP() << "no resettable peak resident size here";
  HostRunOptions o;
  o.topo = plan::Topology::make(1, 2);
  o.specs = {plan::ParamSpec{{2048, 4096}, plan::DType::kBF16}};  // 16 MiB of bf16
  o.iters = 2;
  o.accumulate = true;
  o.inputs = InputKind::kInteger;
  o.seed = std::random_device{}();
  const double need = hostRunMemoryNeed(o);
  ASSERT_TRUE(resetPeakResident());
  const int64_t before = statusBytes("VmRSS");
  const HostRunResult r = runOnHost(o);
  const int64_t grown = statusBytes("VmHWM") - before;
  ASSERT_TRUE(r.error.empty()) << r.error;
  EXPECT_TRUE(r.allGather.ok && r.reduceScatter.ok);
  EXPECT_LE(static_cast<double>(grown), need) << "peak grew by " << grown << " bytes; the guard counts " << need;
  // And the count is of the run, not a blanket bound that could hide a miss.
  EXPECT_GE(static_cast<double>(grown), 0.6 * need) << "peak grew by " << grown << " bytes; the guard counts " << need;
}

}  // namespace
}  // namespace tide::bench
