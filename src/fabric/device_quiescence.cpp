#include "fabric/device_quiescence.hpp"

#include <array>
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

std::vector<int>& neverDrains() {
  static std::vector<int> devices;
  return devices;
}

constexpr int kGates = 64;  // more devices than one process drives; beyond, devices share

}  // namespace

void DeviceQuiescence::enroll(int device, const void* owner, Probe probe) {
  std::lock_guard<std::mutex> lock(registryMutex());
  registry().push_back(Enrolled{device, owner, std::move(probe)});
}

void DeviceQuiescence::withdraw(const void* owner) {
  std::lock_guard<std::mutex> lock(registryMutex());
  std::erase_if(registry(), [owner](const Enrolled& e) { return e.owner == owner; });
}

void DeviceQuiescence::markNeverDrains(int device) {
  std::lock_guard<std::mutex> lock(registryMutex());
  neverDrains().push_back(device);
}

bool DeviceQuiescence::quiescent(int device) {
  std::lock_guard<std::mutex> lock(registryMutex());
  for (int d : neverDrains())
    if (d == device) return false;
  for (const Enrolled& e : registry())
    if (e.device == device && !e.probe()) return false;
  return true;
}

std::shared_mutex& DeviceQuiescence::gate(int device) {
  static std::array<std::shared_mutex, kGates> gates;
  return gates[static_cast<size_t>((device % kGates + kGates) % kGates)];
}

bool DeviceQuiescence::runIfQuiescent(int device, const std::function<void()>& call) {
  std::unique_lock<std::shared_mutex> exclusive(gate(device), std::try_to_lock);
  if (!exclusive.owns_lock() || !quiescent(device)) return false;
  call();
  return true;
}

}  // namespace tide::fabric
