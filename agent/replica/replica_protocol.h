// The snapshot copy protocol between two nodes' agents (docs/protocol.md, "Snapshot copies"), on
// a connection authenticated as PeerRole::kSnapshotPeer with the job's secret. Pure code:
// encoding and decoding only.
//
//   sender -> receiver  SNAPSHOT_COPY     {raw[128] slot header, u64 slot bytes}
//   sender -> receiver  the slot's bytes after its header, unframed (slot bytes - 128 of them):
//                       sent from the memory file by sendfile, received into the copy's
//                       mapping, with no copy through either agent's own buffers
//   receiver -> sender  SNAPSHOT_STORED   {i64 step, i32 rank}: the copy is whole and kept
//                    or SNAPSHOT_REFUSED  {string why}: it is not (the sender reports a failure)
//
// One copy at a time per connection; a connection carries any number of them.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "common/snapshot/slot_header.h"
#include "common/status.h"

namespace dslaunch::agent::replica {

struct CopyBegin {
  snapshot::SlotHeader header{};
  uint64_t bytes = 0;  // the whole slot, header included
};

struct CopyStored {
  int64_t step = 0;
  int32_t rank = 0;
};

std::string EncodeCopyBegin(const CopyBegin& m);
// kInvalidArgument for a payload of another size.
Result<CopyBegin> DecodeCopyBegin(std::string_view payload);
std::string EncodeCopyStored(const CopyStored& m);
Result<CopyStored> DecodeCopyStored(std::string_view payload);
std::string EncodeCopyRefused(std::string_view why);
Result<std::string> DecodeCopyRefused(std::string_view payload);

}  // namespace dslaunch::agent::replica
