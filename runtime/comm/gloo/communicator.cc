#include "runtime/comm/gloo/communicator.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <csignal>
#include <cstring>

#include <gloo/allgatherv.h>
#include <gloo/allreduce.h>
#include <gloo/barrier.h>
#include <gloo/broadcast.h>
#include <gloo/common/error.h>
#include <gloo/math.h>
#include <gloo/rendezvous/context.h>
#include <gloo/transport/tcp/device.h>
#include <gloo/types.h>

#include "common/store/gloo_store.h"
#include "common/unique_fd.h"

namespace dslaunch::runtime {
namespace {

// Naming the peer behind an address may read the peers' address tables from the store; it
// answers at once when alive, and an error report must not wait long for it.
constexpr std::chrono::milliseconds kPeerLookupTimeout{2000};
// After a failure, how long the survivors wait for each other's failure reports: they all fail
// within a round trip of each other when a peer dies, so the silent ones are the suspects.
constexpr std::chrono::milliseconds kRollCallTimeout{1000};
// Slot prefix of the ring reduce-scatter's messages; Gloo's own collectives use small prefixes.
constexpr uint8_t kRingSlotPrefix = 0xd5;
// Slot prefix of Send and Recv (docs/communicator.md, "Send and receive").
constexpr uint8_t kPointToPointSlotPrefix = 0xd6;

using ReduceFn = void (*)(void*, const void*, const void*, size_t);

ReduceFn GlooReduceFunction(ReduceOp op) {
  return op == ReduceOp::kMax ? static_cast<ReduceFn>(&gloo::max<float>)
                              : static_cast<ReduceFn>(&gloo::sum<float>);
}

// Whether `needle` occurs in `text` not followed by a digit (":4123" must not match ":41234").
bool ContainsAddress(const std::string& text, const std::string& needle) {
  for (size_t pos = text.find(needle); pos != std::string::npos; pos = text.find(needle, pos + 1)) {
    const size_t end = pos + needle.size();
    if (end >= text.size() || !std::isdigit(static_cast<unsigned char>(text[end]))) return true;
  }
  return false;
}

}  // namespace

GlooCommunicator::GlooCommunicator(StoreClient& store, int rank, int world, GlooOptions options,
                                   std::shared_ptr<gloo::Context> context,
                                   std::vector<std::string> peer_addresses)
    : Communicator(rank, world),
      store_(store),
      options_(std::move(options)),
      prefix_("gloo/ctx" + std::to_string(options_.context_id) + "/"),
      context_(std::move(context)),
      peer_addresses_(std::move(peer_addresses)),
      send_tags_(world, 0),
      recv_tags_(world, 0) {}

GlooCommunicator::~GlooCommunicator() = default;

Result<std::unique_ptr<GlooCommunicator>> GlooCommunicator::Create(StoreClient& store, int rank,
                                                                   int world, GlooOptions options) {
  const std::string who = "gloo rank " + std::to_string(rank) + "/" + std::to_string(world);
  if (world <= 0 || rank < 0 || rank >= world) return InvalidArgumentError(who + ": bad rank");
  if (options.address.empty() == options.interface.empty()) {
    return InvalidArgumentError(who + ": set exactly one of address and interface to bind");
  }
  const std::string prefix = "gloo/ctx" + std::to_string(options.context_id) + "/";
  // Gloo writes to its sockets without MSG_NOSIGNAL: a peer's death would kill this process with
  // SIGPIPE instead of raising an error. Ignoring it process-wide is what every Gloo user does.
  std::signal(SIGPIPE, SIG_IGN);
  std::shared_ptr<gloo::rendezvous::Context> context;
  try {
    gloo::transport::tcp::attr attr;
    if (!options.address.empty()) attr.hostname = options.address;
    if (!options.interface.empty()) attr.iface = options.interface;
    auto device = gloo::transport::tcp::CreateDevice(attr);
    GlooStore gloo_store(store, prefix, options.connect_timeout);
    context = std::make_shared<gloo::rendezvous::Context>(rank, world);
    context->setTimeout(options.connect_timeout);
    context->connectFullMesh(gloo_store, device);
    context->setTimeout(options.collective_timeout);
  } catch (const std::exception& e) {
    return UnavailableError(who + ": forming the mesh under '" + store.key_prefix() + prefix +
                            "' (store " + store.address() + "): " + e.what());
  }
  // Our listening address for each pair, so that a peer can name us from an error message.
  std::string table;
  for (int peer = 0; peer < world; ++peer) {
    if (peer != rank) table += context->getPair(peer)->address().str() + "\n";
  }
  Status st = store.Set(prefix + "addr/" + std::to_string(rank), table);
  if (!st.ok()) return UnavailableError(who + ": publishing addresses: " + st.message());
  std::vector<std::string> peer_addresses(world);
  return std::unique_ptr<GlooCommunicator>(new GlooCommunicator(
      store, rank, world, std::move(options), std::move(context), std::move(peer_addresses)));
}

std::string GlooCommunicator::Describe() const {
  return "gloo rank " + std::to_string(rank()) + "/" + std::to_string(world_size()) + " on " +
         (options_.address.empty() ? options_.interface : options_.address);
}

std::string GlooCommunicator::PeerName(int peer) const {
  const std::string& address = peer_addresses_[peer];
  return "rank " + std::to_string(peer) + (address.empty() ? "" : " (" + address + ")");
}

void GlooCommunicator::SetCollectiveTimeout(std::chrono::milliseconds timeout) {
  options_.collective_timeout = timeout;
  context_->setTimeout(timeout);
}

Status GlooCommunicator::GlooError(std::string_view op, const std::string& what, int peer_hint) {
  // Report our own failure first, so that a peer taking the roll call below finds us.
  const std::string failed_key = prefix_ + "failed/";
  store_.Set(failed_key + std::to_string(rank()), op).IgnoreError();
  // The address in Gloo's message, among the peers' listening addresses (a pair's connection runs
  // between the two listening addresses, so this is what "Read error [addr]" prints).
  int peer = -1;
  for (int r = 0; r < world_size(); ++r) {
    if (r == rank()) continue;
    auto table = store_.Get(prefix_ + "addr/" + std::to_string(r), kPeerLookupTimeout);
    if (!table.ok()) continue;
    // Line i is rank r's listening address for its pair with the i-th rank other than r.
    const int our_line = rank() < r ? rank() : rank() - 1;
    size_t begin = 0;
    int line = 0;
    for (size_t end; (end = table->find('\n', begin)) != std::string::npos; begin = end + 1) {
      const std::string address = table->substr(begin, end - begin);
      if (line++ == our_line) peer_addresses_[r] = address;
      if (peer < 0 && !address.empty() && ContainsAddress(what, address)) peer = r;
    }
  }
  // Otherwise (a timeout, or a message with another address): the peers that have not reported a
  // failure of their own within kRollCallTimeout are the suspects; name them if there are any.
  // A peer that reported a failure of its own is a survivor whose exit closed our connection to
  // it; the root cause is elsewhere.
  const int direct = peer;
  const bool direct_failed_too =
      direct >= 0 &&
      store_.Get(failed_key + std::to_string(direct), std::chrono::milliseconds(0)).ok();
  std::string suspects;
  if ((peer < 0 || direct_failed_too) && world_size() > 2) {
    // A quarter of the collective timeout at most, so that a stall is reported within 1.25 x it.
    const auto roll_call = std::min(kRollCallTimeout, options_.collective_timeout / 4);
    const auto deadline = std::chrono::steady_clock::now() + roll_call;
    for (int r = 0; r < world_size(); ++r) {
      if (r == rank()) continue;
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
          deadline - std::chrono::steady_clock::now());
      auto reported =
          store_.Get(failed_key + std::to_string(r), std::max(left, std::chrono::milliseconds(0)));
      if (!reported.ok()) suspects += (suspects.empty() ? "" : ", ") + std::to_string(r);
    }
    if (suspects.find(',') == std::string::npos && !suspects.empty()) {
      peer = std::stoi(suspects);
    } else if (!suspects.empty()) {
      peer = -1;
    }
  }
  if (peer < 0) peer = peer_hint;
  if (peer < 0 && world_size() == 2) peer = 1 - rank();  // the only peer there is
  std::string who = peer < 0 ? "an unknown peer" : PeerName(peer);
  if (peer < 0 && !suspects.empty()) who = "one of ranks " + suspects + " (no failure reported)";
  if (direct_failed_too && peer != direct) {
    who += " (the connection that broke was to " + PeerName(direct) + ", which failed too)";
  }
  std::string cause = what;
  if (what.find("Timed out") != std::string::npos) {
    cause = "no progress within the collective timeout of " +
            std::to_string(options_.collective_timeout.count()) +
            " ms (peer stalled or dead): " + what;
  }
  return AbortedError("gloo " + std::string(op) + " on rank " + std::to_string(rank()) + "/" +
                      std::to_string(world_size()) + ": failed with " + who + ": " + cause);
}

