// The order in which a pipeline stage runs its micro-batches (docs/parallelism.md, "Schedules").
// Pure: a list of instructions per stage, which the pipelined step executes in order.
//
//   kGPipe: every micro-batch's forward, then every backward (GPipe). A stage keeps the
//           activations of all m micro-batches.
//   k1F1B:  one forward, one backward (PipeDream-Flush, DeepSpeed's TrainSchedule, Megatron's
//           default): stage s runs min(p - s - 1, m) forwards first, then alternates a forward with
//           a backward, then the remaining backwards. It keeps at most p - s micro-batches'
//           activations.
// In both, backwards run in micro-batch order 0, 1, ..., m - 1, the order in which a
// data-parallel run accumulates its micro-steps, so the gradients add up in the same order.
//
// Sends are buffered (runtime/comm/communicator.h, Send): a stage never waits for its
// neighbour to take what it sent, only for what it receives. Under that rule both schedules run
// without deadlock, and with unit-time forwards and backwards of equal length the idle share of
// each stage (the bubble) is (p - 1) / (m + p - 1) (tests/runtime/parallel/pipeline_schedule_test.cc
// checks both by simulation).
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace dslaunch::runtime {

enum class PipeSchedule { k1F1B, kGPipe };

// "1f1b", "gpipe".
const char* PipeScheduleName(PipeSchedule schedule);
// The train.json value (case-insensitive); kInvalidArgument naming both otherwise.
Result<PipeSchedule> ParsePipeSchedule(std::string_view text);

enum class PipeOp {
  kRecvActivation,  // the previous stage's output for this micro-batch
  kForward,
  kSendActivation,  // this stage's output to the next stage
  kRecvGradient,    // the gradient of this stage's output, from the next stage
  kBackward,
  kSendGradient,    // the gradient of this stage's input, to the previous stage
};

const char* PipeOpName(PipeOp op);

struct PipeInstruction {
  PipeOp op = PipeOp::kForward;
  int micro_batch = 0;
  friend bool operator==(const PipeInstruction&, const PipeInstruction&) = default;
};

// Stage `stage`'s instructions for one step of `micro_batches` micro-batches over `stages` stages.
// The first stage receives nothing from before it and the last sends nothing after it (it
// computes the loss and starts the backward). Preconditions (checked): stages >= 1,
// 0 <= stage < stages, micro_batches >= 1.
std::vector<PipeInstruction> StageSchedule(PipeSchedule schedule, int stages, int stage, int micro_batches);

// "F0 F1 B0 ..." (receives and sends as r/s with their micro-batch, e.g. "rA0 F0 sA0"): for tests and
// logs.
std::string FormatSchedule(const std::vector<PipeInstruction>& instructions);

// The idle share of a stage in a pipeline of `stages` stages and `micro_batches` micro-batches
// with forwards and backwards of equal cost: (p - 1) / (m + p - 1).
double BubbleFraction(int stages, int micro_batches);

// How many micro-batches' activations the stage holds at most at once under the schedule.
int PeakMicroBatchesHeld(const std::vector<PipeInstruction>& instructions);
// The same without building the list: min(p - s, m) under 1F1B, m under GPipe.
int MicroBatchesHeld(PipeSchedule schedule, int stages, int stage, int micro_batches);

}  // namespace dslaunch::runtime
