// Wire encoding shared by every dslaunch connection: frames and the fields inside them.
//
// A frame is a 4-byte big-endian length L, then L bytes: one message-type byte and the payload.
// Payload fields are written in order with ByteWriter and read back with ByteReader:
//   u8, u32/u64/i64 (big-endian), string (u32 length + bytes), bool (u8 0/1).
// The full specification is docs/protocol.md. Pure code: no sockets here.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace dslaunch::wire {

// Largest frame (type byte + payload) either side accepts: big enough for a Gloo address list or
// an NCCL unique id many times over, small enough that a garbage length cannot make a peer
// allocate gigabytes. A larger frame closes the connection.
inline constexpr uint32_t kMaxFrameBytes = 16u << 20;
inline constexpr size_t kFrameHeaderBytes = 4;

struct Frame {
  uint8_t type = 0;
  std::string payload;
};

// Appends a whole frame (header, type, payload) to `out`. Precondition: 1 + payload.size() <=
// kMaxFrameBytes (checked).
void AppendFrame(uint8_t type, std::string_view payload, std::string& out);
std::string EncodeFrame(uint8_t type, std::string_view payload);

// Incremental frame parser for a byte stream: feed bytes as they arrive, take complete frames.
// Not thread-safe.
class FrameDecoder {
 public:
  // Appends received bytes.
  void Feed(const char* data, size_t size);
  // Returns the next complete frame, std::nullopt if more bytes are needed, or an error
  // (kInvalidArgument) for a zero or oversized length; after an error the stream is unusable.
  Result<std::optional<Frame>> Next();
  size_t buffered() const { return buffer_.size() - consumed_; }
  // The bytes fed and not yet taken as frames, handed over (to the next reader of the stream).
  std::string TakeBuffered();

 private:
  std::string buffer_;
  size_t consumed_ = 0;
};

class ByteWriter {
 public:
  ByteWriter& U8(uint8_t v);
  ByteWriter& Bool(bool v) { return U8(v ? 1 : 0); }
  ByteWriter& U32(uint32_t v);
  ByteWriter& U64(uint64_t v);
  ByteWriter& I64(int64_t v) { return U64(static_cast<uint64_t>(v)); }
  ByteWriter& I32(int32_t v) { return U32(static_cast<uint32_t>(v)); }
  ByteWriter& String(std::string_view v);
  ByteWriter& StringList(const std::vector<std::string>& v);
  // Raw bytes with no length prefix (fixed-size fields such as nonces).
  ByteWriter& Raw(std::string_view v);

  const std::string& bytes() const { return out_; }
  std::string Take() { return std::move(out_); }

 private:
  std::string out_;
};

// Reads fields in order. Each getter returns false once the input is exhausted or a length is
// out of range; after the first failure every later call fails too, so a decoder can read all
// fields and check ok() once. Finished() is true when every byte was consumed without error.
class ByteReader {
 public:
  explicit ByteReader(std::string_view in) : in_(in) {}

  bool U8(uint8_t& v);
  bool Bool(bool& v);
  bool U32(uint32_t& v);
  bool U64(uint64_t& v);
  bool I64(int64_t& v);
  bool I32(int32_t& v);
  bool String(std::string& v);
  bool StringList(std::vector<std::string>& v);
  bool Raw(size_t n, std::string& v);

  bool ok() const { return ok_; }
  bool Finished() const { return ok_ && pos_ == in_.size(); }

 private:
  bool Need(size_t n);
  std::string_view in_;
  size_t pos_ = 0;
  bool ok_ = true;
};

}  // namespace dslaunch::wire
