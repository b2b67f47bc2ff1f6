// Test support: a scripted launcher for the real dslaunch-agent. A real endpoint on 127.0.0.1
// (tests/support/test_endpoint.h) that answers the agent's REGISTER with a given ASSIGNMENT,
// records every later message, and closes the agent's connection when the test says so (the
// launcher is lost while the workers run). Thread-safe.
#pragma once

#include <sys/types.h>

#include <memory>
#include <mutex>
#include <string>
#include <variant>
#include <vector>

#include "common/control_messages.h"
#include "tests/support/test_endpoint.h"

namespace dslaunch::testing {

class ScriptedLauncher {
 public:
  explicit ScriptedLauncher(control::Assignment assignment) : assignment_(std::move(assignment)) {
    endpoint_.OnIo([this] {
      endpoint_.endpoint().SetSessionFactory(PeerRole::kAgent, [this](std::shared_ptr<EndpointConnection> c) {
        return std::make_unique<Session>(*this, std::move(c));
      });
      return 0;
    });
  }

  std::string address() const { return endpoint_.address(); }

  // Every message after REGISTER, in arrival order.
  std::vector<control::Message> Received() {
    std::lock_guard lock(mu_);
    return received_;
  }
  // Closes the registered agent's connection, as a launcher that is gone would (nothing before its
  // REGISTER).
  void CloseAgentConnection() {
    endpoint_.OnIo([this] {
      if (agent_conn_) agent_conn_->Close();
      return 0;
    });
  }
  // The registered agent's pid (0 before its REGISTER).
  pid_t agent_pid() {
    std::lock_guard lock(mu_);
    return agent_pid_;
  }

 private:
  class Session : public SessionHandler {
   public:
    Session(ScriptedLauncher& launcher, std::shared_ptr<EndpointConnection> conn)
        : launcher_(launcher), conn_(std::move(conn)) {}
    Status OnFrame(wire::Frame frame) override {
      DSLAUNCH_ASSIGN_OR_RETURN(control::Message msg, control::Decode(frame));
      if (const auto* reg = std::get_if<control::Register>(&msg)) {
        {
          std::lock_guard lock(launcher_.mu_);
          launcher_.agent_pid_ = static_cast<pid_t>(reg->pid);
        }
        launcher_.agent_conn_ = conn_;  // on the endpoint's thread, as CloseAgentConnection
        wire::Frame f = control::Encode(launcher_.assignment_);
        conn_->Send(f.type, std::move(f.payload));
        return Status::Ok();
      }
      std::lock_guard lock(launcher_.mu_);
      launcher_.received_.push_back(std::move(msg));
      return Status::Ok();
    }
    void OnClose(const Status&) override {}

   private:
    ScriptedLauncher& launcher_;
    std::shared_ptr<EndpointConnection> conn_;
  };

  control::Assignment assignment_;
  std::shared_ptr<EndpointConnection> agent_conn_;  // the endpoint's thread only
  std::mutex mu_;
  std::vector<control::Message> received_;
  pid_t agent_pid_ = 0;
  TestEndpoint endpoint_;  // last: stopped before the rest goes
};

}  // namespace dslaunch::testing
