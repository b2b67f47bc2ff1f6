// FakeEndpointConnection: an authenticated agent connection (common/endpoint/endpoint.h) that
// keeps what is sent on it, decoded as control messages, and whether it was closed. For tests of
// the job runner's parts that hold AgentLinks (launcher/job/agent_link.h) without an endpoint.
#pragma once

#include <string>
#include <vector>

#include "common/control_messages.h"
#include "common/endpoint/endpoint.h"

namespace dslaunch::launcher {

class FakeEndpointConnection final : public EndpointConnection {
 public:
  explicit FakeEndpointConnection(std::string peer = "10.0.0.9:40000") : peer_(std::move(peer)) {}

  void Send(uint8_t type, std::string payload) override {
    auto m = control::Decode(wire::Frame{type, std::move(payload)});
    if (m.ok()) sent.push_back(std::move(*m));
    else undecodable++;
  }
  void Close() override { closed = true; }
  const std::string& peer() const override { return peer_; }
  PeerRole role() const override { return PeerRole::kAgent; }
  int generation() const override { return 0; }

  std::vector<control::Message> sent;
  int undecodable = 0;
  bool closed = false;

 private:
  std::string peer_;
};

}  // namespace dslaunch::launcher
