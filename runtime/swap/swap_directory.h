// The checks a run needs before it puts state on disk, and the removal of swap files left by a
// run that crashed (docs/offload.md, "Before training"). `key` is the JSON path of the nvme_path
// setting (e.g. "zero_optimization.offload_optimizer.nvme_path"), so errors say which setting to
// fix.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace dslaunch::runtime::swap {

// Pure: kFailedPrecondition naming the path, both byte counts and what to do when `available`
// is below `needed`; OK otherwise.
Status CheckFreeSpace(const std::string& path, uint64_t needed, uint64_t available, std::string_view key);

// nvme_path exists, is a directory, the process can create files in it (a probe file is created
// and removed: access(2) says yes to root on a read-only mount), and its file system has `needed`
// bytes free (statvfs f_bavail, what an unprivileged writer may use). Creates the swap
// sub-directory (swap_file_name.h). Errors are kFailedPrecondition, or kInvalidArgument for an
// empty path, each naming `key`, the path and, for space, the bytes.
Status CheckSwapDirectory(const std::string& nvme_path, uint64_t needed, std::string_view key);

struct StaleSwapFile {
  std::string path;
  uint64_t bytes = 0;
};

// The line that reports `file`'s removal: "removed stale swap file 'PATH' (N bytes) left by a run
// that ended without cleaning up".
std::string DescribeRemoval(const StaleSwapFile& file);

// Removes every swap file under nvme_path's swap sub-directory whose owner has ended (no process
// of the pid in its name, and its flock can be taken) and returns what it removed, for the caller
// to print. Files of live runs (any job, any rank) are left alone, also in the moment between
// their creation and their lock; names that are not swap file names are never touched. A
// missing swap sub-directory removes nothing.
Result<std::vector<StaleSwapFile>> RemoveStaleSwapFiles(const std::string& nvme_path);

}  // namespace dslaunch::runtime::swap
