// GlooCommunicator: the CPU Communicator over Gloo's TCP transport (Debian libgloo-dev).
//
// Bootstrap (docs/communicator.md, "Gloo bootstrap"): every rank calls Create with the same
// `context_id`; the full mesh is formed through dslaunch's store under "gloo/ctx<id>/" (the
// StoreClient adds "gen/<generation>/" and the connection is bound to the job), so a restarted
// generation never meets a stale peer, and a second communicator of the same generation takes
// another id. Each rank also publishes "gloo/ctx<id>/addr/<rank>", the listening address of each
// of its pairs, so that a peer can name the rank behind an address in a Gloo error message.
//
// Address selection: Gloo binds one listening socket per pair on GlooOptions::address (an IP) or
// GlooOptions::interface (a device name); one of them is required, because Gloo's default
// (resolve the hostname) may pick a loopback address that peers on other hosts cannot reach. The
// worker passes the local IP of its route to the store (SourceAddressToward(store address)), so
// that the address that reaches the launcher is the one peers use.
//
// Algorithms: AllReduce, AllGather (allgatherv: uneven counts), Broadcast and Barrier are Gloo's;
// ReduceScatter with uneven counts is a ring over Gloo's unbound buffers (N-1 steps, each rank
// sends one block to rank+1 and receives one from rank-1, memory O(max block)), since this Gloo
// has no reduce_scatter function. kAvg is a sum scaled by 1/world_size. Send and Recv are Gloo's
// unbound-buffer send and receive, tagged per pair in order; a Send copies the message and posts
// it (Gloo moves it once the peer has posted its receive), FlushSends waits for the posted ones.
//
// Errors: Gloo exceptions are caught here and become kAborted naming the peer
// ("rank 2 ([127.0.0.1]:41234)"): from the address in Gloo's message, or else by a roll call
// through the store (ranks that report no failure of their own are the suspects), see
// docs/communicator.md. A dead peer fails the call at once, a stalled one after
// collective_timeout (plus at most a quarter of it for the roll call).
// Thread-safety: one thread per communicator.
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "common/store/store_client.h"
#include "runtime/comm/communicator.h"

namespace gloo {
class Context;
namespace transport {
class Device;
class UnboundBuffer;
}  // namespace transport
}  // namespace gloo

namespace dslaunch::runtime {

// Forming the mesh waits for the slowest rank to start: generous, as workers of a job start
// within seconds of each other but Python-free start-up on a loaded node can take a while.
inline constexpr std::chrono::milliseconds kDefaultGlooConnectTimeout{60000};
// One collective on a healthy peer finishes in well under this even for GB-sized buffers on
// slow TCP; a peer silent for longer is stalled and the generation is aborted.
inline constexpr std::chrono::milliseconds kDefaultGlooCollectiveTimeout{300000};

struct GlooOptions {
  std::string address;    // IP to bind (e.g. "10.0.0.3"); or
  std::string interface;  // a network interface name (e.g. "eth0")
  int context_id = 0;     // distinct per communicator within a generation
  std::chrono::milliseconds connect_timeout = kDefaultGlooConnectTimeout;
  std::chrono::milliseconds collective_timeout = kDefaultGlooCollectiveTimeout;
};

class GlooCommunicator : public Communicator {
 public:
  // Forms the group. kInvalidArgument for a bad rank/world or neither/both of address and
  // interface; kUnavailable when the mesh cannot be formed within connect_timeout (store or
  // peer unreachable), naming the cause. `store` must outlive the communicator: after a failure
  // it is read to name the peer.
  static Result<std::unique_ptr<GlooCommunicator>> Create(StoreClient& store, int rank, int world,
                                                          GlooOptions options);
  ~GlooCommunicator() override;

  std::string Describe() const override;

  // Sets the timeout of the collectives called from now on (the worker derives it from the
  // watchdog timeout in effect: runtime/train/progress_report.h, CollectiveTimeoutFor). Same thread as
  // the collectives.
  void SetCollectiveTimeout(std::chrono::milliseconds timeout);
  std::chrono::milliseconds collective_timeout() const { return options_.collective_timeout; }

 protected:
  Status DoAllReduce(BufferView data, ReduceOp op) override;
  Status DoReduceScatter(ConstBufferView input, BufferView output,
                         const std::vector<size_t>& counts, ReduceOp op) override;
  Status DoAllGather(ConstBufferView input, BufferView output,
                     const std::vector<size_t>& counts) override;
  Status DoBroadcast(BufferView data, int root) override;
  Status DoBarrier() override;
  Status DoSend(ConstBufferView data, int peer) override;
  Status DoRecv(BufferView data, int peer) override;
  Status DoFlushSends() override;

 private:
  // A buffered send: a copy of the message, posted to Gloo, until FlushSends sees it taken.
  struct PendingSend {
    std::vector<uint8_t> bytes;
    std::unique_ptr<gloo::transport::UnboundBuffer> buffer;
    int peer = -1;
  };

  GlooCommunicator(StoreClient& store, int rank, int world, GlooOptions options,
                   std::shared_ptr<gloo::Context> context, std::vector<std::string> peer_addresses);

  // kAborted for a Gloo failure in `op`, naming the peer found in `what` (or `peer_hint`).
  Status GlooError(std::string_view op, const std::string& what, int peer_hint = -1);
  std::string PeerName(int rank) const;

  StoreClient& store_;
  GlooOptions options_;  // collective_timeout changes with SetCollectiveTimeout
  const std::string prefix_;  // "gloo/ctx<id>/"
  std::shared_ptr<gloo::Context> context_;
  // Per rank, the peer's listening address as Gloo prints it ("[10.0.0.3]:41234"), once read from
  // the peer's table after an error.
  std::vector<std::string> peer_addresses_;
  uint32_t ring_calls_ = 0;  // tag of the next ring reduce-scatter
  // The ring's receive buffers, 2 x the largest block seen so far; reused across calls.
  std::vector<float> ring_scratch_[2];
  // Point-to-point: the tag of the next message to and from each peer, and the sends not yet
  // known to be taken (declared after context_, so they go first).
  std::vector<uint32_t> send_tags_, recv_tags_;
  std::vector<PendingSend> pending_sends_;
};

}  // namespace dslaunch::runtime
