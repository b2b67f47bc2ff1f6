// WorkerOutput: one worker's output as it arrives from its stdout and stderr pipes (docs/launcher.md,
// "Log files"; docs/protocol.md, OUTPUT and OUTPUT_LOST). The bytes are cut into lines
// (LineSplitter), appended to the rank's log files (LogWriter), the last kStderrTailLines lines of
// stderr are kept for its WORKER_EXITED, and the lines go to the launcher when the assignment
// says `tee`. Transient lines (progress redraws, control::IsTransientLine) go to the launcher only:
// not into the log, which is the record of the run, nor into the tail.
//
// What the launcher must hear comes back as messages, in the order to send them: OUTPUT_LOST at
// the first failed write of a log file (a full disk must neither stop the job nor go unnoticed),
// and again with the totals and `final` when that stream closes; OUTPUT with every line of a read
// when tee is set. No I/O but the log files' writes (agent/workers/worker_pipes.h reads the pipes);
// not thread-safe.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "agent/workers/line_splitter.h"
#include "agent/workers/log_writer.h"
#include "common/control_messages.h"

namespace dslaunch::agent {

// Lines of a worker's stderr kept for the root-cause summary (WORKER_EXITED's stderr_tail).
inline constexpr size_t kStderrTailLines = 20;

class WorkerOutput {
 public:
  // The worker of `rank` in `generation`; `out` and `err` are its open log files.
  WorkerOutput(int generation, int rank, bool tee, LogWriter out, LogWriter err);

  // Bytes read from `stream`: the lines they complete, handled as above.
  std::vector<control::Message> Feed(control::Stream stream, std::string_view bytes);
  // `stream` has ended: its unterminated rest as a last line, then OUTPUT_LOST with `final` if
  // its log lost anything. Nothing for a stream already closed.
  std::vector<control::Message> Close(control::Stream stream);

  bool closed(control::Stream stream) const { return Of(stream).closed; }
  // The last kStderrTailLines lines of stderr, oldest first.
  std::vector<std::string> stderr_tail() const { return err_tail_.Lines(); }
  // The stderr log's path, as WORKER_STARTED and WORKER_EXITED name it.
  const std::string& stderr_log_path() const { return err_.log.path(); }

 private:
  struct Stream {
    LineSplitter splitter;
    LogWriter log;
    bool closed = false;
  };
  Stream& Of(control::Stream stream) { return stream == control::Stream::kStdout ? out_ : err_; }
  const Stream& Of(control::Stream stream) const { return stream == control::Stream::kStdout ? out_ : err_; }
  void Deliver(control::Stream stream, std::vector<std::string> lines, std::vector<control::Message>& messages);
  control::OutputLost Lost(control::Stream stream, bool final) const;

  int generation_;
  int rank_;
  bool tee_;
  Stream out_, err_;
  TailBuffer err_tail_{kStderrTailLines};
};

}  // namespace dslaunch::agent
