// The workers' pipes read on a real event loop (agent/workers/worker_pipes.h): real pipes standing
// in for a worker's stdout and stderr, the session faked.
#include "agent/workers/worker_pipes.h"

#include <doctest/doctest.h>
#include <fcntl.h>
#include <unistd.h>

#include "common/asio.h"
#include "tests/support/subprocess.h"

namespace dslaunch::agent {
namespace {

using Clock = std::chrono::steady_clock;
using control::Stream;
using dslaunch::testing::TempDir;
using std::chrono::milliseconds;

constexpr auto kWaitLimit = std::chrono::seconds(10);

struct FakeSession : WorkerPipesListener {
  void OnOutput(control::Message message) override { messages.push_back(std::move(message)); }
  void OnPipesClosed(size_t index) override { closed.push_back(index); }

  // The lines forwarded for `stream`, in order.
  std::vector<std::string> Lines(Stream stream) const {
    std::vector<std::string> lines;
    for (const auto& m : messages) {
      const auto& out = std::get<control::Output>(m);
      if (out.stream == stream) lines.insert(lines.end(), out.lines.begin(), out.lines.end());
    }
    return lines;
  }

  std::vector<control::Message> messages;
  std::vector<size_t> closed;
};

// A worker's two pipes: the agent's ends are taken by WorkerPipes, the worker's ends stay here.
struct WorkerEnds {
  WorkerEnds() {
    int out[2], err[2];
    REQUIRE(::pipe2(out, O_CLOEXEC | O_NONBLOCK) == 0);
    REQUIRE(::pipe2(err, O_CLOEXEC | O_NONBLOCK) == 0);
    out_read = UniqueFd(out[0]);
    out_write = UniqueFd(out[1]);
    err_read = UniqueFd(err[0]);
    err_write = UniqueFd(err[1]);
  }
  static void Write(const UniqueFd& fd, std::string_view s) {
    REQUIRE(::write(fd.get(), s.data(), s.size()) == static_cast<ssize_t>(s.size()));
  }
  UniqueFd out_read, out_write, err_read, err_write;
};

WorkerOutput Output(const TempDir& dir, int rank) {
  auto open = [&](const std::string& name) {
    const std::string path = dir.path() + "/" + name;
    return LogWriter(UniqueFd(::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600)), path);
  };
  return WorkerOutput(/*generation=*/0, rank, /*tee=*/true, open("out" + std::to_string(rank)),
                      open("err" + std::to_string(rank)));
}

template <typename Done>
void RunUntil(asio::io_context& io, Done done) {
  const auto limit = Clock::now() + kWaitLimit;
  while (!done() && Clock::now() < limit) io.run_one_for(milliseconds(10));
  REQUIRE(done());
}

TEST_CASE("WorkerPipes reads a worker's pipes to their end and says once that both are closed") {
  TempDir dir;
  asio::io_context io;
  FakeSession session;
  WorkerPipes pipes(io, session);
  WorkerEnds first, second;
  CHECK(pipes.Add(std::move(first.out_read), std::move(first.err_read), Output(dir, 0)) == 0);
  CHECK(pipes.Add(std::move(second.out_read), std::move(second.err_read), Output(dir, 1)) == 1);
  CHECK(pipes.size() == 2);
  WorkerEnds::Write(second.out_write, "hello\n");
  WorkerEnds::Write(second.err_write, "oops\nlast words");
  second.out_write.Reset();
  RunUntil(io, [&] { return pipes.output(1).closed(Stream::kStdout); });
  CHECK_FALSE(pipes.closed(1));
  CHECK(session.closed.empty());
  second.err_write.Reset();
  RunUntil(io, [&] { return !session.closed.empty(); });
  io.poll();
  CHECK(session.closed == std::vector<size_t>{1});
  CHECK(pipes.closed(1));
  CHECK_FALSE(pipes.closed(0));
  CHECK(session.Lines(Stream::kStdout) == std::vector<std::string>{"hello"});
  CHECK(session.Lines(Stream::kStderr) == std::vector<std::string>{"oops", "last words"});
  CHECK(pipes.output(1).stderr_tail() == std::vector<std::string>{"oops", "last words"});
}

TEST_CASE("WorkerPipes closes the pipes of a reaped worker that something else holds open, after the drain timeout") {
  TempDir dir;
  asio::io_context io;
  FakeSession session;
  WorkerPipes pipes(io, session, /*drain_timeout=*/milliseconds(20));
  WorkerEnds ends;  // the write ends stay open, as a grandchild would hold them
  pipes.Add(std::move(ends.out_read), std::move(ends.err_read), Output(dir, 0));
  WorkerEnds::Write(ends.out_write, "no newline yet");
  io.poll();
  CHECK(session.closed.empty());
  pipes.OnExited(0);
  RunUntil(io, [&] { return !session.closed.empty(); });
  CHECK(session.closed == std::vector<size_t>{0});
  CHECK(session.Lines(Stream::kStdout) == std::vector<std::string>{"no newline yet"});
}

TEST_CASE("WorkerPipes: a worker reaped with its pipes already closed needs no drain") {
  TempDir dir;
  asio::io_context io;
  FakeSession session;
  WorkerPipes pipes(io, session, /*drain_timeout=*/std::chrono::hours(1));
  WorkerEnds ends;
  pipes.Add(std::move(ends.out_read), std::move(ends.err_read), Output(dir, 0));
  ends.out_write.Reset();
  ends.err_write.Reset();
  RunUntil(io, [&] { return pipes.closed(0); });
  pipes.OnExited(0);
  io.restart();
  io.poll();
  CHECK(io.stopped());  // no timer left waiting: the loop ran out of work
  CHECK(session.closed == std::vector<size_t>{0});
}

}  // namespace
}  // namespace dslaunch::agent
