#include "common/wire.h"

#include <cstring>

namespace dslaunch::wire {
namespace {

void PutBigEndian32(uint32_t v, std::string& out) {
  char b[4] = {static_cast<char>(v >> 24), static_cast<char>(v >> 16), static_cast<char>(v >> 8),
               static_cast<char>(v)};
  out.append(b, 4);
}

uint32_t GetBigEndian32(const char* p) {
  const auto* u = reinterpret_cast<const unsigned char*>(p);
  return (uint32_t{u[0]} << 24) | (uint32_t{u[1]} << 16) | (uint32_t{u[2]} << 8) | uint32_t{u[3]};
}

// Compact the buffer once the consumed prefix is large, so a long stream does not grow it.
constexpr size_t kCompactThreshold = 64u << 10;

}  // namespace

void AppendFrame(uint8_t type, std::string_view payload, std::string& out) {
  DSLAUNCH_CHECK(payload.size() + 1 <= kMaxFrameBytes) << "frame of " << payload.size() << " bytes";
  PutBigEndian32(static_cast<uint32_t>(payload.size() + 1), out);
  out.push_back(static_cast<char>(type));
  out.append(payload);
}

std::string EncodeFrame(uint8_t type, std::string_view payload) {
  std::string out;
  out.reserve(kFrameHeaderBytes + 1 + payload.size());
  AppendFrame(type, payload, out);
  return out;
}

void FrameDecoder::Feed(const char* data, size_t size) {
  if (consumed_ > kCompactThreshold && consumed_ * 2 > buffer_.size()) {
    buffer_.erase(0, consumed_);
    consumed_ = 0;
  }
  buffer_.append(data, size);
}

std::string FrameDecoder::TakeBuffered() {
  std::string rest = buffer_.substr(consumed_);
  buffer_.clear();
  consumed_ = 0;
  return rest;
}

Result<std::optional<Frame>> FrameDecoder::Next() {
  size_t avail = buffer_.size() - consumed_;
  if (avail < kFrameHeaderBytes) return std::optional<Frame>();
  uint32_t len = GetBigEndian32(buffer_.data() + consumed_);
  if (len == 0) return InvalidArgumentError("frame with zero length");
  if (len > kMaxFrameBytes) {
    return InvalidArgumentError("frame of " + std::to_string(len) + " bytes exceeds the limit of " +
                                std::to_string(kMaxFrameBytes));
  }
  if (avail < kFrameHeaderBytes + len) return std::optional<Frame>();
  Frame f;
  f.type = static_cast<uint8_t>(buffer_[consumed_ + kFrameHeaderBytes]);
  f.payload.assign(buffer_, consumed_ + kFrameHeaderBytes + 1, len - 1);
  consumed_ += kFrameHeaderBytes + len;
  if (consumed_ == buffer_.size()) {
    buffer_.clear();
    consumed_ = 0;
  }
  return std::optional<Frame>(std::move(f));
}

ByteWriter& ByteWriter::U8(uint8_t v) {
  out_.push_back(static_cast<char>(v));
  return *this;
}

ByteWriter& ByteWriter::U32(uint32_t v) {
  PutBigEndian32(v, out_);
  return *this;
}

ByteWriter& ByteWriter::U64(uint64_t v) {
  PutBigEndian32(static_cast<uint32_t>(v >> 32), out_);
  PutBigEndian32(static_cast<uint32_t>(v), out_);
  return *this;
}

ByteWriter& ByteWriter::String(std::string_view v) {
  DSLAUNCH_CHECK(v.size() <= kMaxFrameBytes) << "string of " << v.size() << " bytes";
  U32(static_cast<uint32_t>(v.size()));
  out_.append(v);
  return *this;
}

ByteWriter& ByteWriter::StringList(const std::vector<std::string>& v) {
  U32(static_cast<uint32_t>(v.size()));
  for (const auto& s : v) String(s);
  return *this;
}

ByteWriter& ByteWriter::Raw(std::string_view v) {
  out_.append(v);
  return *this;
}

bool ByteReader::Need(size_t n) {
  if (!ok_ || in_.size() - pos_ < n) ok_ = false;
  return ok_;
}

bool ByteReader::U8(uint8_t& v) {
  if (!Need(1)) return false;
  v = static_cast<uint8_t>(in_[pos_++]);
  return true;
}

bool ByteReader::Bool(bool& v) {
  uint8_t b = 0;
  if (!U8(b)) return false;
  if (b > 1) return ok_ = false;
  v = b == 1;
  return true;
}

bool ByteReader::U32(uint32_t& v) {
  if (!Need(4)) return false;
  v = GetBigEndian32(in_.data() + pos_);
  pos_ += 4;
  return true;
}

bool ByteReader::U64(uint64_t& v) {
  uint32_t hi = 0, lo = 0;
  if (!U32(hi) || !U32(lo)) return false;
  v = (uint64_t{hi} << 32) | lo;
  return true;
}

bool ByteReader::I64(int64_t& v) {
  uint64_t u = 0;
  if (!U64(u)) return false;
  v = static_cast<int64_t>(u);
  return true;
}

bool ByteReader::I32(int32_t& v) {
  uint32_t u = 0;
  if (!U32(u)) return false;
  v = static_cast<int32_t>(u);
  return true;
}

bool ByteReader::String(std::string& v) {
  uint32_t n = 0;
  if (!U32(n) || !Need(n)) return false;
  v.assign(in_.data() + pos_, n);
  pos_ += n;
  return true;
}

bool ByteReader::StringList(std::vector<std::string>& v) {
  uint32_t n = 0;
  if (!U32(n)) return false;
  // Each element needs at least its 4-byte length: reject counts the input cannot hold.
  if (n > (in_.size() - pos_) / 4) return ok_ = false;
  v.clear();
  v.reserve(n);
  for (uint32_t i = 0; i < n; ++i) {
    std::string s;
    if (!String(s)) return false;
    v.push_back(std::move(s));
  }
  return true;
}

bool ByteReader::Raw(size_t n, std::string& v) {
  if (!Need(n)) return false;
  v.assign(in_.data() + pos_, n);
  pos_ += n;
  return true;
}

}  // namespace dslaunch::wire
