#include "common/endpoint/handshake_admission.h"

#include "common/check.h"

namespace dslaunch {

Admission HandshakeAdmission::Admit(const std::string& address) {
  auto it = per_address_.find(address);
  const size_t mine = it == per_address_.end() ? 0 : it->second;
  if (mine >= limits_.per_address) return Admission::kAddressFull;
  if (total_ >= limits_.total) return Admission::kTotalFull;
  ++total_;
  if (it == per_address_.end()) {
    per_address_.emplace(address, 1);
  } else {
    ++it->second;
  }
  return Admission::kAdmitted;
}

void HandshakeAdmission::Release(const std::string& address) {
  auto it = per_address_.find(address);
  DSLAUNCH_CHECK(it != per_address_.end() && total_ > 0) << "release of " << address
                                                         << " without an admission";
  --total_;
  if (--it->second == 0) per_address_.erase(it);
}

size_t HandshakeAdmission::from(const std::string& address) const {
  auto it = per_address_.find(address);
  return it == per_address_.end() ? 0 : it->second;
}

std::string DescribeRefusal(Admission a, const HandshakeLimits& limits) {
  switch (a) {
    case Admission::kAddressFull:
      return std::to_string(limits.per_address) +
             " connections from this address are in their handshake already";
    case Admission::kTotalFull:
      return std::to_string(limits.total) + " connections are in their handshake already";
    case Admission::kAdmitted: break;
  }
  DSLAUNCH_CHECK(false) << "DescribeRefusal of an admitted connection";
  return "";
}

}  // namespace dslaunch