Status GlooCommunicator::DoAllReduce(BufferView data, ReduceOp op) {
  try {
    gloo::AllreduceOptions opts(context_);
    opts.setOutput(static_cast<float*>(data.data), data.count);
    opts.setReduceFunction(GlooReduceFunction(op));
    opts.setTimeout(options_.collective_timeout);
    gloo::allreduce(opts);
  } catch (const std::exception& e) {
    return GlooError("allreduce", e.what());
  }
  if (op == ReduceOp::kAvg) ScaleFloats(data, 1.0f / world_size());
  return Status::Ok();
}

Status GlooCommunicator::DoReduceScatter(ConstBufferView input, BufferView output,
                                         const std::vector<size_t>& counts, ReduceOp op) {
  const int n = world_size();
  const int me = rank();
  const std::vector<size_t> offsets = BlockOffsets(counts);
  const float* in = static_cast<const float*>(input.data);
  float* out = static_cast<float*>(output.data);
  auto combine = [op](float* dst, const float* a, const float* b, size_t count) {
    for (size_t j = 0; j < count; ++j)
      dst[j] = op == ReduceOp::kMax ? std::max(a[j], b[j]) : a[j] + b[j];
  };
  if (n == 1) {
    std::memcpy(out, in, output.bytes());
  } else {
    // Step s: send block (me-s-1) to the right, receive block (me-s-2) from the left and add our
    // own input to it; after n-1 steps the block received is ours, reduced over every rank.
    const int right = (me + 1) % n;
    const int left = (me + n - 1) % n;
    const size_t max_count = *std::max_element(counts.begin(), counts.end());
    // Kept between calls: fresh pages cost a fault each, which made a 64 MB call 4x slower.
    for (auto& buffer : ring_scratch_) {
      if (buffer.size() < max_count) buffer.resize(max_count);
    }
    auto& scratch = ring_scratch_;
    const uint64_t slot = gloo::Slot::build(kRingSlotPrefix, ring_calls_++);
    int hint = -1;
    try {
      auto in_buf = context_->createUnboundBuffer(const_cast<float*>(in), input.bytes());
      std::unique_ptr<gloo::transport::UnboundBuffer> bufs[2] = {
          context_->createUnboundBuffer(scratch[0].data(), max_count * sizeof(float)),
          context_->createUnboundBuffer(scratch[1].data(), max_count * sizeof(float))};
      for (int s = 0; s < n - 1; ++s) {
        const int send_block = (me - s - 1 + 2 * n) % n;
        const int recv_block = (me - s - 2 + 2 * n) % n;
        const size_t send_bytes = counts[send_block] * sizeof(float);
        const size_t recv_count = counts[recv_block];
        if (send_bytes > 0) {
          if (s == 0) {
            in_buf->send(right, slot, offsets[send_block] * sizeof(float), send_bytes);
          } else {
            bufs[(s - 1) % 2]->send(right, slot, 0, send_bytes);
          }
        }
        if (recv_count > 0) bufs[s % 2]->recv(left, slot, 0, recv_count * sizeof(float));
        hint = left;
        if (recv_count > 0) bufs[s % 2]->waitRecv(options_.collective_timeout);
        hint = right;
        if (send_bytes > 0)
          (s == 0 ? in_buf : bufs[(s - 1) % 2])->waitSend(options_.collective_timeout);
        float* dst = s == n - 2 ? out : scratch[s % 2].data();
        combine(dst, scratch[s % 2].data(), in + offsets[recv_block], recv_count);
      }
    } catch (const std::exception& e) {
      return GlooError("reduce_scatter", e.what(), hint);
    }
  }
  if (op == ReduceOp::kAvg) ScaleFloats(output, 1.0f / n);
  return Status::Ok();
}

