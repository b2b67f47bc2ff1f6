#include "runtime/swap/swap_stream.h"

#include <algorithm>

namespace dslaunch::runtime::swap {
namespace {

// Buffers start at page boundaries even where the file system's alignment is smaller (512): the
// kernel's direct I/O path is fastest on whole pages.
constexpr uint64_t kPageBytes = 4096;

}  // namespace

Result<SwapStream> SwapStream::Create(SwapFile* file, IoEngine* engine, int buffer_count) {
  DSLAUNCH_CHECK(buffer_count >= 1) << "buffer_count " << buffer_count;
  SwapStream s(file, engine);
  const uint64_t alignment = std::max(file->alignment(), kPageBytes);
  for (int i = 0; i < buffer_count; ++i) {
    DSLAUNCH_ASSIGN_OR_RETURN(AlignedBuffer b, AlignedBuffer::Allocate(file->record_stride(), alignment));
    s.buffers_.push_back(std::move(b));
  }
  s.tickets_.resize(s.buffers_.size());
  return s;
}

Status SwapStream::Execute(const RingAction& a, std::span<const uint64_t> group_bytes, const ProcessGroupFn& process) {
  AlignedBuffer& buffer = buffers_[a.buffer];
  std::optional<IoTicket>& ticket = tickets_[a.buffer];
  const uint64_t bytes = group_bytes[a.group];
  switch (a.step) {
    case RingStep::kStartRead:
    case RingStep::kStartWrite: {
      // The transfer covers the bytes rounded up to the file's alignment (O_DIRECT); the record
      // stride leaves room for it.
      const uint64_t io_bytes = AlignUp(bytes, file_->alignment());
      IoOp op = a.step == RingStep::kStartRead ? IoOp::kRead : IoOp::kWrite;
      IoRequest r{op, file_->fd(), file_->RecordOffset(a.group), buffer.bytes().first(io_bytes)};
      DSLAUNCH_ASSIGN_OR_RETURN(ticket, engine_->Start(r));
      return Status::Ok();
    }
    case RingStep::kWaitRead:
    case RingStep::kWaitWrite: {
      DSLAUNCH_CHECK(ticket.has_value()) << ToString(a) << " without a transfer in flight";
      IoTicket t = *ticket;
      ticket.reset();
      return engine_->Wait(t);
    }
    case RingStep::kProcess:
      return process(a.group, buffer.bytes().first(bytes));
  }
  return InternalError("unknown ring step");
}

void SwapStream::Drain() {
  for (auto& ticket : tickets_) {
    if (ticket) engine_->Wait(*ticket).IgnoreError();  // the first error is already being returned
    ticket.reset();
  }
}

Status SwapStream::Run(RingMode mode, std::span<const uint64_t> group_bytes, const ProcessGroupFn& process) {
  DSLAUNCH_CHECK(group_bytes.size() <= file_->record_count())
      << group_bytes.size() << " sub-groups, " << file_->record_count() << " records";
  for (uint64_t b : group_bytes) {
    DSLAUNCH_CHECK(b <= file_->record_bytes()) << b << "-byte sub-group, " << file_->record_bytes() << "-byte records";
  }
  for (const RingAction& a : PlanRing(group_bytes.size(), buffers_.size(), mode)) {
    Status s = Execute(a, group_bytes, process);
    if (!s.ok()) {
      Drain();
      return s.WithContext("swap file '" + file_->path() + "': sub-group " + std::to_string(a.group));
    }
  }
  return Status::Ok();
}

}  // namespace dslaunch::runtime::swap
