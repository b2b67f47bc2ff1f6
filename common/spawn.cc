#include "common/spawn.h"

#include <fcntl.h>
#include <poll.h>
#include <linux/mempolicy.h>
#include <linux/close_range.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstring>

#include "common/cpu_list.h"
#include "common/unique_fd.h"

extern char** environ;

namespace dslaunch {
namespace {

void WriteAll(int fd, const char* data, size_t size) {
  while (size > 0) {
    ssize_t n = ::write(fd, data, size);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;
    data += n;
    size -= static_cast<size_t>(n);
  }
}

void WriteString(int fd, const char* s) { WriteAll(fd, s, std::strlen(s)); }

// Marks every descriptor above stderr close-on-exec, so the child keeps only stdin, stdout and
// stderr whatever the parent or a library (Asio's sockets, libssh, Gloo) opened without
// O_CLOEXEC: a worker must never inherit the launcher's listening socket or another worker's pipe.
// close_range(2) does it in one call (Linux 5.11); older kernels get a loop of fcntl over the
// descriptor limit. Only system calls: this runs in the vfork child.
void CloseOnExecAboveStderr() {
  if (::syscall(SYS_close_range, 3u, ~0u, CLOSE_RANGE_CLOEXEC) == 0) return;
  struct rlimit lim {};
  // The hard limit: the soft one may just have been lowered for this child.
  long max_fd = ::getrlimit(RLIMIT_NOFILE, &lim) == 0 && lim.rlim_max != RLIM_INFINITY
                    ? static_cast<long>(lim.rlim_max)
                    : 65536;
  for (long fd = 3; fd < max_fd; ++fd) ::fcntl(static_cast<int>(fd), F_SETFD, FD_CLOEXEC);
}

// Everything the child needs, prepared before vfork: the child must not allocate.
struct ChildPlan {
  std::vector<char*> argv;
  std::vector<char*> envp;
  const SpawnOptions* options;
  pid_t parent;
  sigset_t parent_mask;
  std::optional<rlimit> open_files;  // SpawnOptions::soft_open_files_limit, with the hard limit
  // SpawnOptions::cpu_affinity as a kernel CPU mask (empty: inherit), and as text for a message.
  std::vector<unsigned long> cpu_mask;
  std::string cpu_text;
  // SpawnOptions::memory_node as a kernel node mask (empty: inherit).
  std::vector<unsigned long> node_mask;
};

constexpr size_t kMaskBits = 8 * sizeof(unsigned long);

// A kernel bitmap (cpumask, nodemask) with the bits of `ids` set. Precondition: ids >= 0.
std::vector<unsigned long> Bitmap(const std::vector<int>& ids) {
  std::vector<unsigned long> mask;
  for (int id : ids) {
    const size_t word = static_cast<size_t>(id) / kMaskBits;
    if (mask.size() <= word) mask.resize(word + 1, 0);
    mask[word] |= 1ul << (static_cast<size_t>(id) % kMaskBits);
  }
  return mask;
}

// The child's reason to stop before exec: "<prefix>WHAT: REASON\n" on its stderr.
void WriteChildError(const SpawnOptions& o, const char* what, const char* detail, int err) {
  WriteString(STDERR_FILENO, o.exec_error_prefix.c_str());
  WriteString(STDERR_FILENO, what);
  WriteString(STDERR_FILENO, detail);
  WriteString(STDERR_FILENO, ": ");
  WriteString(STDERR_FILENO, std::strerror(err));
  WriteString(STDERR_FILENO, "\n");
}

// Runs in the vfork child. Only system calls and writes of prepared strings; never returns.
[[noreturn]] void RunChild(const ChildPlan& plan) {
  const SpawnOptions& o = *plan.options;
  if (o.new_process_group) ::setpgid(0, 0);
  if (plan.open_files) ::setrlimit(RLIMIT_NOFILE, &*plan.open_files);
  if (o.kill_with_parent) {
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (::getppid() != plan.parent) _exit(127);  // the parent died before prctl took effect
  }
  // Default dispositions for every signal the parent may handle, then the parent's mask.
  struct sigaction dfl {};
  dfl.sa_handler = SIG_DFL;
  for (int sig = 1; sig < NSIG; ++sig) {
    if (sig != SIGKILL && sig != SIGSTOP) ::sigaction(sig, &dfl, nullptr);
  }
  sigset_t none;
  sigemptyset(&none);
  ::sigprocmask(SIG_SETMASK, &none, nullptr);

  int in = o.stdin_fd >= 0 ? o.stdin_fd : ::open("/dev/null", O_RDONLY);
  if (in >= 0 && in != STDIN_FILENO) ::dup2(in, STDIN_FILENO);
  if (o.stdout_fd >= 0) ::dup2(o.stdout_fd, STDOUT_FILENO);
  if (o.stderr_fd >= 0) ::dup2(o.stderr_fd, STDERR_FILENO);
  CloseOnExecAboveStderr();
  for (int fd : o.inherited_fds) ::fcntl(fd, F_SETFD, 0);  // kept across exec

  if (!plan.cpu_mask.empty() &&
      ::syscall(SYS_sched_setaffinity, 0, plan.cpu_mask.size() * sizeof(unsigned long), plan.cpu_mask.data()) != 0) {
    WriteChildError(o, "cannot bind to CPUs ", plan.cpu_text.c_str(), errno);
    _exit(127);
  }
  // maxnode counts bits; the kernel reads one fewer than given (set_mempolicy(2)).
  if (!plan.node_mask.empty() &&
      ::syscall(SYS_set_mempolicy, MPOL_BIND, plan.node_mask.data(), plan.node_mask.size() * kMaskBits + 1) != 0) {
    WriteChildError(o, "warning: memory not bound to the NUMA node of CPUs ", plan.cpu_text.c_str(), errno);
  }

  if (!o.working_dir.empty() && ::chdir(o.working_dir.c_str()) != 0) {
    const char* reason = std::strerror(errno);
    WriteString(STDERR_FILENO, o.exec_error_prefix.c_str());
    WriteString(STDERR_FILENO, "cannot enter working directory '");
    WriteString(STDERR_FILENO, o.working_dir.c_str());
    WriteString(STDERR_FILENO, "': ");
    WriteString(STDERR_FILENO, reason);
    WriteString(STDERR_FILENO, "\n");
    _exit(127);
  }
  ::execvpe(plan.argv[0], plan.argv.data(), plan.envp.data());
  const char* reason = std::strerror(errno);
  WriteString(STDERR_FILENO, o.exec_error_prefix.c_str());
  WriteString(STDERR_FILENO, "cannot execute '");
  WriteString(STDERR_FILENO, plan.argv[0]);
  WriteString(STDERR_FILENO, "': ");
  WriteString(STDERR_FILENO, reason);
  WriteString(STDERR_FILENO, "\n");
  _exit(127);
}

std::vector<char*> CStrings(const std::vector<std::string>& v) {
  std::vector<char*> out;
  out.reserve(v.size() + 1);
  for (const auto& s : v) out.push_back(const_cast<char*>(s.c_str()));
  out.push_back(nullptr);
  return out;
}

}  // namespace

Result<pid_t> SpawnProcess(const SpawnOptions& options) {
  if (options.argv.empty() || options.argv[0].empty()) return InvalidArgumentError("empty command line");
  ChildPlan plan;
  plan.argv = CStrings(options.argv);
  if (options.env) {
    plan.envp = CStrings(*options.env);
  } else {
    for (char** e = environ; *e != nullptr; ++e) plan.envp.push_back(*e);
    plan.envp.push_back(nullptr);
  }
  plan.options = &options;
  plan.parent = ::getpid();
  plan.cpu_mask = Bitmap(options.cpu_affinity);
  plan.cpu_text = FormatCpuList(options.cpu_affinity);
  if (options.memory_node) plan.node_mask = Bitmap({*options.memory_node});
  if (rlimit now{}; options.soft_open_files_limit && ::getrlimit(RLIMIT_NOFILE, &now) == 0) {
    now.rlim_cur = std::min<rlim_t>(*options.soft_open_files_limit, now.rlim_max);
    plan.open_files = now;
  }

  sigset_t all;
  sigfillset(&all);
  ::pthread_sigmask(SIG_SETMASK, &all, &plan.parent_mask);
  pid_t pid = ::vfork();
  if (pid == 0) RunChild(plan);
  int err = errno;
  ::pthread_sigmask(SIG_SETMASK, &plan.parent_mask, nullptr);
  if (pid < 0) return ErrnoError("vfork", err);
  // vfork resumed the parent only after the child exec'd (or exited): its process group exists.
  return pid;
}

Result<ProgramOutput> RunAndReadOutput(SpawnOptions options, std::chrono::milliseconds timeout, size_t max_bytes,
                                       bool with_stderr) {
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) return ErrnoError("pipe", errno);
  UniqueFd read_end(fds[0]), write_end(fds[1]);
  options.stdout_fd = write_end.get();
  if (with_stderr) options.stderr_fd = write_end.get();
  DSLAUNCH_ASSIGN_OR_RETURN(pid_t pid, SpawnProcess(options));
  write_end = UniqueFd();  // the child's copy is the only writer left: its exit ends the read
  ProgramOutput result;
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (true) {
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) {
      result.timed_out = true;
      break;
    }
    pollfd p{read_end.get(), POLLIN, 0};
    if (::poll(&p, 1, static_cast<int>(left.count())) < 0 && errno != EINTR) break;
    char buffer[4096];
    ssize_t n = ::read(read_end.get(), buffer, sizeof(buffer));
    if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
    if (n <= 0) break;
    if (result.output.size() < max_bytes) {
      result.output.append(buffer, std::min(static_cast<size_t>(n), max_bytes - result.output.size()));
    }
  }
  if (result.timed_out) ::kill(pid, SIGKILL);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (WIFEXITED(status)) result.exit_code = WEXITSTATUS(status);
  if (WIFSIGNALED(status)) result.signal = WTERMSIG(status);
  return result;
}

}  // namespace dslaunch
