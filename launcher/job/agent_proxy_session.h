// AgentProxySession: the launcher's end of one agent's store proxy (docs/protocol.md, "Store
// proxy"). The proxy's PROXIED frames travel on the agent's control connection; the job runner's
// session of that agent hands them here, together with every control message it sends to and
// receives from the agent, and this decides which generation they run as:
//
//  - the ASSIGNMENT of generation g the launcher sends the agent opens a ProxySession of g
//    (StoreService::OpenProxySession), replacing any earlier one;
//  - the agent's AGENT_DONE or AGENT_FAILED of g, the job beginning another generation (End) and
//    the connection closing (End) drop it: its parked GETs and WAITs are cancelled, not answered;
//  - a PROXIED with no session open is answered with a STORE_ERROR kAborted naming why: "no
//    assignment yet", or "generation g of job 'J' is over".
//
// Threading: the endpoint's io_context thread.
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include "common/control_messages.h"
#include "common/status.h"

namespace dslaunch {
class EndpointConnection;
class ProxySession;
class StoreService;
}  // namespace dslaunch

namespace dslaunch::launcher {

class AgentProxySession {
 public:
  // `store` null: no store to proxy to (the fleet's tests); proxied requests are answered as for
  // a generation that is over.
  AgentProxySession(std::shared_ptr<StoreService> store, std::shared_ptr<EndpointConnection> conn,
                    std::string job_id);
  ~AgentProxySession();
  AgentProxySession(const AgentProxySession&) = delete;
  AgentProxySession& operator=(const AgentProxySession&) = delete;

  // The launcher sent `m` to the agent: an ASSIGNMENT binds the proxy to its generation.
  void OnSent(const control::Message& m);
  // The agent sent `m`: its AGENT_DONE or AGENT_FAILED of the bound generation ends it.
  void OnReceived(const control::Message& m);
  // A PROXIED payload from the agent. A non-OK status (a payload that does not decode, a tag
  // still outstanding, too many outstanding) means the caller closes the connection.
  Status OnProxied(std::string_view payload);
  // The bound generation is over for this agent (the job began another one, or the connection
  // closed): parked requests are cancelled; later PROXIED frames are answered kAborted.
  void End();

  // The generation PROXIED frames run as now; -1 when none.
  int generation() const;

 private:
  std::shared_ptr<StoreService> store_;
  std::shared_ptr<EndpointConnection> conn_;
  std::string job_id_;
  std::unique_ptr<ProxySession> session_;
  std::string closed_reason_ = "no assignment yet";  // why PROXIED is refused while session_ is null
};

}  // namespace dslaunch::launcher
