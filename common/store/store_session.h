// The two kinds of store connection the launcher's StoreService serves (docs/protocol.md):
//
//  - a store client's (PeerRole::kStoreClient): plain store requests, answered in request order;
//    requests that arrive while a GET or WAIT is parked wait behind it (at most
//    kMaxQueuedStoreRequests);
//  - an agent's store proxy (PeerRole::kStoreProxy): PROXIED requests, each with a tag, answered
//    with PROXIED_REPLY in any order; a parked GET or WAIT does not hold up the requests behind
//    it (at most kMaxProxiedRequestsInFlight outstanding).
//
// Both execute through StoreService::Execute/Resume/Park. Threading: the io_context thread.
#pragma once

#include <cstddef>
#include <memory>

#include "common/endpoint/endpoint.h"

namespace dslaunch {

class StoreService;

// Outstanding PROXIED requests per proxy connection before it is closed: a node's proxy has at
// most one request per local connection in flight (plus re-sent deadline checks), far below this;
// only a broken proxy comes near it.
inline constexpr size_t kMaxProxiedRequestsInFlight = 65536;

std::unique_ptr<SessionHandler> NewStoreSession(std::shared_ptr<StoreService> service,
                                                std::shared_ptr<EndpointConnection> conn);
std::unique_ptr<SessionHandler> NewStoreProxySession(std::shared_ptr<StoreService> service,
                                                     std::shared_ptr<EndpointConnection> conn);

}  // namespace dslaunch
