#include "agent/control/registration.h"

#include <string>
#include <variant>

#include "common/endpoint/endpoint_client.h"
#include "common/wire.h"

namespace dslaunch::agent {

Result<control::Assignment> Register(int fd, const control::Register& reg,
                                     std::chrono::steady_clock::duration timeout, std::optional<int>& released,
                                     std::string* received) {
  wire::Frame f = control::Encode(reg);
  DSLAUNCH_RETURN_IF_ERROR(SendFrame(fd, f.type, f.payload));
  wire::FrameDecoder decoder;
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  wire::Frame reply;
  control::Message msg;
  do {  // a node that rejoins a running job may hear heartbeats before its assignment
    DSLAUNCH_ASSIGN_OR_RETURN(reply, ReceiveFrame(fd, decoder, deadline));
    DSLAUNCH_ASSIGN_OR_RETURN(msg, control::Decode(reply));
  } while (std::holds_alternative<control::Heartbeat>(msg));
  if (auto* stop = std::get_if<control::Stop>(&msg)) {
    return AbortedError("the launcher refused this agent: " + stop->reason);
  }
  if (auto* release = std::get_if<control::Release>(&msg)) {
    if (release->exit_code >= 0) released = release->exit_code;
    const std::string code = "(exit code " + std::to_string(release->exit_code) + ")";
    if (!release->reason.empty()) return UnavailableError("the launcher did not let this node in: " + release->reason + " " + code);
    return UnavailableError("the launcher ended the job before it started " + code);
  }
  auto* assignment = std::get_if<control::Assignment>(&msg);
  if (assignment == nullptr) {
    return InvalidArgumentError("expected an assignment, got message type " + std::to_string(reply.type));
  }
  if (received != nullptr) *received = decoder.TakeBuffered();
  return std::move(*assignment);
}

}  // namespace dslaunch::agent
