// The agent's registration with the launcher (docs/protocol.md, "Agent control messages", step
// 1): REGISTER on the freshly authenticated connection, then the wait for the ASSIGNMENT.
// Blocking, before the agent's event loop (agent/control/control_link.h) takes the connection.
#pragma once

#include <chrono>
#include <optional>

#include "common/control_messages.h"
#include "common/status.h"

namespace dslaunch::agent {

// Sends `reg` on `fd` and waits up to `timeout` (from then) for the assignment, skipping the
// HEARTBEATs that a node rejoining a running job may hear first. Errors: a STOP is kAborted ("the
// launcher refused this agent: REASON"); a RELEASE (node mode: the job ended, or the node's place
// is still held, while it waited to be let in) is kUnavailable, with the job's exit code in
// `released` when the launcher sent one (>= 0); another message is kInvalidArgument naming its
// type; and the errors of SendFrame, ReceiveFrame (kDeadlineExceeded at the timeout) and
// control::Decode. `received` gets the bytes read past the ASSIGNMENT (the launcher may send the
// next message at once), for the control link to read first (ControlLinkOptions::received).
Result<control::Assignment> Register(int fd, const control::Register& reg,
                                     std::chrono::steady_clock::duration timeout, std::optional<int>& released,
                                     std::string* received = nullptr);

}  // namespace dslaunch::agent
