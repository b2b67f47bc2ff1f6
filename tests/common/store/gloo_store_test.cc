// Real Gloo through the dslaunch store: ranks in threads build a gloo::rendezvous::Context with the
// TCP transport on 127.0.0.1 through GlooStore, then run an allreduce.
#include "common/store/gloo_store.h"

#include <doctest/doctest.h>

#include <gloo/allreduce.h>
#include <gloo/common/error.h>
#include <gloo/math.h>
#include <gloo/rendezvous/context.h>
#include <gloo/transport/tcp/device.h>

#include <future>

#include "tests/support/test_endpoint.h"

namespace dslaunch {
namespace {

using std::chrono::milliseconds;
using Clock = std::chrono::steady_clock;
using testing::TestEndpoint;

// Context setup and each collective give up after this: generous for 2 slow cores, far below the
// test timeout.
constexpr milliseconds kGlooTimeout{20000};

// Runs one rank: rendezvous through the store, then sums `rank + 1` over all ranks, per element.
Status RunRank(const StoreConfig& config, int rank, int size, std::vector<float>& out) {
  try {
    auto client = StoreClient::Connect(config, Clock::now() + milliseconds(10000));
    if (!client.ok()) return client.status();
    GlooStore store(**client, "gloo/test/", kGlooTimeout);
    gloo::transport::tcp::attr attr;
    attr.hostname = "127.0.0.1";
    auto device = gloo::transport::tcp::CreateDevice(attr);
    auto context = std::make_shared<gloo::rendezvous::Context>(rank, size);
    context->setTimeout(kGlooTimeout);
    context->connectFullMesh(store, device);
    out.assign(1000, static_cast<float>(rank + 1));
    gloo::AllreduceOptions opts(context);
    opts.setOutput(out.data(), out.size());
    opts.setReduceFunction(
        static_cast<void (*)(void*, const void*, const void*, size_t)>(&gloo::sum<float>));
    gloo::allreduce(opts);
    return Status::Ok();
  } catch (const gloo::Exception& e) {
    return InternalError(std::string("rank ") + std::to_string(rank) + ": " + e.what());
  }
}

TEST_CASE("Gloo ranks rendezvous through GlooStore and allreduce over TCP") {
  constexpr int kSize = 3;
  TestEndpoint ep;
  std::vector<std::vector<float>> results(kSize);
  std::vector<std::future<Status>> ranks;
  for (int r = 0; r < kSize; ++r) {
    ranks.push_back(std::async(std::launch::async,
                               [&, r] { return RunRank(ep.Config(), r, kSize, results[r]); }));
  }
  for (int r = 0; r < kSize; ++r) {
    Status st = ranks[r].get();
    CHECK_MESSAGE(st.ok(), st.ToString());
  }
  const float expected = kSize * (kSize + 1) / 2.0f;  // 1 + 2 + 3
  for (int r = 0; r < kSize; ++r) {
    CAPTURE(r);
    REQUIRE(results[r].size() == 1000);
    CHECK(results[r].front() == expected);
    CHECK(results[r].back() == expected);
  }
}

TEST_CASE("GlooStore get throws gloo::IoException naming the key and the store on timeout") {
  TestEndpoint ep;
  auto client = ep.Client();
  GlooStore store(*client, "gloo/x/", milliseconds(200));
  std::string what;
  try {
    store.get("rank_7");
  } catch (const gloo::IoException& e) {
    what = e.what();
  }
  CHECK(what.find("gloo/x/rank_7") != std::string::npos);
  CHECK(what.find(ep.address()) != std::string::npos);
  CHECK(what.find("deadline exceeded") != std::string::npos);
  store.set("k", {'a', 'b'});
  CHECK(store.get("k") == std::vector<char>{'a', 'b'});
  CHECK_NOTHROW(store.wait({"k"}));
}

}  // namespace
}  // namespace dslaunch
