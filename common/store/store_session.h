// The two kinds of store session the launcher's StoreService serves (docs/protocol.md):
//
//  - a store client's connection (PeerRole::kStoreClient): plain store requests, answered in
//    request order; requests that arrive while a GET or WAIT is parked wait behind it (at most
//    kMaxQueuedStoreRequests);
//  - an agent's store proxy, carried on the agent's control connection (PeerRole::kAgent):
//    PROXIED requests, each with a tag, answered with PROXIED_REPLY in any order; a parked GET or
//    WAIT does not hold up the requests behind it (at most kMaxProxiedRequestsInFlight
//    outstanding). The launcher opens one per agent and generation (StoreService::
//    OpenProxySession) and routes the agent's PROXIED frames to it.
//
// Both execute through StoreService::Execute/Resume/Park. Threading: the io_context thread.
#pragma once

#include <cstddef>
#include <memory>
#include <string_view>

#include "common/endpoint/endpoint.h"

namespace dslaunch {

class StoreService;

// Outstanding PROXIED requests per proxy session before the agent's connection is closed: a
// node's proxy has at most one request per local connection in flight (plus re-sent deadline
// checks), far below this; only a broken proxy comes near it.
inline constexpr size_t kMaxProxiedRequestsInFlight = 65536;

// The launcher's side of one agent's store proxy for one generation.
class ProxySession {
 public:
  // Cancels the session's parked GETs and WAITs; they are not answered (the agent has failed
  // them itself, or its connection is gone).
  virtual ~ProxySession() = default;
  // One PROXIED payload: executed as of the session's generation (keys outside "gen/<g>/" are
  // answered kInvalidArgument), answered with one PROXIED_REPLY on the connection now or, for a
  // parked GET or WAIT, later. kInvalidArgument for a payload that does not decode or a tag
  // still outstanding, kFailedPrecondition past kMaxProxiedRequestsInFlight: the caller closes
  // the connection.
  virtual Status OnProxied(std::string_view payload) = 0;
  virtual int generation() const = 0;
};

std::unique_ptr<SessionHandler> NewStoreSession(std::shared_ptr<StoreService> service,
                                                std::shared_ptr<EndpointConnection> conn);
std::unique_ptr<ProxySession> NewProxySession(std::shared_ptr<StoreService> service,
                                              std::shared_ptr<EndpointConnection> conn, int generation);

}  // namespace dslaunch
