// LineCutter: a byte stream (an agent's, srun's) cut into lines without their '\n'. A line longer
// than the cutter's limit comes out in pieces of that size, so that a runaway writer cannot make
// the launcher hold an unbounded line. Pure; not thread-safe.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <utility>

namespace dslaunch::launcher {

class LineCutter {
 public:
  explicit LineCutter(size_t max_line) : max_line_(max_line) {}

  // Calls emit(std::string) for every line completed by `bytes`.
  template <typename Emit>
  void Feed(std::string_view bytes, const Emit& emit) {
    for (char c : bytes) {
      if (c == '\n') {
        emit(std::exchange(partial_, {}));
        continue;
      }
      partial_ += c;
      if (partial_.size() >= max_line_) emit(std::exchange(partial_, {}));
    }
  }
  // At the end of the stream: the last line, if it had no '\n'.
  template <typename Emit>
  void Finish(const Emit& emit) {
    if (!partial_.empty()) emit(std::exchange(partial_, {}));
  }

 private:
  size_t max_line_;
  std::string partial_;
};

}  // namespace dslaunch::launcher
