// WorkerPipes: the stdout and stderr pipes of one generation's workers, read on the agent's event
// loop into each worker's WorkerOutput (agent/workers/worker_output.h), whose messages go to the
// listener as they come. A worker's pipes are done when both reached their end, or when it has
// been reaped and they stay open kOutputDrainTimeout longer (a grandchild holds them): the
// listener then hears OnPipesClosed, once, and the worker can be reported.
//
// Threading: everything on the io_context's one thread. The listener and the io_context outlive
// the pipes; Retire destroys them safely from inside a handler. Asio stays in worker_pipes.cc.
#pragma once

#include <chrono>
#include <cstddef>
#include <memory>
#include <vector>

#include "agent/workers/worker_output.h"
#include "common/control_messages.h"
#include "common/unique_fd.h"

namespace boost::asio {
class io_context;
}  // namespace boost::asio

namespace dslaunch::agent {

// After a worker is reaped, how long its pipes may stay open (held by a grandchild) before the
// agent stops reading them and reports the exit.
inline constexpr std::chrono::milliseconds kOutputDrainTimeout{500};

// What the pipes tell the session. Called on the io_context thread.
class WorkerPipesListener {
 public:
  virtual ~WorkerPipesListener() = default;
  // OUTPUT or OUTPUT_LOST for the launcher, in order.
  virtual void OnOutput(control::Message message) = 0;
  // Both pipes of worker `index` are closed and their last lines delivered.
  virtual void OnPipesClosed(size_t index) = 0;
};

class WorkerPipes {
 public:
  WorkerPipes(boost::asio::io_context& io, WorkerPipesListener& listener,
              std::chrono::milliseconds drain_timeout = kOutputDrainTimeout);
  ~WorkerPipes();
  WorkerPipes(const WorkerPipes&) = delete;
  WorkerPipes& operator=(const WorkerPipes&) = delete;

  // Starts reading a started worker's pipes (non-blocking, as SpawnInOwnProcessGroup gives them)
  // into `output`. Returns its index: 0, 1, ... in the order added.
  size_t Add(UniqueFd stdout_fd, UniqueFd stderr_fd, WorkerOutput output);
  // Worker `index` was reaped: pipes still open are closed after the drain timeout.
  void OnExited(size_t index);
  // Both pipes of worker `index` are closed.
  bool closed(size_t index) const;
  const WorkerOutput& output(size_t index) const;
  size_t size() const;

  // Destroys `pipes` once every handler already queued for them (an aborted read) has run.
  static void Retire(std::unique_ptr<WorkerPipes> pipes);

  struct Worker;

 private:
  void Read(Worker& w, control::Stream stream);
  void Close(Worker& w, control::Stream stream);

  boost::asio::io_context& io_;
  WorkerPipesListener& listener_;
  const std::chrono::milliseconds drain_timeout_;
  std::vector<std::unique_ptr<Worker>> workers_;  // on the heap: handlers hold references
};

}  // namespace dslaunch::agent
