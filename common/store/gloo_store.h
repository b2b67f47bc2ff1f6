// GlooStore: gloo::rendezvous::Store on top of the launcher's store, so that a worker builds its
// Gloo context through dslaunch's authenticated store:
//
//   auto client = StoreClient::Connect(config, deadline);
//   GlooStore store(**client, "gloo/world/");
//   auto context = std::make_shared<gloo::rendezvous::Context>(rank, size);
//   context->connectFullMesh(store, device);
//
// Gloo's contract: get() blocks until the key exists; failures are reported by throwing.
// Here every failure throws gloo::IoException whose message names the key, the store address and
// the cause ("store 127.0.0.1:29500 gen 0: get 'gloo/world/rank_0': deadline exceeded ...").
// Callers catch gloo::Exception at their edge and turn it into a Status.
//
// Gloo keys are write-once within a context: use a fresh `prefix` per context (the generation
// prefix of StoreClient already separates restarts). Thread-safe as StoreClient is. The client
// must outlive the GlooStore.
#pragma once

#include <chrono>
#include <string>
#include <vector>

#include <gloo/rendezvous/store.h>

#include "common/store/store_client.h"

namespace dslaunch {

class GlooStore : public gloo::rendezvous::Store {
 public:
  // `timeout` bounds get() and the one-argument wait(); Gloo's own default is 30 s.
  GlooStore(StoreClient& client, std::string prefix,
            std::chrono::milliseconds timeout = gloo::rendezvous::Store::kDefaultTimeout);

  void set(const std::string& key, const std::vector<char>& data) override;
  std::vector<char> get(const std::string& key) override;
  void wait(const std::vector<std::string>& keys) override;
  void wait(const std::vector<std::string>& keys,
            const std::chrono::milliseconds& timeout) override;

 private:
  StoreClient& client_;
  const std::string prefix_;
  const std::chrono::milliseconds timeout_;
};

}  // namespace dslaunch
