// Test support: a real launcher endpoint with the store attached, on 127.0.0.1 and an ephemeral
// port, served by its own io_context thread. Includes Asio: use it only in proc tests.
#pragma once

#include <doctest/doctest.h>

#include <chrono>
#include <future>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "common/asio.h"
#include "common/endpoint/endpoint.h"
#include "common/store/store_client.h"
#include "common/store/store_service.h"

namespace dslaunch::testing {

inline constexpr char kTestJobId[] = "test-job";
inline constexpr char kTestSecret[] =
    "5e3c9a0d1b7f42e6a8c4d2f0b1e3a5c7d9f1b3a5c7e9f1d3b5a7c9e1f3a5b7c9";
// How long a test waits for the io_context thread to finish after Stop() before forcing it.
inline constexpr std::chrono::seconds kStopGrace{5};

class TestEndpoint {
 public:
  explicit TestEndpoint(EndpointOptions options = {}) {
    if (options.job_id.empty()) options.job_id = kTestJobId;
    if (options.secret.empty()) options.secret = kTestSecret;
    options.log = [this](std::string_view line) {
      std::lock_guard lock(log_mu_);
      log_.emplace_back(line);
    };
    auto ep = Endpoint::Listen(io_, std::move(options));
    REQUIRE_MESSAGE(ep.ok(), ep.status().ToString());
    endpoint_ = std::move(ep).value();
    store_ = StoreService::Attach(io_, *endpoint_);
    done_ = std::async(std::launch::async, [this] { io_.run(); });
  }

  ~TestEndpoint() { Stop(); }

  // Stops the endpoint and returns whether io_context::run() returned by itself (no leaked work).
  bool Stop() {
    if (stopped_) return clean_stop_;
    stopped_ = true;
    endpoint_->Stop();
    clean_stop_ = done_.wait_for(kStopGrace) == std::future_status::ready;
    if (!clean_stop_) io_.stop();
    done_.wait();
    return clean_stop_;
  }

  // Runs `f` on the io_context thread and returns its result.
  template <typename F>
  auto OnIo(F f) -> decltype(f()) {
    std::packaged_task<decltype(f())()> task(std::move(f));
    auto result = task.get_future();
    asio::post(io_, [&task] { task(); });
    return result.get();
  }

  uint16_t port() const { return endpoint_->port(); }
  std::string address() const { return "127.0.0.1:" + std::to_string(port()); }
  Endpoint& endpoint() { return *endpoint_; }
  StoreService& store() { return *store_; }
  const std::shared_ptr<StoreService>& shared_store() const { return store_; }
  asio::io_context& io() { return io_; }

  StoreConfig Config(int generation = 0) const {
    return StoreConfig{address(), kTestJobId, generation, kTestSecret};
  }
  std::unique_ptr<StoreClient> Client(int generation = 0) const {
    auto c = StoreClient::Connect(Config(generation),
                                  std::chrono::steady_clock::now() + std::chrono::seconds(10));
    REQUIRE_MESSAGE(c.ok(), c.status().ToString());
    return std::move(c).value();
  }

  std::vector<std::string> Log() {
    std::lock_guard lock(log_mu_);
    return log_;
  }
  bool LogContains(std::string_view needle) {
    for (const auto& line : Log()) {
      if (line.find(needle) != std::string::npos) return true;
    }
    return false;
  }

 private:
  asio::io_context io_;
  std::unique_ptr<Endpoint> endpoint_;
  std::shared_ptr<StoreService> store_;
  std::future<void> done_;
  bool stopped_ = false;
  bool clean_stop_ = false;
  std::mutex log_mu_;
  std::vector<std::string> log_;
};

}  // namespace dslaunch::testing
