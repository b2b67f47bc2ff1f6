// Host key policy for SSH connections: what to do with the key a node presents, and the message
// that tells the user why a key was refused and how to accept it (docs/ssh.md, "Host keys").
// Pure: SshConnection supplies what libssh found and acts on the decision.
#pragma once

#include <string>

namespace dslaunch::launcher {

// How a server's host key compares with the known_hosts file.
enum class HostKeyState {
  kKnown,      // an entry for the host matches the key
  kUnknown,    // no entry for the host (or no known_hosts file at all)
  kChanged,    // an entry of the same key type holds another key
  kOtherType,  // the host has entries, but none of the presented key's type
};

enum class HostKeyAction {
  kAccept,        // proceed
  kAddAndAccept,  // append the key to known_hosts, then proceed
  kRefuse,        // fail closed
};

// kKnown: accept. kUnknown: add when accept_new (StrictHostKeyChecking=accept-new), else refuse.
// kChanged and kOtherType: always refuse (a changed key may be an attack; accept-new never
// replaces a key).
HostKeyAction DecideHostKey(HostKeyState state, bool accept_new);

struct PresentedHostKey {
  std::string host;              // as dialled
  int port = 22;
  std::string key_type;          // "ssh-ed25519", "ecdsa-sha2-nistp256", "ssh-rsa", ...
  std::string fingerprint;       // "SHA256:<base64>", as `ssh-keygen -l` prints it
  std::string known_hosts_path;  // the file that was consulted
};

// The message for a refused key (state kUnknown, kChanged or kOtherType), starting with
// "host key for HOST ..." and ending with how to accept a key the user has checked:
//   kUnknown:  "host key for 10.0.0.3 is not in known_hosts (/home/u/.ssh/known_hosts): it offers
//               ssh-ed25519 SHA256:...; if that is the host's key, accept it once with
//               `ssh-keyscan -t ed25519 10.0.0.3 >> /home/u/.ssh/known_hosts` or `ssh 10.0.0.3`,
//               or run with --ssh_accept_new_host_keys"
//   kChanged / kOtherType: "host key for 10.0.0.3 has CHANGED ...: it now offers ...; this can be
//               an attack (or a reinstalled host); if the new key is right, remove the old one
//               with `ssh-keygen -R 10.0.0.3 -f FILE` and accept the new one
//               (--ssh_accept_new_host_keys never replaces a changed key)"
std::string HostKeyRefusalMessage(const PresentedHostKey& key, HostKeyState state);

// The host as known_hosts writes it: "host" on port 22, "[host]:port" otherwise.
std::string KnownHostsName(const std::string& host, int port);

}  // namespace dslaunch::launcher
