// Names of the multi-process host fabric's shared-memory segments, and the
// removal of those a killed bootstrap left in /dev/shm (shm_world.hpp says
// when each runs). A name is "/tide-<job>-<rank>-p<pid>-n<pidns>": the job's
// random id, the rank, the process that created it and that process's pid
// namespace, so that a later bootstrap can tell that its creator is gone, and
// whether the pid is one it can ask about at all (containers sharing /dev/shm
// with --ipc=host each have pid namespaces of their own). Where the namespace
// cannot be read (no /proc), and in the names of builds before it, "-n<pidns>"
// is left out. Only names of exactly that format are ever removed: another
// program's objects in /dev/shm are never touched.
#pragma once

#include <sys/types.h>  // pid_t

#include <cstddef>
#include <cstdint>
#include <string>

namespace tide::fabric::host {

// Lower-case hex digits of a job id.
inline constexpr size_t kJobIdChars = 16;

// This process's pid namespace: the inode of /proc/self/ns/pid, unique among
// the namespaces alive on the host; 0 where it cannot be read.
uint64_t currentPidNamespace() noexcept;

// The shared-memory name of `rank`'s segment in job `jobId`, created by
// process `pid` of pid namespace `pidNamespace` (0: unknown, left out).
std::string shmSegmentName(const std::string& jobId, int rank, pid_t pid,
                           uint64_t pidNamespace = currentPidNamespace());

// The age below which a bootstrap never sweeps a segment whose creator's pid
// namespace is unknown, however gone that creator looks: ten times the
// default bootstrap deadline (a bootstrap with a longer deadline uses its
// own). Such a creator may live in another pid namespace that shares
// /dev/shm, where its pid means nothing from here, while a live bootstrap
// keeps its names no longer than its deadline.
inline constexpr double kStaleSegmentAgeSeconds = 600;

// Unlinks segments in /dev/shm named exactly as shmSegmentName makes them,
// owned by this user, whose creator is gone, with one line on stderr for
// each, and returns how many it removed:
//   - named with this process's pid namespace: at any age (the pid is one
//     this process can ask about);
//   - named without a namespace: once their mtime is at least
//     `unknownNamespaceMinAgeSeconds` old;
//   - named with another pid namespace: never (that namespace's bootstraps
//     sweep them; their pids mean nothing here).
// Never throws, and an unreadable /dev/shm is no error: a sweep must not fail
// a bootstrap.
int sweepSegmentsOfDeadProcesses(double unknownNamespaceMinAgeSeconds) noexcept;

// Unlinks every name in /dev/shm of job `jobId` with a rank below `ranks`,
// whoever created it: a failing rank's clean-up of names it never read.
// Never throws (it runs on error paths).
void unlinkNamesOfJob(const std::string& jobId, int ranks) noexcept;

}  // namespace tide::fabric::host
