// Error records: what a failed worker says about its own failure, so that the launcher can tell
// the original failure from the collateral ones that follow it.
//
// The agent gives every worker TORCHELASTIC_ERROR_FILE (the variable torchrun sets; PyTorch's
// `torch.distributed.elastic.multiprocessing.errors.record` writes the file on an uncaught
// exception), removes any old file before the worker starts, and sends the file's contents with
// WORKER_EXITED. The bundled runtime writes one when it fails. The format is PyTorch's, with an
// optional "dslaunch" object of our own (docs/launcher.md, "Which failure is the root cause"):
//
//   {"message": {"message": "TEXT", "extraInfo": {"py_callstack": "...", "timestamp": "UNIX_SECONDS"}},
//    "dslaunch": {"time_ns": UNIX_NANOSECONDS, "caused_by_peer": true|false}}
//
// `caused_by_peer` marks a failure that a worker only saw because a peer failed first (a
// collective that broke because another rank died or stalled): collateral, never preferred as
// the root cause over a failure of a rank's own.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "common/status.h"

namespace dslaunch {

// The most of an error file the agent reads and forwards: a message and a stack trace fit well
// within it, and a runaway file cannot bloat the control stream.
inline constexpr size_t kMaxErrorRecordBytes = 64u << 10;

struct ErrorRecord {
  std::string message;
  int64_t time_ns = 0;  // when the error happened (Unix time); from "timestamp" (seconds) if no time_ns
  bool caused_by_peer = false;
};

// The file's text for `record` (PyTorch's layout plus the "dslaunch" object).
std::string FormatErrorRecord(const ErrorRecord& record);

// Parses an error file's text. Fails (kInvalidArgument, saying what is wrong) for text that is not
// JSON or lacks message.message; other fields are optional.
Result<ErrorRecord> ParseErrorRecord(const std::string& text);

// Writes the record to `path` atomically (temporary file, rename). An empty path does nothing.
Status WriteErrorRecord(const std::string& path, const ErrorRecord& record);

}  // namespace dslaunch
