#include "launcher/status/job_board.h"

#include <algorithm>
#include <utility>

namespace dslaunch::launcher {

void JobBoard::Publish(JobView view) {
  std::lock_guard<std::mutex> lock(mu_);
  view_ = std::move(view);
}

JobView JobBoard::View() const {
  std::lock_guard<std::mutex> lock(mu_);
  return view_;
}

void JobBoard::AppendLog(int rank, std::string line) {
  if (log_lines_per_rank_ == 0) return;
  std::lock_guard<std::mutex> lock(mu_);
  std::deque<std::string>& lines = logs_[rank];
  if (lines.size() == log_lines_per_rank_) lines.pop_front();
  lines.push_back(std::move(line));
}

std::vector<std::string> JobBoard::LogTail(int rank, size_t max_lines) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = logs_.find(rank);
  if (it == logs_.end()) return {};
  const std::deque<std::string>& lines = it->second;
  const size_t n = std::min(max_lines, lines.size());
  return std::vector<std::string>(lines.end() - static_cast<std::ptrdiff_t>(n), lines.end());
}

}  // namespace dslaunch::launcher
