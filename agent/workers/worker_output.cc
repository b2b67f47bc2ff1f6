#include "agent/workers/worker_output.h"

#include <utility>

namespace dslaunch::agent {

WorkerOutput::WorkerOutput(int generation, int rank, bool tee, LogWriter out, LogWriter err)
    : generation_(generation), rank_(rank), tee_(tee) {
  out_.log = std::move(out);
  err_.log = std::move(err);
}

std::vector<control::Message> WorkerOutput::Feed(control::Stream stream, std::string_view bytes) {
  std::vector<control::Message> messages;
  Deliver(stream, Of(stream).splitter.Feed(bytes), messages);
  return messages;
}

std::vector<control::Message> WorkerOutput::Close(control::Stream stream) {
  std::vector<control::Message> messages;
  Stream& s = Of(stream);
  if (s.closed) return messages;
  s.closed = true;
  Deliver(stream, s.splitter.Finish(), messages);
  if (s.log.lost()) messages.push_back(Lost(stream, /*final=*/true));
  return messages;
}

void WorkerOutput::Deliver(control::Stream stream, std::vector<std::string> lines,
                           std::vector<control::Message>& messages) {
  if (lines.empty()) return;
  std::string block;
  for (const auto& l : lines) {
    if (control::IsTransientLine(l)) continue;  // progress redraws go to the console, not into the record
    block += l;
    block += '\n';
  }
  // The launcher hears of the first failed write of each file (it tells the user at once and
  // again at the end), and of the totals when the stream closes.
  if (!block.empty() && Of(stream).log.Append(block).has_value()) messages.push_back(Lost(stream, /*final=*/false));
  if (stream == control::Stream::kStderr) {
    for (const auto& l : lines) {
      if (!control::IsTransientLine(l)) err_tail_.Add(l);
    }
  }
  if (tee_) messages.push_back(control::Output{generation_, rank_, stream, std::move(lines)});
}

control::OutputLost WorkerOutput::Lost(control::Stream stream, bool final) const {
  const LogWriter& log = Of(stream).log;
  return control::OutputLost{generation_, rank_, stream, log.path(), log.first_error(),
                             log.lost_bytes(), log.lost_lines(), final};
}

}  // namespace dslaunch::agent
