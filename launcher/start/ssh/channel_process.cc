#include "launcher/start/ssh/channel_process.h"

#include <libssh/callbacks.h>
#include <libssh/libssh.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <signal.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <utility>

#include "common/unique_fd.h"

namespace dslaunch::launcher {
namespace {

using Clock = std::chrono::steady_clock;

// How long the kill command's channel may take to open and start: a node that is up answers in
// milliseconds; one whose network is gone must not hold the pump for the full connect timeout.
constexpr std::chrono::milliseconds kKillCommandTimeout{1000};

// Longest single wait in Pump when nothing else bounds it: wake-ups come through the eventfd, so
// this only limits how long a lost wake-up could go unnoticed.
constexpr std::chrono::milliseconds kPumpPollSlice{1000};

// Sends the ACK for data just received at once instead of after Linux's delayed-ACK timer (up to
// 40 ms). OpenSSH's sshd leaves Nagle's algorithm on for sessions without a terminal, so each of
// its small messages waits until the previous one is acknowledged: right after authentication it
// sends its host keys (hostkeys-00@openssh.com), and the channel-open confirmation that follows
// would wait those 40 ms, a third of a node's whole start-up. Not permanent: called after each
// wake-up.
void AckNow(int fd) {
  int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_QUICKACK, &one, sizeof(one));
}

// Opens a session channel like ssh_channel_open_session, but in non-blocking mode with its own
// poll loop so that every arriving packet is acknowledged at once (AckNow).
Status OpenChannel(ssh_session session, ssh_channel channel, const std::string& host,
                   std::chrono::milliseconds timeout) {
  const Clock::time_point deadline = Clock::now() + timeout;
  const int fd = ssh_get_fd(session);
  ssh_set_blocking(session, 0);
  int rc;
  while ((rc = ssh_channel_open_session(channel)) == SSH_AGAIN) {
    auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline - Clock::now());
    if (left.count() <= 0) break;
    pollfd p{fd, POLLIN, 0};
    ::poll(&p, 1, static_cast<int>(left.count()));
    AckNow(fd);
  }
  ssh_set_blocking(session, 1);
  if (rc == SSH_OK) return Status::Ok();
  if (rc == SSH_AGAIN) {
    return UnavailableError("ssh to " + host + ": no answer to a channel-open request within " +
                            std::to_string(timeout.count()) + " ms");
  }
  return UnavailableError("ssh to " + host + ": cannot open a session channel: " + ssh_get_error(session));
}

struct SignalName {
  const char* name;
  int number;
};

constexpr SignalName kSignalNames[] = {
    {"ABRT", SIGABRT}, {"ALRM", SIGALRM}, {"BUS", SIGBUS},   {"CHLD", SIGCHLD}, {"CONT", SIGCONT},
    {"FPE", SIGFPE},   {"HUP", SIGHUP},   {"ILL", SIGILL},   {"INT", SIGINT},   {"KILL", SIGKILL},
    {"PIPE", SIGPIPE}, {"QUIT", SIGQUIT}, {"SEGV", SIGSEGV}, {"STOP", SIGSTOP}, {"SYS", SIGSYS},
    {"TERM", SIGTERM}, {"TRAP", SIGTRAP}, {"TSTP", SIGTSTP}, {"USR1", SIGUSR1}, {"USR2", SIGUSR2},
    {"XCPU", SIGXCPU}, {"XFSZ", SIGXFSZ},
};

}  // namespace

std::optional<int> SignalFromSshName(std::string_view name) {
  if (name.starts_with("SIG")) name.remove_prefix(3);
  for (const SignalName& s : kSignalNames) {
    if (name == s.name) return s.number;
  }
  return std::nullopt;
}

// Everything libssh's channel callbacks write to; lives at a stable address (callbacks keep a
// pointer). Only the owner thread touches the non-atomic members.
struct SshChannelProcess::State {
  ssh_session session = nullptr;
  ssh_channel channel = nullptr;
  std::string host;
  ssh_channel_callbacks_struct callbacks{};
  std::string pending[2];  // output received and not yet given to OutputFn, by OutputStream
  bool closed = false;
  std::optional<int> exit_code;
  std::optional<std::string> exit_signal;
  UniqueFd wake;  // eventfd: Kill() and Detach() write it to interrupt Pump's poll
  std::atomic<bool> kill_requested{false};
  std::atomic<bool> detach_requested{false};
  bool stdin_closed = false;
  std::optional<Clock::time_point> kill_give_up;  // set when the KILL request went out

  ~State() {
    if (channel != nullptr) {
      // Closing sends EOF and CLOSE if not done yet; sshd leaves the command running.
      if (ssh_is_connected(session)) ssh_channel_close(channel);
      ssh_channel_free(channel);
    }
  }

  void Wake() {
    uint64_t one = 1;
    (void)!::write(wake.get(), &one, sizeof(one));
  }

