#include "launcher/job/agent_proxy_session.h"

#include "common/endpoint/endpoint.h"
#include "common/message_types.h"
#include "common/store/proxy_protocol.h"
#include "common/store/store_service.h"
#include "common/store/store_session.h"

namespace dslaunch::launcher {

AgentProxySession::AgentProxySession(std::shared_ptr<StoreService> store,
                                     std::shared_ptr<EndpointConnection> conn, std::string job_id)
    : store_(std::move(store)), conn_(std::move(conn)), job_id_(std::move(job_id)) {}

AgentProxySession::~AgentProxySession() = default;

void AgentProxySession::OnSent(const control::Message& m) {
  const auto* assignment = std::get_if<control::Assignment>(&m);
  if (assignment == nullptr) return;
  session_.reset();  // an earlier generation's waiters go first
  if (store_ != nullptr) session_ = store_->OpenProxySession(conn_, assignment->generation);
}

void AgentProxySession::OnReceived(const control::Message& m) {
  int generation = -1;
  if (const auto* done = std::get_if<control::AgentDone>(&m)) generation = done->generation;
  if (const auto* failed = std::get_if<control::AgentFailed>(&m)) generation = failed->generation;
  if (session_ != nullptr && generation == session_->generation()) End();
}

void AgentProxySession::End() {
  if (session_ == nullptr) return;
  closed_reason_ = "generation " + std::to_string(session_->generation()) + " of job '" + job_id_ + "' is over";
  session_.reset();
}

Status AgentProxySession::OnProxied(std::string_view payload) {
  if (session_ != nullptr) return session_->OnProxied(payload);
  DSLAUNCH_ASSIGN_OR_RETURN(ProxiedRequest p, DecodeProxiedRequest(payload));
  conn_->Send(msg::kStoreProxiedReply,
              EncodeProxiedReply(p.tag, msg::kStoreError, EncodeStoreError(AbortedError(closed_reason_))));
  return Status::Ok();
}

int AgentProxySession::generation() const { return session_ != nullptr ? session_->generation() : -1; }

}  // namespace dslaunch::launcher
