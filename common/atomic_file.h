// Writing a file so that readers see the old contents or the new, never a part: the bytes go to
// PATH.tmp, which is fsynced and renamed over PATH. (The directory entry itself is made durable by
// fsyncing the directory, which callers that need it across power loss do; see the checkpoint
// issue.)
#pragma once

#include <string>
#include <string_view>

#include "common/status.h"

namespace dslaunch {

// Errors name the step and the file (create, write, fsync/close, rename) with errno's text; the
// temporary file is removed on failure and PATH is left as it was.
Status WriteFileAtomically(const std::string& path, std::string_view bytes);

}  // namespace dslaunch
