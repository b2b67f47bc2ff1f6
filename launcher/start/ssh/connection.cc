#include "launcher/start/ssh/connection.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <libssh/libssh.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <vector>

#include "common/unique_fd.h"
#include "launcher/start/ssh/host_key_policy.h"

namespace dslaunch::launcher {
namespace {

// Algorithm preferences. The handshake is CPU-bound on small machines, so the cheapest safe
// choices come first: X25519 key exchange, AES-GCM (AES-NI) or ChaCha20-Poly1305. The later
// entries keep older servers reachable. Host key types keep libssh's default order (Ed25519
// first, and types already in known_hosts preferred), so a recorded key is the one offered.
constexpr const char* kKeyExchange =
    "curve25519-sha256,curve25519-sha256@libssh.org,ecdh-sha2-nistp256,ecdh-sha2-nistp384,"
    "ecdh-sha2-nistp521,diffie-hellman-group16-sha512,diffie-hellman-group18-sha512,"
    "diffie-hellman-group14-sha256";
constexpr const char* kCiphers =
    "aes128-gcm@openssh.com,chacha20-poly1305@openssh.com,aes256-gcm@openssh.com,aes128-ctr,aes256-ctr";

struct SessionDeleter {
  void operator()(ssh_session s) const {
    if (ssh_is_connected(s)) ssh_disconnect(s);
    ssh_free(s);
  }
};
using SessionPtr = std::unique_ptr<ssh_session_struct, SessionDeleter>;

struct KeyDeleter {
  void operator()(ssh_key k) const { ssh_key_free(k); }
};
using KeyPtr = std::unique_ptr<ssh_key_struct, KeyDeleter>;

struct CharDeleter {
  void operator()(char* p) const { ssh_string_free_char(p); }
};
using SshCharPtr = std::unique_ptr<char, CharDeleter>;

Status SetOption(ssh_session s, ssh_options_e option, const void* value, const char* name) {
  if (ssh_options_set(s, option, value) != SSH_OK) {
    return InvalidArgumentError(std::string("ssh option ") + name + ": " + ssh_get_error(s));
  }
  return Status::Ok();
}

Status ApplyOptions(ssh_session s, const std::string& user, const std::string& host, const SshOptions& options,
                    const std::string& known_hosts) {
  const int process_config = 0;  // ~/.ssh/config is not read: every setting comes from SshOptions
  const int nodelay = 1;         // the handshake is ping-pong of small packets: no Nagle delay
  const unsigned int port = static_cast<unsigned int>(options.port);
  const auto ms = options.connect_timeout.count();
  const long timeout_s = static_cast<long>(ms / 1000);
  const long timeout_us = static_cast<long>((ms % 1000) * 1000);
  DSLAUNCH_RETURN_IF_ERROR(SetOption(s, SSH_OPTIONS_PROCESS_CONFIG, &process_config, "process config"));
  DSLAUNCH_RETURN_IF_ERROR(SetOption(s, SSH_OPTIONS_HOST, host.c_str(), "host"));
  DSLAUNCH_RETURN_IF_ERROR(SetOption(s, SSH_OPTIONS_PORT, &port, "port"));
  if (!user.empty()) DSLAUNCH_RETURN_IF_ERROR(SetOption(s, SSH_OPTIONS_USER, user.c_str(), "user"));
  DSLAUNCH_RETURN_IF_ERROR(SetOption(s, SSH_OPTIONS_KNOWNHOSTS, known_hosts.c_str(), "known_hosts"));
  DSLAUNCH_RETURN_IF_ERROR(SetOption(s, SSH_OPTIONS_TIMEOUT, &timeout_s, "timeout"));
  DSLAUNCH_RETURN_IF_ERROR(SetOption(s, SSH_OPTIONS_TIMEOUT_USEC, &timeout_us, "timeout"));
  DSLAUNCH_RETURN_IF_ERROR(SetOption(s, SSH_OPTIONS_NODELAY, &nodelay, "nodelay"));
  DSLAUNCH_RETURN_IF_ERROR(SetOption(s, SSH_OPTIONS_KEY_EXCHANGE, kKeyExchange, "key exchange"));
  DSLAUNCH_RETURN_IF_ERROR(SetOption(s, SSH_OPTIONS_CIPHERS_C_S, kCiphers, "ciphers"));
  DSLAUNCH_RETURN_IF_ERROR(SetOption(s, SSH_OPTIONS_CIPHERS_S_C, kCiphers, "ciphers"));
  if (!options.agent_socket.empty()) {
    DSLAUNCH_RETURN_IF_ERROR(SetOption(s, SSH_OPTIONS_IDENTITY_AGENT, options.agent_socket.c_str(), "agent"));
  }
  return Status::Ok();
}

// Appends libssh's known_hosts line for the session's host and key to `path` in one write
// (O_APPEND), creating the file (0600) and its directory (0700) when missing.
Status AppendKnownHost(ssh_session s, const std::string& path) {
  char* raw = nullptr;
  if (ssh_session_export_known_hosts_entry(s, &raw) != SSH_OK || raw == nullptr) {
    return InternalError(std::string("cannot format a known_hosts entry: ") + ssh_get_error(s));
  }
  SshCharPtr entry(raw);
  std::string line = entry.get();
  if (line.empty() || line.back() != '\n') line += '\n';
  std::string::size_type slash = path.rfind('/');
  if (slash != std::string::npos && slash > 0) ::mkdir(path.substr(0, slash).c_str(), 0700);
  UniqueFd fd(::open(path.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0600));
  if (!fd.valid()) return ErrnoError("cannot open known_hosts " + path, errno);
  struct stat st {};
  char last = '\n';
  if (::fstat(fd.get(), &st) == 0 && st.st_size > 0) {
    UniqueFd reader(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
    if (reader.valid() && ::pread(reader.get(), &last, 1, st.st_size - 1) != 1) last = '\n';
  }
  if (last != '\n') line.insert(line.begin(), '\n');  // the file's last line had no newline
  if (::write(fd.get(), line.data(), line.size()) != static_cast<ssize_t>(line.size())) {
    return ErrnoError("cannot write known_hosts " + path, errno);
  }
  return Status::Ok();
}

Status VerifyHostKey(ssh_session s, const std::string& host, const SshOptions& options,
                     const std::string& known_hosts) {
  ssh_key raw_key = nullptr;
  if (ssh_get_server_publickey(s, &raw_key) != SSH_OK) {
    return UnavailableError(std::string("no host key from the server: ") + ssh_get_error(s));
  }
  KeyPtr key(raw_key);
  unsigned char* hash = nullptr;
  size_t hash_len = 0;
  if (ssh_get_publickey_hash(key.get(), SSH_PUBLICKEY_HASH_SHA256, &hash, &hash_len) != SSH_OK) {
    return InternalError("cannot hash the host key");
  }
  SshCharPtr fingerprint(ssh_get_fingerprint_hash(SSH_PUBLICKEY_HASH_SHA256, hash, hash_len));
  ssh_clean_pubkey_hash(&hash);
  PresentedHostKey presented{host, options.port, ssh_key_type_to_char(ssh_key_type(key.get())),
                             fingerprint ? fingerprint.get() : "SHA256:?", known_hosts};
  HostKeyState state;
  switch (ssh_session_is_known_server(s)) {
    case SSH_KNOWN_HOSTS_OK: state = HostKeyState::kKnown; break;
    case SSH_KNOWN_HOSTS_CHANGED: state = HostKeyState::kChanged; break;
    case SSH_KNOWN_HOSTS_OTHER: state = HostKeyState::kOtherType; break;
    case SSH_KNOWN_HOSTS_UNKNOWN:
    case SSH_KNOWN_HOSTS_NOT_FOUND: state = HostKeyState::kUnknown; break;
    default:
      return InternalError("cannot check the host key against " + known_hosts + ": " + ssh_get_error(s));
  }
  switch (DecideHostKey(state, options.accept_new_host_keys)) {
    case HostKeyAction::kAccept: return Status::Ok();
    case HostKeyAction::kAddAndAccept: return AppendKnownHost(s, known_hosts);
    case HostKeyAction::kRefuse: break;
  }
  return FailedPreconditionError(HostKeyRefusalMessage(presented, state));
}

std::string AuthOutcome(int rc) {
  switch (rc) {
    case SSH_AUTH_DENIED: return "refused";
    case SSH_AUTH_PARTIAL: return "accepted, but the server wants a further method";
    default: return "error";
  }
}

// ssh-agent first (when a socket is given), then each key file. Returns OK once authenticated.
Status Authenticate(ssh_session s, const std::string& user, const SshOptions& options) {
  std::vector<std::string> tried;
  auto lost = [&] {
    return UnavailableError(std::string("connection lost during authentication: ") + ssh_get_error(s));
  };
  if (!options.agent_socket.empty()) {
    int rc = ssh_userauth_agent(s, nullptr);
    if (rc == SSH_AUTH_SUCCESS) return Status::Ok();
    if (!ssh_is_connected(s)) return lost();
    tried.push_back("ssh-agent at " + options.agent_socket + " (" +
                    (rc == SSH_AUTH_ERROR ? std::string(ssh_get_error(s)) : AuthOutcome(rc)) + ")");
  } else {
    tried.push_back("ssh-agent (SSH_AUTH_SOCK not set)");
  }
  std::vector<std::string> absent_defaults;
  for (const IdentityCandidate& candidate : IdentityCandidates(options)) {
    if (::access(candidate.path.c_str(), F_OK) != 0) {
      if (candidate.explicit_path) tried.push_back(candidate.path + " (does not exist)");
      else absent_defaults.push_back(candidate.path);
      continue;
    }
    ssh_key raw_key = nullptr;
    if (ssh_pki_import_privkey_file(candidate.path.c_str(), nullptr, nullptr, nullptr, &raw_key) != SSH_OK) {
      tried.push_back(candidate.path + " (cannot load it: unreadable, unsupported, or passphrase-protected; "
                                       "add such keys to ssh-agent)");
      continue;
    }
    KeyPtr key(raw_key);
    int rc = ssh_userauth_publickey(s, nullptr, key.get());
    if (rc == SSH_AUTH_SUCCESS) return Status::Ok();
    if (!ssh_is_connected(s)) return lost();
    tried.push_back(candidate.path + " (" + AuthOutcome(rc) + ")");
  }
  if (!absent_defaults.empty()) {
    std::string list;
    for (const std::string& p : absent_defaults) list += (list.empty() ? "" : ", ") + p;
    tried.push_back("no key at " + list);
  }
  if (options.identities.empty() && options.home.empty()) tried.push_back("no default keys (HOME not set)");
  std::string message = "authentication as '" + user + "' failed; tried: ";
  for (size_t i = 0; i < tried.size(); ++i) message += (i ? "; " : "") + tried[i];
  return FailedPreconditionError(message);
}

std::string LocalAddress(int fd) {
  sockaddr_storage addr{};
  socklen_t len = sizeof(addr);
  if (fd < 0 || ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) return "";
  char text[INET6_ADDRSTRLEN] = {};
  if (addr.ss_family == AF_INET) {
    ::inet_ntop(AF_INET, &reinterpret_cast<sockaddr_in*>(&addr)->sin_addr, text, sizeof(text));
  } else if (addr.ss_family == AF_INET6) {
    const in6_addr& a6 = reinterpret_cast<sockaddr_in6*>(&addr)->sin6_addr;
    if (IN6_IS_ADDR_V4MAPPED(&a6)) ::inet_ntop(AF_INET, &a6.s6_addr[12], text, sizeof(text));
    else ::inet_ntop(AF_INET6, &a6, text, sizeof(text));
  }
  return text;
}

}  // namespace

Result<std::unique_ptr<SshConnection>> SshConnection::Connect(const std::string& user, const std::string& host,
                                                              const SshOptions& options) {
  const std::string where = "ssh to " + host + ":" + std::to_string(options.port);
  DSLAUNCH_RETURN_IF_ERROR(ValidateSshOptions(options).WithContext(where));
  DSLAUNCH_ASSIGN_OR_RETURN(std::string known_hosts, KnownHostsPath(options));
  SessionPtr session(ssh_new());
  if (!session) return InternalError(where + ": cannot allocate an ssh session");
  std::string login = user.empty() ? options.local_user : user;
  DSLAUNCH_RETURN_IF_ERROR(ApplyOptions(session.get(), login, host, options, known_hosts).WithContext(where));
  if (ssh_connect(session.get()) != SSH_OK) {
    return UnavailableError(where + ": cannot connect (timeout " + std::to_string(options.connect_timeout.count()) +
                            " ms): " + ssh_get_error(session.get()));
  }
  DSLAUNCH_RETURN_IF_ERROR(VerifyHostKey(session.get(), host, options, known_hosts).WithContext(where));
  if (login.empty()) {
    char* raw = nullptr;
    if (ssh_options_get(session.get(), SSH_OPTIONS_USER, &raw) == SSH_OK && raw != nullptr) {
      login = SshCharPtr(raw).get();
    }
  }
  DSLAUNCH_RETURN_IF_ERROR(Authenticate(session.get(), login, options).WithContext(where));
  auto connection = std::unique_ptr<SshConnection>(new SshConnection());
  connection->host_ = host;
  connection->user_ = login;
  connection->local_address_ = LocalAddress(ssh_get_fd(session.get()));
  connection->step_timeout_ = options.connect_timeout;
  connection->session_ = session.release();
  return connection;
}

SshConnection::~SshConnection() {
  if (session_ != nullptr) SessionDeleter()(session_);
}

Result<std::unique_ptr<SshChannelProcess>> SshConnection::Start(const std::string& command,
                                                                std::string_view stdin_data, bool close_stdin) {
  return SshChannelProcess::Open(session_, host_, command, stdin_data, close_stdin, step_timeout_);
}

Result<CommandResult> SshConnection::Run(const std::string& command, std::chrono::steady_clock::time_point deadline) {
  DSLAUNCH_ASSIGN_OR_RETURN(std::unique_ptr<SshChannelProcess> process, Start(command, ""));
  CommandResult result;
  bool truncated = false;
  auto keep = [&](std::string& into, std::string_view bytes) {
    size_t room = kMaxCommandOutputBytes - std::min(kMaxCommandOutputBytes, into.size());
    if (bytes.size() > room) truncated = true;
    into.append(bytes.substr(0, room));
  };
  DSLAUNCH_ASSIGN_OR_RETURN(RemoteExit exit, process->Pump([&](OutputStream stream, std::string_view bytes) {
    keep(stream == OutputStream::kStdout ? result.out : result.err, bytes);
  }, deadline));
  if (!exit.status) return UnavailableError(exit.detail + " without an exit status");
  result.exit = *exit.status;
  if (truncated) result.err += "\n[output truncated]";
  return result;
}

}  // namespace dslaunch::launcher