Status GlooCommunicator::DoAllGather(ConstBufferView input, BufferView output,
                                     const std::vector<size_t>& counts) {
  // Bytes, so that every dtype takes the same path.
  const size_t elem = DTypeSize(output.dtype);
  std::vector<size_t> byte_counts;
  for (size_t c : counts) byte_counts.push_back(c * elem);
  const size_t own_offset = BlockOffsets(counts)[rank()] * elem;
  try {
    gloo::AllgathervOptions opts(context_);
    auto* out = static_cast<uint8_t*>(output.data);
    if (input.data != out + own_offset) {
      opts.setInput(static_cast<uint8_t*>(const_cast<void*>(input.data)), input.bytes());
    }
    opts.setOutput(out, byte_counts);
    opts.setTimeout(options_.collective_timeout);
    gloo::allgatherv(opts);
  } catch (const std::exception& e) {
    return GlooError("allgather", e.what());
  }
  return Status::Ok();
}

Status GlooCommunicator::DoBroadcast(BufferView data, int root) {
  try {
    gloo::BroadcastOptions opts(context_);
    opts.setOutput(static_cast<uint8_t*>(data.data), data.bytes());
    opts.setRoot(root);
    opts.setTimeout(options_.collective_timeout);
    gloo::broadcast(opts);
  } catch (const std::exception& e) {
    return GlooError("broadcast", e.what(), root);
  }
  return Status::Ok();
}

