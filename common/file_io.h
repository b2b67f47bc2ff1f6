// Whole-file I/O: reading a file, and writing one so that readers see the old contents or the new,
// never a part (the bytes go to PATH.tmp, which is fsynced and renamed over PATH). The directory entry itself becomes durable
// when the directory is fsynced (FsyncDirectory), which callers that need it across power loss do
// (checkpoints: docs/checkpoint.md).
#pragma once

#include <string>
#include <string_view>

#include "common/status.h"

namespace dslaunch {

// The whole file. Errors name the file with errno's text (a missing file is kNotFound).
Result<std::string> ReadFile(const std::string& path);

// Errors name the step and the file (create, write, fsync/close, rename) with errno's text; the
// temporary file is removed on failure and PATH is left as it was.
Status WriteFileAtomically(const std::string& path, std::string_view bytes);

// fsync of a directory: makes the entries created or renamed in it durable.
Status FsyncDirectory(const std::string& path);

}  // namespace dslaunch