  bool SessionAlive() const {
    return ssh_is_connected(session) != 0 && (ssh_get_status(session) & (SSH_CLOSED | SSH_CLOSED_ERROR)) == 0;
  }

  static int OnData(ssh_session, ssh_channel, void* data, uint32_t len, int is_stderr, void* self) {
    static_cast<State*>(self)->pending[is_stderr ? 1 : 0].append(static_cast<const char*>(data), len);
    return static_cast<int>(len);
  }
  static void OnClose(ssh_session, ssh_channel, void* self) { static_cast<State*>(self)->closed = true; }
  static void OnExitStatus(ssh_session, ssh_channel, int status, void* self) {
    static_cast<State*>(self)->exit_code = status;
  }
  static void OnExitSignal(ssh_session, ssh_channel, const char* signal, int, const char*, const char*,
                           void* self) {
    static_cast<State*>(self)->exit_signal = signal != nullptr ? signal : "";
  }
  static int OnWake(socket_t fd, int, void*) {
    uint64_t count = 0;
    (void)!::read(fd, &count, sizeof(count));
    return 0;
  }
};

SshChannelProcess::SshChannelProcess(std::unique_ptr<State> state) : state_(std::move(state)) {}
SshChannelProcess::~SshChannelProcess() = default;

Result<std::unique_ptr<SshChannelProcess>> SshChannelProcess::Open(ssh_session_struct* session, std::string host,
                                                                   const std::string& command,
                                                                   std::string_view stdin_data, bool close_stdin,
                                                                   std::chrono::milliseconds timeout) {
  auto state = std::make_unique<State>();
  state->session = session;
  state->host = std::move(host);
  int efd = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (efd < 0) return ErrnoError("eventfd", errno);
  state->wake.Reset(efd);
  auto fail = [&](std::string_view what) {
    return UnavailableError("ssh to " + state->host + ": " + std::string(what) + ": " + ssh_get_error(session));
  };
  state->channel = ssh_channel_new(session);
  if (state->channel == nullptr) return fail("cannot create a channel");
  // Callbacks before anything can arrive, so no output lands in libssh's own channel buffers.
  ssh_callbacks_init(&state->callbacks);
  state->callbacks.userdata = state.get();
  state->callbacks.channel_data_function = &State::OnData;
  state->callbacks.channel_close_function = &State::OnClose;
  state->callbacks.channel_exit_status_function = &State::OnExitStatus;
  state->callbacks.channel_exit_signal_function = &State::OnExitSignal;
  if (ssh_set_channel_callbacks(state->channel, &state->callbacks) != SSH_OK) return fail("channel callbacks");
  DSLAUNCH_RETURN_IF_ERROR(OpenChannel(session, state->channel, state->host, timeout));
  if (ssh_channel_request_exec(state->channel, command.c_str()) != SSH_OK) return fail("exec request refused");
  auto process = std::unique_ptr<SshChannelProcess>(new SshChannelProcess(std::move(state)));
  DSLAUNCH_RETURN_IF_ERROR(process->WriteStdin(stdin_data, close_stdin));
  return process;
}

Status SshChannelProcess::WriteStdin(std::string_view data, bool close) {
  State& s = *state_;
  if (s.stdin_closed) {
    return FailedPreconditionError("ssh to " + s.host + ": the command's stdin is closed already");
  }
  while (!data.empty()) {
    // Bounded chunks: ssh_channel_write blocks for window space, and the channel's window is 1 MiB
    // or more on common servers.
    int n = ssh_channel_write(s.channel, data.data(), static_cast<uint32_t>(std::min<size_t>(data.size(), 1u << 16)));
    if (n < 0) {
      return UnavailableError("ssh to " + s.host + ": cannot write the command's stdin: " + ssh_get_error(s.session));
    }
    data.remove_prefix(static_cast<size_t>(n));
  }
  if (close) {
    if (ssh_channel_send_eof(s.channel) != SSH_OK) {
      return UnavailableError("ssh to " + s.host + ": cannot close the command's stdin: " + ssh_get_error(s.session));
    }
    s.stdin_closed = true;
  }
  return Status::Ok();
}

void SshChannelProcess::Kill() {
  if (!state_->kill_requested.exchange(true)) state_->Wake();
}

void SshChannelProcess::Wake() { state_->Wake(); }

void SshChannelProcess::Detach() {
  if (!state_->detach_requested.exchange(true)) state_->Wake();
}

void SshChannelProcess::RunKillCommand() {
  // Fire and forget on a second channel: sshd runs the command even after the channel is closed,
  // and its outcome shows in how the first channel ends.
  kill_command_sent_ = true;
  // The session is being torn down with its command: its blocking timeout need not be restored.
  const long seconds = static_cast<long>(kKillCommandTimeout.count() / 1000);
  const long micros = static_cast<long>((kKillCommandTimeout.count() % 1000) * 1000);
  ssh_options_set(state_->session, SSH_OPTIONS_TIMEOUT, &seconds);
  ssh_options_set(state_->session, SSH_OPTIONS_TIMEOUT_USEC, &micros);
  ssh_channel channel = ssh_channel_new(state_->session);
  if (channel == nullptr) return;
  if (OpenChannel(state_->session, channel, state_->host, kKillCommandTimeout).ok() &&
      ssh_channel_request_exec(channel, kill_command_.c_str()) == SSH_OK) {
    ssh_channel_send_eof(channel);
    ssh_channel_close(channel);
  }
  ssh_channel_free(channel);
}

