// AgentLink: the launcher's end of one agent's control connection, for the whole job (one per
// authenticated agent connection, created by the endpoint's session factory). It splits the
// connection's frames: the node's store proxy traffic (PROXIED, docs/protocol.md "Store proxy")
// goes to the link's AgentProxySession and never further; control messages go to the link's
// owner (LinkEvents: the agent fleet, agent_fleet.h). Every control message sent or received is
// shown to the proxy session, which binds the store proxy to the generation of the last
// ASSIGNMENT.
//
// Threading: the endpoint's io_context thread. Lifetime: the endpoint owns the link; it is
// destroyed soon after OnClose, possibly after its owner (at shutdown), so the owner forgets
// the link in OnClosed.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "common/control_messages.h"
#include "common/endpoint/endpoint.h"
#include "common/status.h"
#include "launcher/job/agent_proxy_session.h"

namespace dslaunch::launcher {

class AgentLink;

// What a link tells its owner.
class LinkEvents {
 public:
  virtual ~LinkEvents() = default;
  // The agent's first message, a REGISTER. A non-OK status closes the connection.
  virtual Status OnRegister(AgentLink& link, const control::Register& reg) = 0;
  // Any later control message of a link seated in a candidate's place (link.node() >= 0).
  virtual void OnMessage(AgentLink& link, const control::Message& msg) = 0;
  // The connection is gone (OnClose of the endpoint's SessionHandler).
  virtual void OnClosed(AgentLink& link, const Status& why) = 0;
};

class AgentLink final : public SessionHandler {
 public:
  // `store` runs the node's proxied store requests (null: none may arrive before an ASSIGNMENT,
  // which opens a proxy session on it; tests of the join phase send none).
  AgentLink(LinkEvents& owner, std::shared_ptr<EndpointConnection> conn, std::shared_ptr<StoreService> store,
            std::string job_id);

  Status OnFrame(wire::Frame frame) override;
  void OnClose(const Status& why) override;

  // Sends a control message (queued; never blocks) and shows it to the store proxy session.
  void Send(const control::Message& m);
  // Flushes what was sent, then closes; OnClosed follows.
  void Close();
  // The agent's store proxy no longer runs as the last assigned generation (the job began
  // another one): its parked requests are cancelled.
  void EndStoreProxy() { proxy_.End(); }

  const std::string& peer() const;
  // The candidate whose place the link holds, once seated; -1 before.
  int node() const { return node_; }
  void set_node(int candidate) { node_ = candidate; }
  // Node mode: the arrival id of a node that joined, until the membership is complete; -1 else.
  int arrival() const { return arrival_; }
  void set_arrival(int arrival) { arrival_ = arrival; }
  // From its REGISTER: the agent's pid, its node's hostname and its snapshot address.
  int64_t agent_pid() const { return agent_pid_; }
  const std::string& agent_host() const { return agent_host_; }
  const std::string& snapshot_address() const { return snapshot_address_; }
  void set_agent(int64_t pid, std::string host, std::string snapshot_address = {}) {
    agent_pid_ = pid;
    agent_host_ = std::move(host);
    snapshot_address_ = std::move(snapshot_address);
  }

 private:
  LinkEvents& owner_;
  std::shared_ptr<EndpointConnection> conn_;
  AgentProxySession proxy_;  // the node's store proxy, on this connection
  int node_ = -1;
  int arrival_ = -1;
  int64_t agent_pid_ = 0;
  std::string agent_host_;
  std::string snapshot_address_;
};

}  // namespace dslaunch::launcher
