// Hostfile: the pool of machines a job may run on, one `HOST slots=N` line per machine (the
// DeepSpeed / MPI format). The grammar is specified in docs/hostfile.md.
//
//   # comment
//   worker-0 slots=8
//   alice@10.0.0.7 slots=4 max_slots=8   # user@host, trailing comment
//   [fe80::1] slots=2                    # IPv6, bracketed or bare
//
// ParseHostfile is pure; ReadHostfile is the only function here that touches the file system.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace dslaunch::launcher {

// The most slots (workers) one host may have, from a hostfile line or --nproc_per_node: above
// the accelerators of any node (8-16 GPUs) and the hardware threads of the largest two-socket CPU
// nodes (2 x 192 cores x 2 = 768), so a larger value is a typo; it also bounds the per-node parts
// of a plan (a node's CUDA_VISIBLE_DEVICES, its assignment message).
inline constexpr int kMaxSlotsPerHost = 1024;

// A hostfile larger than this is almost certainly the wrong file (a log, a binary); refusing it
// gives a clear error instead of thousands of "malformed line" messages.
inline constexpr std::size_t kMaxHostfileBytes = 16 * 1024 * 1024;

struct HostEntry {
  std::string user;  // from `user@host`; empty: the current user
  std::string host;  // hostname, IPv4 or IPv6 address; IPv6 is stored without brackets
  int slots = 0;     // >= 1; slot ids are 0..slots-1
  std::optional<int> max_slots;  // >= slots when present; caps --num_gpus on this host
  int line = 0;      // 1-based line in the hostfile (0 for a synthesized entry)
};

struct Hostfile {
  std::string path;  // as given by the user, used in messages; empty for LocalHostfile()
  std::vector<HostEntry> hosts;  // in file order, never empty when returned by the parsers
};

// Parses hostfile text. `path` is used only to prefix error messages.
// Returns the hosts in file order, or kInvalidArgument with a message "path:line: what is wrong"
// for: a malformed line, a missing / non-integer / zero / negative / too large `slots`, a bad
// `max_slots`, an unknown or repeated key, trailing junk, an invalid user or host name, a duplicate
// host ("hosts:7: duplicate host 'a' (first at line 2)"); or "path: no hosts ..." when the text
// holds only comments and blank lines. Host names are compared case-insensitively and without the
// user part, so `a`, `A` and `bob@a` are duplicates of each other.
Result<Hostfile> ParseHostfile(std::string_view text, std::string_view path);

// Reads and parses the file at `path`. A missing file is kNotFound ("hostfile 'p' does not exist")
// so that the caller reports it instead of silently running locally; an unreadable file (directory,
// permissions, too large) is kInvalidArgument; parse errors are as for ParseHostfile.
Result<Hostfile> ReadHostfile(const std::string& path);

// The pool for a job without a hostfile: one host "localhost" with `slots` slots (slot ids
// 0..slots-1) and no max_slots. Precondition: slots >= 1 (the CLI validates the user's number).
Hostfile LocalHostfile(int slots);

// True when two host names from a hostfile or a filter denote the same host entry: equal ignoring
// ASCII case (DNS names are case-insensitive). No resolution: "localhost" and "127.0.0.1" differ.
bool SameHost(std::string_view a, std::string_view b);

// True when `host` names the machine the launcher runs on by convention ("localhost", any case).
// No name resolution: "127.0.0.1" and the machine's own hostname are not recognized here.
bool IsLocalhostName(std::string_view host);

}  // namespace dslaunch::launcher
