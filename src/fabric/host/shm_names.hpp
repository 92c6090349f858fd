// Names of the multi-process host fabric's shared-memory segments, and the
// removal of those a killed bootstrap left in /dev/shm (shm_world.hpp says
// when each runs). A name is "/tide-<job>-<rank>-p<pid>": the job's random id,
// the rank, and the process that created it, so that a later bootstrap can
// tell that its creator is gone. Only names of exactly that format are ever
// removed: another program's objects in /dev/shm are never touched.
#pragma once

#include <sys/types.h>  // pid_t

#include <cstddef>
#include <string>

namespace tide::fabric::host {

// Lower-case hex digits of a job id.
inline constexpr size_t kJobIdChars = 16;

// The shared-memory name of `rank`'s segment in job `jobId`, created by
// process `pid`.
std::string shmSegmentName(const std::string& jobId, int rank, pid_t pid);

// The age below which a bootstrap never sweeps a segment, however gone its
// creator looks: ten times the default bootstrap deadline (a bootstrap with a
// longer deadline uses its own). Processes of another pid namespace that
// share /dev/shm (containers with --ipc=host) look gone from here, while a
// live bootstrap keeps its names no longer than its deadline.
inline constexpr double kStaleSegmentAgeSeconds = 600;

// Unlinks every segment in /dev/shm named exactly as shmSegmentName makes
// them, owned by this user, whose creator is gone and whose mtime is at least
// `minAgeSeconds` old, with one line on stderr for each. Returns how many it
// removed. Never throws, and an unreadable /dev/shm is no error: a sweep must
// not fail a bootstrap.
int sweepSegmentsOfDeadProcesses(double minAgeSeconds) noexcept;

// Unlinks every name in /dev/shm of job `jobId` with a rank below `ranks`,
// whoever created it: a failing rank's clean-up of names it never read.
// Never throws (it runs on error paths).
void unlinkNamesOfJob(const std::string& jobId, int ranks) noexcept;

}  // namespace tide::fabric::host
