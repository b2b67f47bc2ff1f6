#include "runtime/engine/parameter_store.h"

#include <algorithm>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "common/check.h"
#include "runtime/engine/storage_type.h"

namespace dslaunch::runtime {
namespace {

// Initial values are rounded to S through a buffer of at most this many fp32 values (4 MiB), not
// a whole fp32 copy of what the store holds.
constexpr size_t kInitialChunk = size_t{1} << 20;

// Elements [begin, begin + out.size()) of the model's initial values, rounded to S.
template <class S>
void ReadInitial(const InitialValues& initial, size_t begin, std::span<S> out) {
  if constexpr (kIsFp32Storage<S>) {
    initial(begin, out);
  } else {
    std::vector<float> chunk(std::min(kInitialChunk, out.size()));
    for (size_t at = 0; at < out.size(); at += chunk.size()) {
      const size_t n = std::min(chunk.size(), out.size() - at);
      initial(begin + at, std::span<float>(chunk.data(), n));
      FromFloat(std::span<const float>(chunk.data(), n), out.subspan(at, n));
    }
  }
}

}  // namespace

template <class S>
ParameterStore<S>::ParameterStore(const ParameterLayout& layout, Communicator& comm, const ZeroConfig& zero,
                                  bool partitioned, const ShardMap& shards, ScratchBuffers& scratch,
                                  DeferredStatus& deferred, const InitialValues& initial,
                                  std::unique_ptr<ParameterSwap<S>> swap)
    : layout_(layout),
      comm_(comm),
      zero_(zero),
      partitioned_(partitioned),
      shards_(shards),
      scratch_(scratch),
      deferred_(deferred),
      groups_(layout.groups().size()),
      swap_(std::move(swap)) {
  DSLAUNCH_CHECK(partitioned || swap_ == nullptr) << "parameter offload needs partitioned parameters";
  const ShardRange held = partitioned ? shards.own() : ShardRange{0, shards.numel()};
  if (swap_ == nullptr) {
    params_.resize(held.size());
    ReadInitial(initial, held.begin, std::span<S>(params_));
  }
  if (!partitioned) return;
  for (size_t g = 0; g < groups_.size(); ++g) {
    const ParameterGroup& group = layout.groups()[g];
    if (static_cast<int64_t>(group.numel) <= zero.stage3_param_persistence_threshold) {
      groups_[g].persistent.resize(group.numel);
      ReadInitial(initial, group.offset, std::span<S>(groups_[g].persistent));
    }
  }
}

template <class S>
std::span<const float> ParameterStore<S>::Acquire(int g) {
  Group& st = At(g);
  if constexpr (kIsFp32Storage<S>) {  // resident fp32 is handed out as it is
    if (!partitioned_) return {params_.data() + Info(g).offset, Info(g).numel};
    if (!st.persistent.empty()) return st.persistent;
  }
  if (!st.fetched) Fetch(g);
  ++st.refs;
  last_acquired_ = g;
  return st.live;
}

template <class S>
void ParameterStore<S>::Release(int g) {
  Group& st = At(g);
  if (st.refs == 0) return;  // resident fp32: nothing was handed out
  if (--st.refs == 0) FreeLive(st);
}

template <class S>
void ParameterStore<S>::FreeLive(Group& st) {
  live_elements_ -= st.live.size();
  scratch_.Give(std::move(st.live));
  st.fetched = false;
}

template <class S>
void ParameterStore<S>::DropPrefetched() {
  for (Group& st : groups_) {
    if (st.fetched && st.refs == 0) FreeLive(st);
    DSLAUNCH_CHECK(st.refs == 0) << "a group was acquired and not released before Step";
  }
}

template <class S>
void ParameterStore<S>::Fetch(int g) {
  Group& st = At(g);
  if (!partitioned_ || !st.persistent.empty()) {  // held whole: convert to fp32
    const size_t n = Info(g).numel;
    st.live = scratch_.Take(n);
    live_elements_ += n;
    const S* from = partitioned_ ? st.persistent.data() : params_.data() + Info(g).offset;
    ToFloat(std::span<const S>(from, n), std::span<float>(st.live));
    st.fetched = true;
    return;
  }
  const auto [first, last] = PlanGather(g);
  Gather(first, last);
}

template <class S>
std::pair<int, int> ParameterStore<S>::PlanGather(int g) const {
  const int count = static_cast<int>(groups_.size());
  const int dir = g >= last_acquired_ ? 1 : -1;  // up as in forward, down as in backward
  int first = g, last = g;
  size_t total = Info(g).numel;
  const size_t prefetch = static_cast<size_t>(std::max<int64_t>(0, zero_.stage3_prefetch_bucket_size));
  const size_t max_live = static_cast<size_t>(std::max<int64_t>(0, zero_.stage3_max_live_parameters));
  for (int h = g + dir; h >= 0 && h < count; h += dir) {
    const Group& next = groups_[static_cast<size_t>(h)];
    const size_t n = Info(h).numel;
    if (!next.persistent.empty() || next.fetched || total + n > prefetch || live_elements_ + total + n > max_live) break;
    total += n;
    (dir > 0 ? last : first) = h;
  }
  return {first, last};
}

// Groups are contiguous in the flat buffer, so the run [first, last] is one all-gather.
template <class S>
void ParameterStore<S>::Gather(int first, int last) {
  const size_t lo = Info(first).offset, hi = Info(last).offset + Info(last).numel;
  const std::string what = "parameter all-gather of groups " + Info(first).name + ".." + Info(last).name;
  Result<ConstBufferView> input = OwnedInput(lo, hi);
  if (!input.ok()) deferred_.Record(input.status().WithContext(what));
  // fp32 gathers into a transient buffer; 16-bit into the kept staging buffer, then converts.
  std::vector<float> gathered;
  S* into = nullptr;
  if constexpr (kIsFp32Storage<S>) {
    gathered = scratch_.Take(hi - lo);
    into = gathered.data();
  } else {
    if (staging_.size() < hi - lo) staging_.resize(hi - lo);
    into = staging_.data();
  }
  // After a failed read the collective still runs (with zeros), so that no rank waits for it.
  const ConstBufferView view = input.ok() ? *input : ConstView<S>(owned_staging_.data(), shards_.OwnPart(lo, hi).size());
  deferred_.Record(comm_.AllGather(view, MutableView<S>(into, hi - lo), shards_.Counts(lo, hi)).WithContext(what));
  for (int h = first; h <= last; ++h) {
    Group& hs = At(h);
    hs.live = scratch_.Take(Info(h).numel);
    ToFloat(std::span<const S>(into + (Info(h).offset - lo), Info(h).numel), std::span<float>(hs.live));
    hs.fetched = true;
    live_elements_ += Info(h).numel;
  }
  scratch_.Give(std::move(gathered));
}

template <class S>
Result<ConstBufferView> ParameterStore<S>::OwnedInput(size_t lo, size_t hi) {
  const ShardRange own = shards_.OwnPart(lo, hi);
  if (swap_ == nullptr) return ConstView<S>(params_.data() + (own.begin - shards_.own().begin), own.size());
  owned_staging_.assign(own.size(), S{});
  DSLAUNCH_RETURN_IF_ERROR(swap_->Read(lo, hi, owned_staging_));
  return ConstView<S>(owned_staging_.data(), own.size());
}

template <class S>
std::span<S> ParameterStore<S>::Owned() {
  DSLAUNCH_CHECK(swap_ == nullptr) << "the owned parameters are in the swap";
  return {params_.data() + (partitioned_ ? 0 : shards_.own().begin), shards_.own().size()};
}

template <class S>
void ParameterStore<S>::WriteOwned(size_t begin, std::span<const float> master) {
  if (swap_ != nullptr) {
    Status s = swap_->Write(begin, master);
    if (write_status_.ok() && !s.ok()) write_status_ = s.WithContext("parameter offload write");
    return;
  }
  std::span<S> to = Owned().subspan(begin, master.size());
  if constexpr (kIsFp32Storage<S>) {
    if (to.data() == master.data()) return;  // the master weights are the parameters
  }
  FromFloat(master, to);
}

template <class S>
Status ParameterStore<S>::Publish() {
  DSLAUNCH_RETURN_IF_ERROR(write_status_);
  if (partitioned_) return PublishPersistent();  // the rest stays partitioned
  if (shards_.partitioned()) return PublishWhole();
  return Status::Ok();  // every rank updated everything
}

template <class S>
Status ParameterStore<S>::PublishWhole() {
  const size_t numel = shards_.numel();
  const size_t chunk = static_cast<size_t>(std::max<int64_t>(1, zero_.allgather_bucket_size));
  for (size_t lo = 0; lo < numel; lo += chunk) {
    const size_t hi = std::min(numel, lo + chunk);
    const ShardRange own = shards_.OwnPart(lo, hi);
    DSLAUNCH_RETURN_IF_ERROR(comm_.AllGather(ConstView<S>(params_.data() + own.begin, own.size()),
                                             MutableView<S>(params_.data() + lo, hi - lo), shards_.Counts(lo, hi))
                                 .WithContext("parameter all-gather"));
  }
  return Status::Ok();
}

template <class S>
Status ParameterStore<S>::PublishPersistent() {
  for (size_t g = 0; g < groups_.size(); ++g) {
    std::vector<S>& whole = groups_[g].persistent;
    if (whole.empty()) continue;
    const size_t lo = layout_.groups()[g].offset, hi = lo + whole.size();
    const std::string what = "persistent parameter all-gather of " + layout_.groups()[g].name;
    // Persistent groups are resident in the swap: no disk read can fail here.
    DSLAUNCH_ASSIGN_OR_RETURN(const ConstBufferView input, OwnedInput(lo, hi));
    DSLAUNCH_RETURN_IF_ERROR(
        comm_.AllGather(input, MutableView<S>(whole.data(), whole.size()), shards_.Counts(lo, hi)).WithContext(what));
  }
  return Status::Ok();
}

template <class S>
size_t ParameterStore<S>::bytes() const {
  size_t n = params_.size();
  for (const Group& g : groups_) n += g.persistent.size();
  return n * sizeof(S) + (swap_ != nullptr ? swap_->resident_bytes() : 0);
}

template <class S>
size_t ParameterStore<S>::staging_bytes() const {
  return (staging_.capacity() + owned_staging_.capacity()) * sizeof(S) +
         (swap_ != nullptr ? swap_->buffer_bytes() : 0);
}

template <class S>
swap::IoStats ParameterStore<S>::io() const {
  return swap_ != nullptr ? swap_->io() : swap::IoStats{};
}

template <class S>
std::vector<std::string> ParameterStore<S>::notes() const {
  return swap_ != nullptr ? swap_->notes() : std::vector<std::string>();
}

template class ParameterStore<float>;
template class ParameterStore<Half>;
template class ParameterStore<BFloat16>;

}  // namespace dslaunch::runtime
