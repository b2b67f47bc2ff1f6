#include "common/job_id.h"

#include <string>

namespace dslaunch {
namespace {

constexpr char kRule[] =
    "a job id is 1 to 128 characters from A-Z a-z 0-9 '.' '_' '-', starting with a letter or digit";

bool IsAlnum(char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }

// The id as it may be shown: control bytes and overlong ids would garble the message.
std::string Printable(std::string_view id) {
  constexpr std::size_t kShown = 40;
  std::string out;
  for (char c : id.substr(0, kShown)) out += (c >= 0x20 && c < 0x7f) ? c : '?';
  if (id.size() > kShown) out += "...";
  return out;
}

}  // namespace

Status ValidateJobId(std::string_view id) {
  const std::string quoted = "job id '" + Printable(id) + "'";
  if (id.empty()) return InvalidArgumentError(std::string("empty job id: ") + kRule);
  if (id.size() > kMaxJobIdLength) {
    return InvalidArgumentError(quoted + " has " + std::to_string(id.size()) + " characters: " + kRule);
  }
  if (id == "." || id == "..") {
    return InvalidArgumentError(quoted + " names a directory of its own: " + kRule);
  }
  for (char c : id) {
    if (!IsAlnum(c) && c != '.' && c != '_' && c != '-') {
      std::string shown = (c >= 0x20 && c < 0x7f) ? std::string("'") + c + "'"
                                                  : "byte " + std::to_string(static_cast<unsigned char>(c));
      return InvalidArgumentError(quoted + ": " + shown + " is not allowed (" + kRule + ")");
    }
  }
  if (!IsAlnum(id.front())) {
    return InvalidArgumentError(quoted + " starts with '" + std::string(1, id.front()) + "': " + kRule);
  }
  return Status::Ok();
}

}  // namespace dslaunch
