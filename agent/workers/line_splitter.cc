#include "agent/workers/line_splitter.h"

#include <algorithm>

namespace dslaunch::agent {

std::vector<std::string> LineSplitter::Feed(std::string_view chunk) {
  std::vector<std::string> lines;
  while (!chunk.empty()) {
    const size_t room = kMaxLineBytes - partial_.size();
    const size_t end = chunk.find_first_of("\r\n");
    if (end == std::string_view::npos || end > room) {
      // No terminator within the limit: keep what fits, cut a piece when it is full.
      const size_t take = std::min(chunk.size(), room);
      partial_.append(chunk.substr(0, take));
      chunk.remove_prefix(take);
      if (take > 0) after_cr_ = false;
      // A full piece is cut once more bytes follow that do not end it (a line of exactly the
      // limit followed by its terminator stays one line).
      if (partial_.size() == kMaxLineBytes && !chunk.empty() && chunk[0] != '\n' && chunk[0] != '\r') {
        lines.push_back(std::move(partial_));
        partial_.clear();
      }
      continue;
    }
    partial_.append(chunk.substr(0, end));
    const char terminator = chunk[end];
    chunk.remove_prefix(end + 1);
    if (terminator == '\n') {
      if (after_cr_ && partial_.empty()) {
        lines.push_back(std::move(last_transient_));  // "text\r\n": the text stays
      } else {
        lines.push_back(std::move(partial_));
      }
      partial_.clear();
      last_transient_.clear();
      after_cr_ = false;
    } else if (!partial_.empty()) {
      last_transient_ = partial_;
      lines.push_back(std::move(partial_) + '\r');
      partial_.clear();
      after_cr_ = true;
    }
  }
  return lines;
}

std::vector<std::string> LineSplitter::Finish() {
  std::vector<std::string> lines;
  if (!partial_.empty()) lines.push_back(std::move(partial_));
  partial_.clear();
  last_transient_.clear();
  after_cr_ = false;
  return lines;
}

void TailBuffer::Add(std::string line) {
  if (capacity_ == 0) return;
  if (lines_.size() == capacity_) lines_.pop_front();
  lines_.push_back(std::move(line));
}

}  // namespace dslaunch::agent
