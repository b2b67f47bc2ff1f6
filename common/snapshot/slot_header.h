// The header of an in-memory snapshot slot (docs/checkpoint.md, "Snapshots in memory"): one fact
// shared by the three programs that touch a slot. The worker writes it
// (runtime/checkpoint/memory_snapshot.h); its node's agent reads it to send a completed slot to
// peer nodes and then writes `acked` (agent/replica/); a peer's agent checks a copy on arrival
// before it keeps it. Pure code.
//
//   offset  0  magic "DSLSNAP2"            56  replicas: peer nodes that should hold a copy
//           8  complete (1: whole)         60  (reserved)
//          12  tensors                     64  acked: written by the agent (below)
//          16  step                        72  (reserved, to 128)
//          24  rank, 28 world
//          32  meta.json bytes, 40 floats per tensor
//          48  CRC-32C of everything after the header, 52 generation (the restart count)
//
// After the header: meta.json's text, zero-padded to 64 bytes, then each tensor's floats.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "common/status.h"

namespace dslaunch::snapshot {

inline constexpr char kMagic[8] = {'D', 'S', 'L', 'S', 'N', 'A', 'P', '2'};
inline constexpr size_t kHeaderBytes = 128;
inline constexpr size_t kAlign = 64;  // the tensors start on a cache line
// checkpoint.snapshot_replicas' bound: peer nodes one snapshot is copied to.
inline constexpr int kMaxReplicas = 3;

struct SlotHeader {
  char magic[8];
  uint32_t complete;  // 1 once everything after the header is written and checksummed
  uint32_t tensors;
  int64_t step;
  int32_t rank;
  int32_t world;
  uint64_t meta_bytes;
  uint64_t floats_per_tensor;
  uint32_t crc32c;     // of the meta text and the tensors, as laid out
  int32_t generation;  // the restart count of the run that wrote it
  int32_t replicas;    // peer nodes its agent copies it to (0: none)
  uint32_t reserved0;
  int64_t acked;  // the agent's answer about this content (AckOf); the worker writes kNotAcked
  uint8_t reserved[56];
};
static_assert(sizeof(SlotHeader) == kHeaderBytes);
inline constexpr size_t kCompleteOffset = 8;
inline constexpr size_t kAckedOffset = 64;
static_assert(offsetof(SlotHeader, complete) == kCompleteOffset);
static_assert(offsetof(SlotHeader, acked) == kAckedOffset);

// `acked`: kNotAcked until the agent has an answer for the step the header holds; then the step
// itself once every peer stored its copy, or FailedAck(step) when a copy could not be made.
inline constexpr int64_t kNotAcked = -1;
inline int64_t FailedAck(int64_t step) { return -2 - step; }
enum class Ack { kPending, kStored, kFailed };
Ack AckOf(int64_t acked, int64_t step);

inline size_t AlignUp(size_t n) { return (n + kAlign - 1) / kAlign * kAlign; }
inline size_t TensorsOffset(uint64_t meta_bytes) { return kHeaderBytes + AlignUp(meta_bytes); }

// Checks a complete slot's header against the slot's `size` in bytes: its magic and that its
// sizes add up to `size`. kNotFound when it is not complete; kDataLoss naming `where` otherwise.
// The CRC-32C is the caller's to check (it reads every byte).
Status CheckHeader(const SlotHeader& h, size_t size, std::string_view where);

// "step 12 of rank 3 (of 4)", for messages.
std::string Describe(const SlotHeader& h);

}  // namespace dslaunch::snapshot
