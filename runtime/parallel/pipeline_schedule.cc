#include "runtime/parallel/pipeline_schedule.h"

#include <algorithm>

#include "common/check.h"
#include "common/text.h"

namespace dslaunch::runtime {
namespace {

void AddForward(std::vector<PipeInstruction>& out, int stages, int stage, int mb) {
  if (stage > 0) out.push_back({PipeOp::kRecvActivation, mb});
  out.push_back({PipeOp::kForward, mb});
  if (stage + 1 < stages) out.push_back({PipeOp::kSendActivation, mb});
}

void AddBackward(std::vector<PipeInstruction>& out, int stages, int stage, int mb) {
  if (stage + 1 < stages) out.push_back({PipeOp::kRecvGradient, mb});
  out.push_back({PipeOp::kBackward, mb});
  if (stage > 0) out.push_back({PipeOp::kSendGradient, mb});
}

}  // namespace

const char* PipeScheduleName(PipeSchedule schedule) { return schedule == PipeSchedule::kGPipe ? "gpipe" : "1f1b"; }

Result<PipeSchedule> ParsePipeSchedule(std::string_view text) {
  const std::string lower = LowerAscii(text);
  if (lower == "1f1b") return PipeSchedule::k1F1B;
  if (lower == "gpipe") return PipeSchedule::kGPipe;
  return InvalidArgumentError("'" + std::string(text) +
                              "' is not a pipeline schedule: use \"1f1b\" (one forward, one backward; the "
                              "default) or \"gpipe\" (all forwards, then all backwards)");
}

const char* PipeOpName(PipeOp op) {
  switch (op) {
    case PipeOp::kRecvActivation:
      return "rA";
    case PipeOp::kForward:
      return "F";
    case PipeOp::kSendActivation:
      return "sA";
    case PipeOp::kRecvGradient:
      return "rG";
    case PipeOp::kBackward:
      return "B";
    case PipeOp::kSendGradient:
      return "sG";
  }
  return "?";
}

std::vector<PipeInstruction> StageSchedule(PipeSchedule schedule, int stages, int stage, int micro_batches) {
  DSLAUNCH_CHECK(stages >= 1 && stage >= 0 && stage < stages && micro_batches >= 1)
      << "stage " << stage << " of " << stages << ", " << micro_batches << " micro-batches";
  std::vector<PipeInstruction> out;
  if (schedule == PipeSchedule::kGPipe) {
    for (int mb = 0; mb < micro_batches; ++mb) AddForward(out, stages, stage, mb);
    for (int mb = 0; mb < micro_batches; ++mb) AddBackward(out, stages, stage, mb);
    return out;
  }
  const int warmup = std::min(stages - stage - 1, micro_batches);
  int forward = 0, backward = 0;
  for (; forward < warmup; ++forward) AddForward(out, stages, stage, forward);
  while (forward < micro_batches) {
    AddForward(out, stages, stage, forward++);
    AddBackward(out, stages, stage, backward++);
  }
  while (backward < micro_batches) AddBackward(out, stages, stage, backward++);
  return out;
}

std::string FormatSchedule(const std::vector<PipeInstruction>& instructions) {
  std::string text;
  for (const PipeInstruction& i : instructions) {
    if (!text.empty()) text += ' ';
    text += PipeOpName(i.op) + std::to_string(i.micro_batch);
  }
  return text;
}

double BubbleFraction(int stages, int micro_batches) {
  return static_cast<double>(stages - 1) / (micro_batches + stages - 1);
}

int MicroBatchesHeld(PipeSchedule schedule, int stages, int stage, int micro_batches) {
  return schedule == PipeSchedule::kGPipe ? micro_batches : std::min(stages - stage, micro_batches);
}

int PeakMicroBatchesHeld(const std::vector<PipeInstruction>& instructions) {
  int held = 0, peak = 0;
  for (const PipeInstruction& i : instructions) {
    if (i.op == PipeOp::kForward) peak = std::max(peak, ++held);
    if (i.op == PipeOp::kBackward) --held;
  }
  return peak;
}

}  // namespace dslaunch::runtime
