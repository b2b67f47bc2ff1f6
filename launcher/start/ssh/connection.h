// SshConnection: one authenticated SSH session to a node, over libssh 0.10 (docs/ssh.md).
//
// Connect verifies the host key against known_hosts (failing closed on an unknown or changed key,
// see host_key_policy.h) and authenticates with ssh-agent, then private key files. Run and
// Start execute commands through the remote user's login shell, which must be a POSIX shell.
//
// Threading: libssh sessions are not thread-safe. A connection may move between threads but is
// used by one thread at a time, together with the SshChannelProcess objects it started (which
// must be destroyed first). Different connections may be used concurrently. local_address(),
// host() and user() are plain data and safe from any thread.
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <string_view>

#include "common/exit_status.h"
#include "common/status.h"
#include "launcher/start/ssh/channel_process.h"
#include "launcher/start/ssh/options.h"

namespace dslaunch::launcher {

// Run() keeps at most this much of each of stdout and stderr (the rest is dropped and noted):
// Run is for short checks like `--version`, not for bulk output.
inline constexpr size_t kMaxCommandOutputBytes = 1u << 20;

struct CommandResult {
  ExitStatus exit;
  std::string out;  // stdout, at most kMaxCommandOutputBytes
  std::string err;  // stderr, at most kMaxCommandOutputBytes
};

class SshConnection {
 public:
  // Connects to host:options.port as `user` (empty: options.local_user, else libssh's default,
  // the local user) within options.connect_timeout per step, checks the host key, authenticates.
  // Does not read ~/.ssh/config. Errors name the host:
  //   kInvalidArgument     bad options (ValidateSshOptions).
  //   kUnavailable         cannot connect (refused, unreachable, timed out) or the handshake
  //                        broke off; retrying later may help.
  //   kFailedPrecondition  host key unknown, changed or of another type (the message shows key type
  //                        and SHA256 fingerprint and how to accept it); no usable key; every
  //                        method refused (the message lists what was tried and why it failed).
  //   kInternal            known_hosts unreadable, or it could not be updated for an accepted key.
  static Result<std::unique_ptr<SshConnection>> Connect(const std::string& user, const std::string& host,
                                                        const SshOptions& options);

  SshConnection(const SshConnection&) = delete;
  SshConnection& operator=(const SshConnection&) = delete;
  ~SshConnection();  // disconnects (commands still running remotely are not signalled)

  const std::string& host() const { return host_; }
  const std::string& user() const { return user_; }  // the user logged in as
  // The launcher's own IP address on this connection (getsockname of the session's socket), the
  // address the node can reach the launcher at. IPv4-mapped IPv6 is given as IPv4.
  const std::string& local_address() const { return local_address_; }

  // Runs `command` to completion. Returns its exit status and output, or kDeadlineExceeded when it
  // has not finished by `deadline` (it is then sent a KILL signal request), or kUnavailable when
  // the connection or channel failed or the server reported no exit status.
  Result<CommandResult> Run(const std::string& command, std::chrono::steady_clock::time_point deadline);

  // Execs a long-running `command` with `stdin_data` on its stdin, followed by EOF when
  // `close_stdin` (else the caller writes the rest with WriteStdin), and returns it for the caller
  // to pump. The process borrows this connection: destroy it first.
  Result<std::unique_ptr<SshChannelProcess>> Start(const std::string& command, std::string_view stdin_data,
                                                   bool close_stdin = true);

 private:
  SshConnection() = default;

  ssh_session_struct* session_ = nullptr;
  std::string host_;
  std::string user_;
  std::string local_address_;
  std::chrono::milliseconds step_timeout_{};  // options.connect_timeout: limit of one blocking step
};

}  // namespace dslaunch::launcher
