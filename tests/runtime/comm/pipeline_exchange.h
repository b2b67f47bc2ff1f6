// A pipeline step's messages without the model: each rank is a stage and runs its schedule's
// instructions (runtime/parallel/pipeline_schedule.h) with Send and Recv, forwards adding 1 to what
// they received and backwards subtracting 1, on messages whose length differs per micro-batch.
// Every value received is checked against what the stages before it must have sent, so a message
// lost, reordered, cut or delivered to the wrong micro-batch fails. Under 1F1B a send that waited
// for its receiver would deadlock (docs/parallelism.md, "Schedules").
#pragma once

#include <string>
#include <vector>

#include "runtime/comm/communicator.h"
#include "runtime/parallel/pipeline_schedule.h"

namespace dslaunch::runtime::testing {

// Elements of micro-batch `mb`'s messages.
inline size_t ExchangeLength(int mb) { return 1000 + 37 * static_cast<size_t>(mb); }

inline Status RunPipelineExchange(Communicator& comm, PipeSchedule schedule, int micro_batches) {
  const int stages = comm.world_size(), stage = comm.rank();
  std::vector<std::vector<float>> activation(micro_batches), gradient(micro_batches);
  for (const PipeInstruction& in : StageSchedule(schedule, stages, stage, micro_batches)) {
    const int mb = in.micro_batch;
    const size_t n = ExchangeLength(mb);
    // What a stage holds: its input activation (forward) and the gradient of its output (backward).
    const float want_activation = static_cast<float>(mb * 1000 + stage);
    const float want_gradient = static_cast<float>(-(mb * 1000) - (stages - 1 - stage));
    auto check = [&](const std::vector<float>& got, float want, const char* what) -> Status {
      for (float v : got) {
        if (v != want) {
          return InternalError("stage " + std::to_string(stage) + " micro-batch " + std::to_string(mb) + ": " + what +
                               " " + std::to_string(v) + ", expected " + std::to_string(want));
        }
      }
      return Status::Ok();
    };
    switch (in.op) {
      case PipeOp::kRecvActivation:
        activation[mb].assign(n, 0.0f);
        DSLAUNCH_RETURN_IF_ERROR(comm.Recv(activation[mb], stage - 1));
        DSLAUNCH_RETURN_IF_ERROR(check(activation[mb], want_activation, "activation"));
        break;
      case PipeOp::kForward:
        if (stage == 0) activation[mb].assign(n, want_activation);
        for (float& v : activation[mb]) v += 1.0f;
        break;
      case PipeOp::kSendActivation:
        DSLAUNCH_RETURN_IF_ERROR(comm.Send(activation[mb], stage + 1));
        break;
      case PipeOp::kRecvGradient:
        gradient[mb].assign(n, 0.0f);
        DSLAUNCH_RETURN_IF_ERROR(comm.Recv(gradient[mb], stage + 1));
        DSLAUNCH_RETURN_IF_ERROR(check(gradient[mb], want_gradient, "gradient"));
        break;
      case PipeOp::kBackward:
        if (stage + 1 == stages) gradient[mb].assign(n, want_gradient);
        for (float& v : gradient[mb]) v -= 1.0f;
        break;
      case PipeOp::kSendGradient:
        DSLAUNCH_RETURN_IF_ERROR(comm.Send(gradient[mb], stage - 1));
        break;
    }
  }
  return comm.FlushSends();
}

}  // namespace dslaunch::runtime::testing
