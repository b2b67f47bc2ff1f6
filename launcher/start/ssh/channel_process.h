// SshChannelProcess: one remote command running on a channel of an authenticated SSH session
// (SshConnection::Start creates it). Its output is pumped by one thread; any thread may kill it.
//
// Threading: libssh sessions are not thread-safe. Everything here except Kill(), Wake() and Detach() uses
// the session and must run on the one thread that currently owns the session (the one that called
// SshConnection::Start, or a thread it handed the objects to). The process must be destroyed
// before its SshConnection, and not while Pump runs on another thread.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "common/exit_status.h"
#include "common/status.h"

struct ssh_session_struct;  // libssh's session, kept out of this header

namespace dslaunch::launcher {

// After a KILL signal request, how long Pump waits for the server to report the end (exit-signal
// and channel close) before it closes the channel itself: sshd answers within milliseconds, a dead
// link never does.
inline constexpr std::chrono::milliseconds kKillCloseWait{2000};

enum class OutputStream { kStdout, kStderr };

// How a remote command ended, as far as the SSH server told.
struct RemoteExit {
  // From the server's exit-status or exit-signal message; nullopt when it sent neither (the
  // connection was lost, or the channel was closed by us after a kill or a detach).
  std::optional<ExitStatus> status;
  // What happened to the channel, naming the host: "ssh channel to HOST closed",
  // "ssh connection to HOST lost: REASON", "killed (KILL signal sent over ssh to HOST)".
  std::string detail;
};

class SshChannelProcess {
 public:
  using OutputFn = std::function<void(OutputStream stream, std::string_view bytes)>;

  // Opens a session channel on `session` (waiting at most `timeout` for the server), execs
  // `command` (run by the remote login shell), and writes `stdin_data` to the command's stdin,
  // then EOF when `close_stdin`. Fails with kUnavailable naming `host` when the channel cannot be
  // opened, the exec request is refused, or the write fails. `session` must outlive the result.
  // Use SshConnection::Start.
  static Result<std::unique_ptr<SshChannelProcess>> Open(ssh_session_struct* session, std::string host,
                                                         const std::string& command, std::string_view stdin_data,
                                                         bool close_stdin, std::chrono::milliseconds timeout);

  SshChannelProcess(const SshChannelProcess&) = delete;
  SshChannelProcess& operator=(const SshChannelProcess&) = delete;
  // Closes and frees the channel (owner thread only). Does not signal the remote command, but its
  // stdin reaches EOF if it was still open.
  ~SshChannelProcess();

  // Writes more of the command's stdin, then EOF when `close`. kUnavailable when the channel is
  // gone; kFailedPrecondition after EOF was sent.
  Status WriteStdin(std::string_view data, bool close);

  // A shell command Kill() also runs, on a new channel of the same session, for servers that
  // refuse signal requests (OpenSSH refuses them for root logins): e.g. `kill -KILL -- -PID`.
  // Owner thread; may be set while pumping (from on_output).
  void SetKillCommand(std::string command) { kill_command_ = std::move(command); }

  // Runs the session, giving each chunk of output to `on_output` as it arrives (any chunking; on
  // the calling thread), until `ready()` (checked after each batch of output) returns true: then
  // returns true and the channel stays open. Returns false when the channel ended first (Pump then
  // returns how), kDeadlineExceeded when `deadline` passes first.
  Result<bool> PumpUntil(const OutputFn& on_output, const std::function<bool()>& ready,
                         std::chrono::steady_clock::time_point deadline);

  // Runs the session until the channel closes, passing output to `on_output` as PumpUntil does.
  // Returns the RemoteExit when the channel closed, the connection was lost, a kill completed, or
  // Detach() was called (status nullopt, detail "detached"); at once when that happened already.
  // Fails with kDeadlineExceeded when `deadline` passes first; the remote command is then sent a
  // KILL signal request.
  Result<RemoteExit> Pump(const OutputFn& on_output,
                          std::optional<std::chrono::steady_clock::time_point> deadline = std::nullopt);

  // Thread-safe, idempotent, non-blocking: asks the pumping thread to send a KILL signal request
  // (sshd signals the command's process group) and run the kill command, and to close the channel
  // once the server reports the end, or after kKillCloseWait. Takes effect when Pump runs.
  void Kill();

  // Thread-safe, non-blocking: interrupts a running PumpUntil's wait so that it checks ready() at
  // once (a thread that queued work for the pumping thread calls it).
  void Wake();

  // Thread-safe, idempotent, non-blocking: makes a running Pump return at once without waiting for
  // the remote command (which keeps running); a later Pump returns at once.
  void Detach();

 private:
  struct State;
  explicit SshChannelProcess(std::unique_ptr<State> state);
  // The event loop behind Pump and PumpUntil: returns the outcome once the channel has ended (kept
  // in final_), nullopt when `ready` became true.
  std::optional<Result<RemoteExit>> Loop(const OutputFn& on_output, const std::function<bool()>& ready,
                                         std::optional<std::chrono::steady_clock::time_point> deadline);
  void RunKillCommand();

  std::unique_ptr<State> state_;
  std::string kill_command_;
  bool kill_command_sent_ = false;
  std::optional<RemoteExit> final_;
};

// The signal number for a signal name in an SSH exit-signal message ("KILL", "TERM", "SEGV", ...,
// RFC 4254 section 6.10, without "SIG"); nullopt for a name this machine does not know.
std::optional<int> SignalFromSshName(std::string_view name);

}  // namespace dslaunch::launcher
