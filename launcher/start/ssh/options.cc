#include "launcher/start/ssh/options.h"

namespace dslaunch::launcher {

std::string SshLoginUser(const SshOptions& options, std::string_view hostfile_user) {
  if (!hostfile_user.empty()) return std::string(hostfile_user);
  if (!options.user.empty()) return options.user;
  return options.local_user;
}

Result<std::string> KnownHostsPath(const SshOptions& options) {
  if (!options.known_hosts.empty()) return options.known_hosts;
  if (options.home.empty()) {
    return InvalidArgumentError("no known_hosts file: HOME is not set; pass --ssh_known_hosts");
  }
  return options.home + "/.ssh/known_hosts";
}

std::vector<IdentityCandidate> IdentityCandidates(const SshOptions& options) {
  std::vector<IdentityCandidate> candidates;
  if (!options.identities.empty()) {
    for (const std::string& path : options.identities) candidates.push_back({path, true});
    return candidates;
  }
  if (options.home.empty()) return candidates;
  // OpenSSH's default order, without DSA (OpenSSH 9 disables it, libssh 0.10 dropped it).
  for (const char* name : {"id_ed25519", "id_ecdsa", "id_rsa"}) {
    candidates.push_back({options.home + "/.ssh/" + name, false});
  }
  return candidates;
}

Status ValidateSshOptions(const SshOptions& options) {
  if (options.port < 1 || options.port > 65535) {
    return InvalidArgumentError("--ssh_port must be 1..65535, got " + std::to_string(options.port));
  }
  if (options.connect_timeout <= std::chrono::milliseconds::zero()) {
    return InvalidArgumentError("the SSH connect timeout must be positive");
  }
  if (options.fanout < 1) {
    return InvalidArgumentError("--ssh_fanout must be at least 1, got " + std::to_string(options.fanout));
  }
  return KnownHostsPath(options).status();
}

}  // namespace dslaunch::launcher
