#include "common/store/store_client.h"

#include "common/auth/handshake.h"
#include "common/endpoint/endpoint_client.h"
#include "common/message_types.h"
#include "common/store/store_protocol.h"

namespace dslaunch {
namespace {

using Clock = std::chrono::steady_clock;

std::string KeyList(const std::vector<std::string>& keys) {
  std::string out = "[";
  for (size_t i = 0; i < keys.size(); ++i) out += (i ? ", '" : "'") + keys[i] + "'";
  return out + "]";
}

StoreRequest Request(uint8_t type, std::string key) {
  StoreRequest r;
  r.type = type;
  r.key = std::move(key);
  return r;
}

// Reads an OK payload that must hold exactly one field.
template <typename T, typename Reader>
Result<T> ParseOne(const std::string& payload, Reader read, const std::string& what) {
  wire::ByteReader in(payload);
  T v{};
  (in.*read)(v);
  if (!in.Finished()) return InternalError(what + ": malformed reply from the store");
  return v;
}

}  // namespace

StoreClient::StoreClient(StoreConfig config)
    : config_(std::move(config)), prefix_("gen/" + std::to_string(config_.generation) + "/") {}

Result<std::unique_ptr<StoreClient>> StoreClient::Connect(StoreConfig config,
                                                          Clock::time_point deadline) {
  if (config.generation < 0) {
    return InvalidArgumentError("store generation must be >= 0, got " +
                                std::to_string(config.generation));
  }
  std::unique_ptr<StoreClient> client(new StoreClient(std::move(config)));
  const StoreConfig& c = client->config_;
  DSLAUNCH_ASSIGN_OR_RETURN(client->fd_,
                            ConnectToEndpoint(c.address, c.job_id, c.secret, PeerRole::kStoreClient,
                                              c.generation, deadline));
  return client;
}

std::string StoreClient::Context(std::string_view op, std::string_view key) const {
  std::string s = "store " + config_.address + " gen " + std::to_string(config_.generation) + ": ";
  s += op;  // list operations append their key list themselves
  if (!key.empty()) s += " '" + std::string(key) + "'";
  return s;
}

Result<std::string> StoreClient::Call(uint8_t type, std::string payload,
                                      std::chrono::milliseconds wait, const std::string& what) {
  if (!fd_.valid()) {
    auto fd =
        ConnectToEndpoint(config_.address, config_.job_id, config_.secret, PeerRole::kStoreClient,
                          config_.generation, Clock::now() + kStoreReconnectTimeout);
    if (!fd.ok()) return fd.status().WithContext(what + ": reconnect");
    fd_ = std::move(fd).value();
    decoder_ = wire::FrameDecoder();
  }
  Status sent = SendFrame(fd_.get(), type, payload);
  if (!sent.ok()) {
    if (sent.code() != StatusCode::kInvalidArgument) fd_.Reset();  // too big: nothing was sent
    return sent.WithContext(what);
  }
  auto reply = ReceiveFrame(fd_.get(), decoder_, Clock::now() + wait);
  if (!reply.ok()) {
    // The stream is out of step (or gone): a late answer must not be taken for the next call's.
    fd_.Reset();
    if (reply.status().code() == StatusCode::kDeadlineExceeded) {
      return DeadlineExceededError(what + ": no answer from the store within " +
                                   std::to_string(wait.count()) + " ms");
    }
    return reply.status().WithContext(what);
  }
  if (reply->type == msg::kStoreError) return DecodeStoreError(reply->payload).WithContext(what);
  if (reply->type != msg::kStoreOk) {
    fd_.Reset();
    return InternalError(what + ": unexpected message type " + std::to_string(reply->type) +
                         " from the store");
  }
  return std::move(reply->payload);
}

Status StoreClient::Set(std::string_view key, std::string_view value) {
  std::lock_guard lock(mu_);
  std::string what = Context("set", key);
  StoreRequest r = Request(msg::kStoreSet, Key(key));
  r.value = std::string(value);
  return Call(r.type, EncodeStoreRequest(r), kStoreRequestTimeout, what).status();
}

Result<std::string> StoreClient::Get(std::string_view key, std::chrono::milliseconds timeout) {
  std::lock_guard lock(mu_);
  std::string what = Context("get", key);
  if (timeout.count() < 0) return InvalidArgumentError(what + ": negative timeout");
  StoreRequest r = Request(msg::kStoreGet, Key(key));
  r.timeout = timeout;
  DSLAUNCH_ASSIGN_OR_RETURN(std::string payload,
                            Call(r.type, EncodeStoreRequest(r),
                                 std::min(timeout, kMaxStoreWaitTimeout) + kStoreReplyGrace, what));
  return ParseOne<std::string>(payload, &wire::ByteReader::String, what);
}

Result<int64_t> StoreClient::Add(std::string_view key, int64_t delta) {
  std::lock_guard lock(mu_);
  std::string what = Context("add", key);
  StoreRequest r = Request(msg::kStoreAdd, Key(key));
  r.delta = delta;
  DSLAUNCH_ASSIGN_OR_RETURN(std::string payload,
                            Call(r.type, EncodeStoreRequest(r), kStoreRequestTimeout, what));
  return ParseOne<int64_t>(payload, &wire::ByteReader::I64, what);
}

Result<std::string> StoreClient::CompareSet(std::string_view key, std::string_view expected,
                                            std::string_view desired) {
  std::lock_guard lock(mu_);
  std::string what = Context("compare_set", key);
  StoreRequest r = Request(msg::kStoreCompareSet, Key(key));
  r.value = std::string(expected);
  r.desired = std::string(desired);
  DSLAUNCH_ASSIGN_OR_RETURN(std::string payload,
                            Call(r.type, EncodeStoreRequest(r), kStoreRequestTimeout, what));
  return ParseOne<std::string>(payload, &wire::ByteReader::String, what);
}

Status StoreClient::Wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) {
  std::lock_guard lock(mu_);
  std::string what = Context("wait", "") + " " + KeyList(keys);
  if (timeout.count() < 0) return InvalidArgumentError(what + ": negative timeout");
  StoreRequest r = Request(msg::kStoreWait, "");
  r.timeout = timeout;
  for (const auto& k : keys) r.keys.push_back(Key(k));
  return Call(r.type, EncodeStoreRequest(r),
              std::min(timeout, kMaxStoreWaitTimeout) + kStoreReplyGrace, what)
      .status();
}

