#include "launcher/job/agent_link.h"

#include "common/message_types.h"

namespace dslaunch::launcher {

AgentLink::AgentLink(LinkEvents& owner, std::shared_ptr<EndpointConnection> conn, std::shared_ptr<StoreService> store,
                     std::string job_id)
    : owner_(owner), conn_(conn), proxy_(std::move(store), std::move(conn), std::move(job_id)) {}

Status AgentLink::OnFrame(wire::Frame frame) {
  // The node's store proxy shares the connection (docs/protocol.md, "Store proxy").
  if (frame.type == msg::kStoreProxied) return proxy_.OnProxied(frame.payload);
  DSLAUNCH_ASSIGN_OR_RETURN(control::Message msg, control::Decode(frame));
  proxy_.OnReceived(msg);
  if (node_ < 0) {
    auto* reg = std::get_if<control::Register>(&msg);
    if (reg == nullptr) return InvalidArgumentError("agent " + conn_->peer() + ": first message must be register");
    return owner_.OnRegister(*this, *reg);
  }
  owner_.OnMessage(*this, msg);
  return Status::Ok();
}

void AgentLink::OnClose(const Status& why) {
  proxy_.End();
  owner_.OnClosed(*this, why);
}

void AgentLink::Send(const control::Message& m) {
  proxy_.OnSent(m);
  wire::Frame f = control::Encode(m);
  conn_->Send(f.type, std::move(f.payload));
}

void AgentLink::Close() { conn_->Close(); }

const std::string& AgentLink::peer() const { return conn_->peer(); }

}  // namespace dslaunch::launcher
