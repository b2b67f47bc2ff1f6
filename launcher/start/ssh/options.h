// SshOptions: how the launcher reaches nodes over SSH (docs/ssh.md). Filled once at the edge
// (main.cc: flags, $HOME, $SSH_AUTH_SOCK, the local user name); library code reads only this struct.
#pragma once

#include <chrono>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "launcher/start/ssh/bounded_fan_out.h"
#include "launcher/start/ssh/start_tree.h"

namespace dslaunch::launcher {

// Default wait for the TCP connection and for each later step of the SSH handshake: a node that
// does not answer within 10 s is down or firewalled (OpenSSH's ConnectTimeout is commonly 10 s).
inline constexpr std::chrono::milliseconds kSshDefaultConnectTimeout{10000};

// SSH's usual port, --ssh_port's default.
inline constexpr int kSshDefaultPort = 22;

struct SshOptions {
  // --ssh_user: the login user for hosts whose hostfile line has no `user@`. Empty: local_user.
  std::string user;
  // The launcher's own user name (getpwuid at the edge). Empty: libssh's default, the same user.
  std::string local_user;
  int port = kSshDefaultPort;  // --ssh_port
  // --ssh_identity, repeatable: private key files tried in order, each must exist. Empty: the
  // default files home/.ssh/id_ed25519, id_ecdsa, id_rsa, those that exist.
  std::vector<std::string> identities;
  // --ssh_known_hosts. Empty: home/.ssh/known_hosts.
  std::string known_hosts;
  // --ssh_accept_new_host_keys: add the key of a host that has no entry in known_hosts (as
  // OpenSSH's StrictHostKeyChecking=accept-new). A changed key is refused regardless.
  bool accept_new_host_keys = false;
  // TCP connect timeout, also the limit of each later blocking SSH step (key exchange, auth).
  std::chrono::milliseconds connect_timeout = kSshDefaultConnectTimeout;
  // The user's home directory ($HOME at the edge); used only to find the defaults above.
  std::string home;
  // The ssh-agent socket ($SSH_AUTH_SOCK at the edge). Empty: ssh-agent is not tried.
  std::string agent_socket;
  // --ssh_fanout: at most this many SSH handshakes and pre-flight commands in flight at once.
  int fanout = kSshDefaultFanout;
  // --ssh_tree_threshold: past this many nodes, agents start the agents of their subtree
  // (start_tree.h); up to it the launcher starts every node itself.
  int tree_threshold = kSshDefaultTreeThreshold;
};

// The user to log in as on a host: the hostfile's `user@` when present (it names that host only),
// else options.user, else options.local_user (may be empty: libssh then uses the local user).
std::string SshLoginUser(const SshOptions& options, std::string_view hostfile_user);

// The known_hosts file to use, or kInvalidArgument when neither known_hosts nor home is set.
Result<std::string> KnownHostsPath(const SshOptions& options);

// A private key file to try, and whether the user named it (a named file that is missing is an
// error worth reporting; a missing default file is normal).
struct IdentityCandidate {
  std::string path;
  bool explicit_path = false;
};

// options.identities when given; else the default files under home/.ssh (none when home is empty).
std::vector<IdentityCandidate> IdentityCandidates(const SshOptions& options);

// OK, or kInvalidArgument naming the bad option: port outside 1..65535, connect_timeout <= 0,
// fanout < 1,
// no known_hosts file and no home to find the default one.
Status ValidateSshOptions(const SshOptions& options);

}  // namespace dslaunch::launcher
