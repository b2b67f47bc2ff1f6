#include "runtime/engine/parameter_swap.h"

#include <algorithm>
#include <cstring>
#include <utility>

#include "common/check.h"
#include "runtime/comm/agreement.h"
#include "runtime/engine/storage_type.h"
#include "runtime/swap/swap_directory.h"

namespace dslaunch::runtime {
namespace {

const std::string kParameterNvmePathKey = std::string(kOffloadParamKey) + ".nvme_path";

}  // namespace

ParameterSwapPlan PlanParameterSwap(const std::vector<size_t>& group_sizes, const ShardMap& shards,
                                    int64_t persistence_threshold, uint64_t max_in_cpu) {
  ParameterSwapPlan plan;
  bool spilling = false;  // a group did not fit: this and every later group go to disk
  uint64_t counted = 0;   // resident owned elements of groups that are not persistent
  size_t offset = 0;
  for (const size_t numel : group_sizes) {
    const size_t owned = shards.OwnPart(offset, offset + numel).size();
    offset += numel;
    const bool persistent = static_cast<int64_t>(numel) <= persistence_threshold;
    if (!persistent && owned > 0 && !spilling && counted + owned > max_in_cpu) spilling = true;
    if (persistent || owned == 0 || !spilling) {
      plan.record.push_back(-1);
      plan.resident_elements += owned;
      if (!persistent) counted += owned;
      continue;
    }
    plan.record.push_back(static_cast<int>(plan.record_count++));
    plan.record_elements = std::max(plan.record_elements, owned);
  }
  return plan;
}

ParameterSwapPlan PlanParameterSwap(const ParameterLayout& layout, const ShardMap& shards,
                                    int64_t persistence_threshold, uint64_t max_in_cpu) {
  std::vector<size_t> sizes;
  for (const ParameterGroup& group : layout.groups()) sizes.push_back(group.numel);
  return PlanParameterSwap(sizes, shards, persistence_threshold, max_in_cpu);
}

template <class S>
Result<std::unique_ptr<ParameterSwap<S>>> ParameterSwap<S>::Create(const ParameterLayout& layout,
                                                                   const ShardMap& shards, const ZeroConfig& zero,
                                                                   const swap::OffloadParamConfig& config,
                                                                   const swap::AioConfig& aio, Communicator& comm,
                                                                   const InitialValues& initial) {
  ParameterSwapPlan plan =
      PlanParameterSwap(layout, shards, zero.stage3_param_persistence_threshold, config.max_in_cpu);
  std::unique_ptr<ParameterSwap> swap(new ParameterSwap(layout, shards, std::move(plan)));
  DSLAUNCH_RETURN_IF_ERROR(AgreeOnFailure(comm, swap->Prepare(config), "prepare its parameter swap directory"));
  DSLAUNCH_RETURN_IF_ERROR(AgreeOnFailure(comm, swap->Fill(config, aio, comm.rank(), initial), "create its parameter swap file"));
  return swap;
}

template <class S>
Status ParameterSwap<S>::Prepare(const swap::OffloadParamConfig& config) {
  DSLAUNCH_ASSIGN_OR_RETURN(std::vector<swap::StaleSwapFile> stale, swap::RemoveStaleSwapFiles(config.nvme_path));
  for (const swap::StaleSwapFile& f : stale) notes_.push_back(swap::DescribeRemoval(f));
  if (plan_.record_count > 0 && plan_.record_elements > config.buffer_size) {
    return InvalidArgumentError(std::string(kOffloadParamKey) + ".buffer_size: " + std::to_string(config.buffer_size) +
                                " elements cannot hold this rank's largest parameter partition (" +
                                std::to_string(plan_.record_elements) + " elements); raise buffer_size");
  }
  // Ranks of one node share the directory and the engine does not know how many there are, so
  // the check asks for the whole world's files (this rank's times the world: an upper bound).
  const uint64_t record = swap::AlignUp(plan_.record_elements * sizeof(S), swap::kDefaultDirectIoAlignment);
  const uint64_t world = shards_.Counts(0, 0).size();
  return swap::CheckSwapDirectory(config.nvme_path, plan_.record_count * record * world, kParameterNvmePathKey);
}

template <class S>
Status ParameterSwap<S>::Fill(const swap::OffloadParamConfig& config, const swap::AioConfig& aio, int rank,
                              const InitialValues& initial) {
  resident_.resize(plan_.record.size());
  if (plan_.record_count > 0) {
    DSLAUNCH_ASSIGN_OR_RETURN(swap::SwapFile file,
                              swap::SwapFile::Create({.nvme_path = config.nvme_path,
                                                      .kind = swap::SwapKind::kParam,
                                                      .rank = rank,
                                                      .record_bytes = plan_.record_elements * sizeof(S),
                                                      .record_count = plan_.record_count}));
    file_.emplace(std::move(file));
    if (file_->warning()) notes_.push_back(*file_->warning());
    swap::IoEngineChoice choice = swap::MakeIoEngine(swap::IoBackend::kUring, aio);
    io_ = std::move(choice.engine);
    if (choice.warning) notes_.push_back(*choice.warning);
    slots_.resize(static_cast<size_t>(config.buffer_count));
    for (Slot& slot : slots_) {
      DSLAUNCH_ASSIGN_OR_RETURN(slot.buffer, swap::AlignedBuffer::Allocate(file_->record_stride(), file_->alignment()));
    }
  }
  // The initial values, group by group (through one buffer of the largest owned part): resident
  // parts into memory, the rest to their records.
  std::vector<float> values;
  for (size_t g = 0; g < plan_.record.size(); ++g) {
    const ShardRange part = OwnedPart(g);
    if (part.size() == 0) continue;
    if (plan_.record[g] < 0) resident_[g].resize(part.size());
    values.resize(part.size());
    initial(part.begin, values);
    DSLAUNCH_RETURN_IF_ERROR(Write(part.begin - shards_.own().begin, values));
  }
  return Status::Ok();
}

template <class S>
ShardRange ParameterSwap<S>::OwnedPart(size_t g) const {
  const ParameterGroup& group = layout_.groups()[g];
  return shards_.OwnPart(group.offset, group.offset + group.numel);
}

template <class S>
Result<typename ParameterSwap<S>::Slot*> ParameterSwap<S>::NextSlot() {
  Slot& slot = slots_[next_slot_];
  next_slot_ = (next_slot_ + 1) % slots_.size();
  DSLAUNCH_RETURN_IF_ERROR(Finish(slot));
  return &slot;
}

template <class S>
Status ParameterSwap<S>::Finish(Slot& slot) {
  if (!slot.pending) return Status::Ok();
  const swap::IoTicket ticket = *slot.pending;
  slot.pending.reset();
  DSLAUNCH_RETURN_IF_ERROR(io_->Wait(ticket).WithContext(Where(slot.group)));
  if (slot.copy_to != nullptr) std::memcpy(slot.copy_to, slot.buffer.data(), slot.copy_count * sizeof(S));
  slot.copy_to = nullptr;
  return Status::Ok();
}

template <class S>
Status ParameterSwap<S>::FinishAll() {
  Status first = Status::Ok();
  for (Slot& slot : slots_) {
    Status s = Finish(slot);
    if (first.ok()) first = s;
  }
  return first;
}

template <class S>
Status ParameterSwap<S>::Start(Slot& slot, swap::IoOp op, size_t g, size_t elements) {
  const uint64_t bytes = swap::AlignUp(elements * sizeof(S), file_->alignment());
  const uint64_t offset = file_->RecordOffset(static_cast<uint64_t>(plan_.record[g]));
  swap::IoRequest request{op, file_->fd(), offset, slot.buffer.bytes().first(bytes)};
  Result<swap::IoTicket> ticket = io_->Start(request);
  if (!ticket.ok()) return ticket.status().WithContext(Where(g));
  slot.pending = *ticket;
  slot.group = g;
  return Status::Ok();
}

template <class S>
std::string ParameterSwap<S>::Where(size_t g) const {
  return "parameter swap file '" + file_->path() + "': group " + layout_.groups()[g].name;
}

template <class S>
Status ParameterSwap<S>::Read(size_t lo, size_t hi, std::span<S> out) {
  DSLAUNCH_CHECK(out.size() == shards_.OwnPart(lo, hi).size());
  Status status = Status::Ok();
  size_t at = 0;
  for (size_t g = 0; g < plan_.record.size() && status.ok(); ++g) {
    const ParameterGroup& group = layout_.groups()[g];
    if (group.offset + group.numel <= lo || group.offset >= hi) continue;
    DSLAUNCH_CHECK(group.offset >= lo && group.offset + group.numel <= hi) << "Read covers whole groups";
    const size_t n = OwnedPart(g).size();
    if (plan_.record[g] < 0) {
      std::copy(resident_[g].begin(), resident_[g].end(), out.begin() + static_cast<std::ptrdiff_t>(at));
    } else {
      Result<Slot*> slot = NextSlot();
      status = slot.ok() ? Start(**slot, swap::IoOp::kRead, g, n) : slot.status();
      if (status.ok()) {
        (*slot)->copy_to = out.data() + at;
        (*slot)->copy_count = n;
      }
    }
    at += n;
  }
  Status finished = FinishAll();  // never return with I/O in flight
  return status.ok() ? finished : status;
}

template <class S>
Status ParameterSwap<S>::Write(size_t begin, std::span<const float> master) {
  const size_t lo = shards_.own().begin + begin, hi = lo + master.size();
  Status status = Status::Ok();
  for (size_t g = 0; g < plan_.record.size() && status.ok(); ++g) {
    const ShardRange part = OwnedPart(g);
    const size_t b = std::max(lo, part.begin), e = std::min(hi, part.end);
    if (e <= b) continue;
    const std::span<const float> from = master.subspan(b - lo, e - b);
    if (plan_.record[g] < 0) {
      FromFloat(from, std::span<S>(resident_[g]).subspan(b - part.begin, e - b));
      continue;
    }
    Result<Slot*> slot = NextSlot();
    if (!slot.ok()) return slot.status();
    S* record = reinterpret_cast<S*>((*slot)->buffer.data());
    if (e - b < part.size()) {  // partly covered: the rest of the record must survive
      status = Start(**slot, swap::IoOp::kRead, g, part.size());
      if (status.ok()) status = Finish(**slot);
    }
    if (!status.ok()) break;
    FromFloat(from, std::span<S>(record + (b - part.begin), e - b));
    status = Start(**slot, swap::IoOp::kWrite, g, part.size());
  }
  Status finished = FinishAll();
  return status.ok() ? finished : status;
}

template <class S>
size_t ParameterSwap<S>::resident_bytes() const {
  size_t n = 0;
  for (const std::vector<S>& part : resident_) n += part.size();
  return n * sizeof(S);
}

template <class S>
size_t ParameterSwap<S>::buffer_bytes() const {
  size_t n = 0;
  for (const Slot& slot : slots_) n += slot.buffer.size();
  return n;
}

template class ParameterSwap<float>;
template class ParameterSwap<Half>;
template class ParameterSwap<BFloat16>;

}  // namespace dslaunch::runtime
