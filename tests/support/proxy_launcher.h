// Test support: a real launcher endpoint (TestEndpoint) whose agent connections (role 2) carry the
// store proxy as the job runner's do (launcher/job/agent_link.cc, AgentLink): PROXIED frames go to
// an AgentProxySession, every other frame is decoded as a control message and shown to it, and
// the test sends ASSIGNMENTs through Assign. Includes Asio: use it only in proc tests.
#pragma once

#include <memory>

#include "common/control_messages.h"
#include "common/message_types.h"
#include "launcher/job/agent_proxy_session.h"
#include "tests/support/test_endpoint.h"

namespace dslaunch::testing {

class ProxyLauncher {
 public:
  ProxyLauncher() {
    ep_.OnIo([&] {
      ep_.endpoint().SetSessionFactory(PeerRole::kAgent, [this](std::shared_ptr<EndpointConnection> conn) {
        auto s = std::make_unique<Session>(*this, std::move(conn));
        session_ = s.get();
        return s;
      });
      return 0;
    });
  }

  TestEndpoint& ep() { return ep_; }
  // Sends the last agent that connected an ASSIGNMENT of `generation`, as the job runner does.
  void Assign(int generation) {
    const bool sent = ep_.OnIo([&] {
      if (session_ == nullptr) return false;
      control::Assignment a;
      a.generation = generation;
      a.store_proxy = true;
      session_->Send(a);
      return true;
    });
    REQUIRE(sent);
  }
  // The job begins another generation (job runner: StartGeneration).
  void EndProxy() {
    ep_.OnIo([&] {
      if (session_ != nullptr) session_->proxy.End();
      return 0;
    });
  }
  // Parked GETs and WAITs at the launcher.
  size_t waiters() { return ep_.OnIo([&] { return ep_.store().store().num_waiters(); }); }

 private:
  class Session : public SessionHandler {
   public:
    Session(ProxyLauncher& owner, std::shared_ptr<EndpointConnection> conn)
        : proxy(owner.ep_.shared_store(), conn, kTestJobId), owner_(owner), conn_(std::move(conn)) {}
    Status OnFrame(wire::Frame frame) override {
      if (frame.type == msg::kStoreProxied) return proxy.OnProxied(frame.payload);
      DSLAUNCH_ASSIGN_OR_RETURN(control::Message m, control::Decode(frame));
      proxy.OnReceived(m);
      return Status::Ok();
    }
    void OnClose(const Status&) override {
      proxy.End();
      if (owner_.session_ == this) owner_.session_ = nullptr;
    }
    void Send(const control::Message& m) {
      proxy.OnSent(m);
      wire::Frame f = control::Encode(m);
      conn_->Send(f.type, std::move(f.payload));
    }
    launcher::AgentProxySession proxy;

   private:
    ProxyLauncher& owner_;
    std::shared_ptr<EndpointConnection> conn_;
  };

  TestEndpoint ep_;
  Session* session_ = nullptr;  // io_context thread
};

}  // namespace dslaunch::testing
