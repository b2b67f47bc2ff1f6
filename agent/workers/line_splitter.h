// LineSplitter: turns the byte chunks read from a worker's pipe into whole lines.
//
// Lines end at '\n'. A carriage return ends a *transient* line, the way a progress bar (ours, or
// tqdm's) redraws itself: the piece before a '\r' is returned with the '\r' kept as its last byte
// (control::IsTransientLine), as soon as the '\r' arrives. When a '\n' follows the '\r' directly ("text\r\n",
// or a bar's final state), the piece is returned again as an ordinary line, so that it stays, as
// it does on a terminal. Empty transient pieces (tqdm's leading '\r') are not returned. A line
// longer than kMaxLineBytes is cut into pieces of that size so a program that never prints a
// newline cannot make the agent buffer without bound. Finish() returns the unterminated rest at
// end of stream. Pure; not thread-safe.
#pragma once

#include <cstddef>
#include <deque>
#include <string>
#include <string_view>
#include <vector>

namespace dslaunch::agent {

// Longest line forwarded as one piece: a progress bar or a JSON record fits, a binary dump does not.
inline constexpr size_t kMaxLineBytes = 64u << 10;

class LineSplitter {
 public:
  // Appends a chunk; returns the lines it completed, in order.
  std::vector<std::string> Feed(std::string_view chunk);
  // Returns the unterminated rest (if any) as a last line and resets.
  std::vector<std::string> Finish();

 private:
  std::string partial_;
  std::string last_transient_;  // without its '\r'
  bool after_cr_ = false;       // the last byte ended a transient piece
};

// TailBuffer keeps the last `capacity` lines it was given (the stderr tail of the root-cause
// summary). Pure; not thread-safe.
class TailBuffer {
 public:
  explicit TailBuffer(size_t capacity) : capacity_(capacity) {}
  void Add(std::string line);
  std::vector<std::string> Lines() const { return {lines_.begin(), lines_.end()}; }

 private:
  size_t capacity_;
  std::deque<std::string> lines_;
};

}  // namespace dslaunch::agent