Status GlooCommunicator::DoBarrier() {
  try {
    gloo::BarrierOptions opts(context_);
    opts.setTimeout(options_.collective_timeout);
    gloo::barrier(opts);
  } catch (const std::exception& e) {
    return GlooError("barrier", e.what());
  }
  return Status::Ok();
}

Status GlooCommunicator::DoSend(ConstBufferView data, int peer) {
  try {
    PendingSend send;
    const auto* bytes = static_cast<const uint8_t*>(data.data);
    send.bytes.assign(bytes, bytes + data.bytes());
    send.peer = peer;
    send.buffer = context_->createUnboundBuffer(send.bytes.data(), send.bytes.size());
    send.buffer->send(peer, gloo::Slot::build(kPointToPointSlotPrefix, send_tags_[peer]++));
    pending_sends_.push_back(std::move(send));
  } catch (const std::exception& e) {
    return GlooError("send", e.what(), peer);
  }
  return Status::Ok();
}

Status GlooCommunicator::DoRecv(BufferView data, int peer) {
  try {
    auto buffer = context_->createUnboundBuffer(data.data, data.bytes());
    buffer->recv(peer, gloo::Slot::build(kPointToPointSlotPrefix, recv_tags_[peer]++));
    buffer->waitRecv(options_.collective_timeout);
  } catch (const std::exception& e) {
    return GlooError("recv", e.what(), peer);
  }
  return Status::Ok();
}

Status GlooCommunicator::DoFlushSends() {
  std::vector<PendingSend> pending = std::move(pending_sends_);
  pending_sends_.clear();
  for (PendingSend& send : pending) {
    try {
      send.buffer->waitSend(options_.collective_timeout);
    } catch (const std::exception& e) {
      return GlooError("send", e.what(), send.peer);
    }
  }
  return Status::Ok();
}

}  // namespace dslaunch::runtime