Result<bool> SshChannelProcess::PumpUntil(const OutputFn& on_output, const std::function<bool()>& ready,
                                          Clock::time_point deadline) {
  if (final_) return false;
  std::optional<Result<RemoteExit>> outcome = Loop(on_output, ready, deadline);
  if (!outcome) return true;
  if (!outcome->ok()) return outcome->status();
  return false;
}

Result<RemoteExit> SshChannelProcess::Pump(const OutputFn& on_output, std::optional<Clock::time_point> deadline) {
  if (final_) return *final_;
  return *Loop(on_output, nullptr, deadline);
}

std::optional<Result<RemoteExit>> SshChannelProcess::Loop(const OutputFn& on_output,
                                                          const std::function<bool()>& ready,
                                                          std::optional<Clock::time_point> deadline) {
  State& s = *state_;
  ssh_event event = ssh_event_new();
  if (event == nullptr) return Result<RemoteExit>(InternalError("ssh to " + s.host + ": cannot create an event loop"));
  ssh_event_add_session(event, s.session);
  ssh_event_add_fd(event, s.wake.get(), POLLIN, &State::OnWake, &s);

  auto flush = [&] {
    for (int i = 0; i < 2; ++i) {
      if (s.pending[i].empty()) continue;
      std::string chunk = std::move(s.pending[i]);
      s.pending[i].clear();
      if (on_output) on_output(i == 0 ? OutputStream::kStdout : OutputStream::kStderr, chunk);
    }
  };
  const std::string killed = "killed (KILL signal sent over ssh to " + s.host + ")";
  std::optional<Result<RemoteExit>> outcome;
  bool became_ready = false;
  while (!outcome && !became_ready) {
    flush();
    Clock::time_point now = Clock::now();
    if (s.detach_requested) {
      outcome = RemoteExit{std::nullopt, "detached"};
    } else if (s.closed || ssh_channel_is_closed(s.channel)) {
      RemoteExit exit{std::nullopt, "ssh channel to " + s.host + " closed"};
      if (s.exit_code) {
        exit.status = ExitStatus::Exited(*s.exit_code);
      } else if (s.exit_signal) {
        std::optional<int> number = SignalFromSshName(*s.exit_signal);
        if (number) exit.status = ExitStatus::Signaled(*number);
        else exit.detail += " (exit signal '" + *s.exit_signal + "')";
      }
      if (s.kill_give_up) exit.detail = killed + "; " + exit.detail;
      outcome = std::move(exit);
    } else if (!s.SessionAlive()) {
      outcome = RemoteExit{std::nullopt, "ssh connection to " + s.host + " lost: " + ssh_get_error(s.session)};
    } else if (s.kill_give_up && now >= *s.kill_give_up) {
      ssh_channel_close(s.channel);
      outcome = RemoteExit{std::nullopt, killed + "; the server did not report the end, channel closed"};
    } else if (deadline && now >= *deadline) {
      ssh_channel_request_send_signal(s.channel, "KILL");
      outcome = Result<RemoteExit>(
          DeadlineExceededError("ssh to " + s.host + ": the remote command did not finish in time"));
    } else if (ready && ready()) {
      became_ready = true;
    } else if (s.kill_requested && !s.kill_give_up) {
      // Errors are ignored: a channel that is closing anyway ends the loop on its own.
      ssh_channel_request_send_signal(s.channel, "KILL");
      s.kill_give_up = now + kKillCloseWait;
    } else if (s.kill_requested && !kill_command_.empty() && !kill_command_sent_) {
      RunKillCommand();
    } else {
      Clock::time_point until = now + kPumpPollSlice;
      if (s.kill_give_up) until = std::min(until, *s.kill_give_up);
      if (deadline) until = std::min(until, *deadline);
      auto wait = std::chrono::ceil<std::chrono::milliseconds>(until - now);
      int rc = ssh_event_dopoll(event, static_cast<int>(std::max<int64_t>(wait.count(), 0)));
      if (rc == SSH_ERROR && errno != EINTR && !s.SessionAlive()) {
        outcome = RemoteExit{std::nullopt, "ssh connection to " + s.host + " lost: " + ssh_get_error(s.session)};
      } else {
        AckNow(ssh_get_fd(s.session));
      }
    }
  }
  flush();
  ssh_event_remove_fd(event, s.wake.get());
  ssh_event_remove_session(event, s.session);
  ssh_event_free(event);
  if (outcome && outcome->ok()) final_ = outcome->value();
  return outcome;
}

}  // namespace dslaunch::launcher
