// The per-job secret: every connection to the launcher's endpoint proves it holds it
// (common/auth/handshake.h). The launcher generates it, writes it to a 0600 file, and hands the file's
// path (never the secret itself) to agents and workers.
//
// The secret must never appear on a command line, in an environment dump or in a log message: the
// functions here never put it into a Status message.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

#include "common/status.h"

namespace dslaunch {

// Bytes of randomness in a generated secret (hex-encoded to twice as many characters): 256 bits,
// the HMAC-SHA256 key size.
inline constexpr size_t kSecretRandomBytes = 32;

// A secret file larger than this is not one of ours: refuse to read it into memory.
inline constexpr size_t kMaxSecretFileBytes = 4096;

// `n` bytes from the kernel's CSPRNG (getrandom, falling back to /dev/urandom). Aborts through
// DSLAUNCH_CHECK only if the system has no randomness source at all (a broken host, not a
// run-time condition a caller could handle). Thread-safe.
std::string RandomBytes(size_t n);

// A fresh secret: kSecretRandomBytes random bytes as 64 lower-case hex characters. Thread-safe.
std::string GenerateSecret();

// Creates `path` exclusively (fails with the file's errno if it already exists; a symlink is not
// followed), mode 0600, writes `secret`, fsyncs the file and its directory. On failure a partly
// written file is removed. The message names the path, never the secret.
Status WriteSecretFile(const std::string& path, std::string_view secret);

// Reads a secret written by WriteSecretFile. Fails with kNotFound if the file does not exist,
// kFailedPrecondition if it is not a regular file, is accessible by "others" (mode & 0007), or is
// larger than kMaxSecretFileBytes, kInvalidArgument if it is empty. One trailing newline is
// dropped, so a file written by hand with `echo` works. Group access is allowed (Kubernetes
// secret volumes with fsGroup); see docs/protocol.md. Symbolic links are followed (a secret
// volume's files are links into its ..data/ directory); the checks apply to the file they reach.
Result<std::string> ReadSecretFile(const std::string& path);

}  // namespace dslaunch
