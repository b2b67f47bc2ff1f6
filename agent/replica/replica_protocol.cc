#include "agent/replica/replica_protocol.h"

#include <cstring>

#include "common/wire.h"

namespace dslaunch::agent::replica {

using wire::ByteReader;
using wire::ByteWriter;

std::string EncodeCopyBegin(const CopyBegin& m) {
  std::string header(sizeof(m.header), '\0');
  std::memcpy(header.data(), &m.header, sizeof(m.header));
  ByteWriter w;
  w.Raw(header).U64(m.bytes);
  return w.Take();
}

Result<CopyBegin> DecodeCopyBegin(std::string_view payload) {
  ByteReader r(payload);
  std::string header;
  CopyBegin m;
  if (!r.Raw(sizeof(m.header), header) || !r.U64(m.bytes) || !r.Finished()) {
    return InvalidArgumentError("malformed SNAPSHOT_COPY (" + std::to_string(payload.size()) + " bytes)");
  }
  std::memcpy(&m.header, header.data(), sizeof(m.header));
  return m;
}

std::string EncodeCopyStored(const CopyStored& m) {
  ByteWriter w;
  w.I64(m.step).I32(m.rank);
  return w.Take();
}

Result<CopyStored> DecodeCopyStored(std::string_view payload) {
  ByteReader r(payload);
  CopyStored m;
  if (!r.I64(m.step) || !r.I32(m.rank) || !r.Finished()) {
    return InvalidArgumentError("malformed SNAPSHOT_STORED (" + std::to_string(payload.size()) + " bytes)");
  }
  return m;
}

std::string EncodeCopyRefused(std::string_view why) {
  ByteWriter w;
  w.String(why);
  return w.Take();
}

Result<std::string> DecodeCopyRefused(std::string_view payload) {
  ByteReader r(payload);
  std::string why;
  if (!r.String(why) || !r.Finished()) {
    return InvalidArgumentError("malformed SNAPSHOT_REFUSED (" + std::to_string(payload.size()) + " bytes)");
  }
  return why;
}

}  // namespace dslaunch::agent::replica