Result<bool> StoreClient::Check(const std::vector<std::string>& keys) {
  std::lock_guard lock(mu_);
  std::string what = Context("check", "") + " " + KeyList(keys);
  StoreRequest r = Request(msg::kStoreCheck, "");
  for (const auto& k : keys) r.keys.push_back(Key(k));
  DSLAUNCH_ASSIGN_OR_RETURN(std::string payload,
                            Call(r.type, EncodeStoreRequest(r), kStoreRequestTimeout, what));
  return ParseOne<bool>(payload, &wire::ByteReader::Bool, what);
}

Result<bool> StoreClient::Delete(std::string_view key) {
  std::lock_guard lock(mu_);
  std::string what = Context("delete", key);
  StoreRequest r = Request(msg::kStoreDelete, Key(key));
  DSLAUNCH_ASSIGN_OR_RETURN(std::string payload,
                            Call(r.type, EncodeStoreRequest(r), kStoreRequestTimeout, what));
  return ParseOne<bool>(payload, &wire::ByteReader::Bool, what);
}

Result<int64_t> StoreClient::NumKeys() {
  std::lock_guard lock(mu_);
  std::string what = Context("num_keys", "");
  StoreRequest r = Request(msg::kStoreNumKeys, prefix_);
  DSLAUNCH_ASSIGN_OR_RETURN(std::string payload,
                            Call(r.type, EncodeStoreRequest(r), kStoreRequestTimeout, what));
  return ParseOne<int64_t>(payload, &wire::ByteReader::I64, what);
}

Status StoreBarrier(StoreClient& client, std::string_view name, int world_size,
                    std::chrono::milliseconds timeout) {
  std::string where = "barrier '" + std::string(name) + "'";
  if (world_size <= 0) return InvalidArgumentError(where + ": world size must be positive");
  std::string base = "barrier/" + std::string(name) + "/";
  DSLAUNCH_ASSIGN_OR_RETURN(int64_t arrived, client.Add(base + "arrived", 1));
  if (arrived > world_size) {
    return FailedPreconditionError(where + ": " + std::to_string(arrived) +
                                   " arrivals for a world of " + std::to_string(world_size) +
                                   " (name used twice in one generation?)");
  }
  if (arrived == world_size) DSLAUNCH_RETURN_IF_ERROR(client.Set(base + "done", "1"));
  Status st = client.Wait({base + "done"}, timeout);
  if (st.code() == StatusCode::kDeadlineExceeded) {
    auto count = client.Get(base + "arrived", std::chrono::milliseconds(0));
    std::string n = count.ok() ? *count : "?";
    return DeadlineExceededError(where + ": only " + n + " of " + std::to_string(world_size) +
                                 " arrived within " + std::to_string(timeout.count()) + " ms");
  }
  return st;
}

}  // namespace dslaunch
