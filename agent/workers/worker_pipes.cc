// The Asio half of agent/workers/worker_pipes.h: two stream descriptors and a drain timer a worker.
#include "agent/workers/worker_pipes.h"

#include <array>

#include "common/asio.h"

namespace dslaunch::agent {
namespace {

// Bytes read from a pipe at a time.
constexpr size_t kReadChunkBytes = 64u << 10;

struct Pipe {
  std::unique_ptr<asio::posix::stream_descriptor> fd;
  std::array<char, kReadChunkBytes> buffer{};  // the Worker lives on the heap, so this does too
};

}  // namespace

struct WorkerPipes::Worker {
  size_t index = 0;
  WorkerOutput output;
  Pipe out, err;
  std::unique_ptr<asio::steady_timer> drain_timer;

  Pipe& Of(control::Stream stream) { return stream == control::Stream::kStdout ? out : err; }
  bool closed() const { return output.closed(control::Stream::kStdout) && output.closed(control::Stream::kStderr); }
};

WorkerPipes::WorkerPipes(asio::io_context& io, WorkerPipesListener& listener, std::chrono::milliseconds drain_timeout)
    : io_(io), listener_(listener), drain_timeout_(drain_timeout) {}

WorkerPipes::~WorkerPipes() = default;

size_t WorkerPipes::Add(UniqueFd stdout_fd, UniqueFd stderr_fd, WorkerOutput output) {
  auto w = std::unique_ptr<Worker>(new Worker{workers_.size(), std::move(output), {}, {}, nullptr});
  w->out.fd = std::make_unique<asio::posix::stream_descriptor>(io_, stdout_fd.Release());
  w->err.fd = std::make_unique<asio::posix::stream_descriptor>(io_, stderr_fd.Release());
  w->drain_timer = std::make_unique<asio::steady_timer>(io_);
  Worker& raw = *w;
  workers_.push_back(std::move(w));
  Read(raw, control::Stream::kStdout);
  Read(raw, control::Stream::kStderr);
  return raw.index;
}

void WorkerPipes::Read(Worker& w, control::Stream stream) {
  Pipe& pipe = w.Of(stream);
  pipe.fd->async_read_some(asio::buffer(pipe.buffer), [this, &w, &pipe, stream](boost::system::error_code ec, size_t n) {
    if (n > 0) {
      for (auto& m : w.output.Feed(stream, {pipe.buffer.data(), n})) listener_.OnOutput(std::move(m));
    }
    if (ec) {
      Close(w, stream);
      return;
    }
    Read(w, stream);
  });
}

void WorkerPipes::Close(Worker& w, control::Stream stream) {
  if (w.output.closed(stream)) return;
  for (auto& m : w.output.Close(stream)) listener_.OnOutput(std::move(m));
  boost::system::error_code ignored;
  w.Of(stream).fd->close(ignored);
  if (!w.closed()) return;
  w.drain_timer->cancel();
  listener_.OnPipesClosed(w.index);
}

void WorkerPipes::OnExited(size_t index) {
  Worker& w = *workers_[index];
  if (w.closed()) return;
  w.drain_timer->expires_after(drain_timeout_);
  w.drain_timer->async_wait([this, &w](boost::system::error_code ec) {
    if (ec) return;
    Close(w, control::Stream::kStdout);
    Close(w, control::Stream::kStderr);
  });
}

bool WorkerPipes::closed(size_t index) const { return workers_[index]->closed(); }
const WorkerOutput& WorkerPipes::output(size_t index) const { return workers_[index]->output; }
size_t WorkerPipes::size() const { return workers_.size(); }

void WorkerPipes::Retire(std::unique_ptr<WorkerPipes> pipes) {
  if (!pipes) return;
  asio::io_context& io = pipes->io_;
  asio::post(io, [retired = std::move(pipes)] {});
}

}  // namespace dslaunch::agent
