#include "fabric/device_quiescence.hpp"

#include <mutex>
#include <vector>

namespace tide::fabric {

namespace {

struct Enrolled {
  int device = 0;
  const void* owner = nullptr;
  DeviceQuiescence::Probe probe;
};

std::mutex& registryMutex() {
  static std::mutex mu;
  return mu;
}

std::vector<Enrolled>& registry() {
  static std::vector<Enrolled> r;
  return r;
}

}  // namespace

void DeviceQuiescence::enroll(int device, const void* owner, Probe probe) {
  std::lock_guard<std::mutex> lock(registryMutex());
  registry().push_back(Enrolled{device, owner, std::move(probe)});
}

void DeviceQuiescence::withdraw(const void* owner) {
  std::lock_guard<std::mutex> lock(registryMutex());
  std::erase_if(registry(), [owner](const Enrolled& e) { return e.owner == owner; });
}

bool DeviceQuiescence::quiescent(int device) {
  std::lock_guard<std::mutex> lock(registryMutex());
  for (const Enrolled& e : registry())
    if (e.device == device && !e.probe()) return false;
  return true;
}

}  // namespace tide::fabric
