#include "runtime/trainer.h"

#include <chrono>
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <memory>

#include "runtime/batch_sampler.h"
#include "runtime/engine.h"
#include "runtime/gpt_model.h"

namespace dslaunch::runtime {
namespace {

using Clock = std::chrono::steady_clock;

// Inputs and targets of the windows in `windows` (each seq_len + 1 tokens from the shard).
void FillBatch(const std::vector<uint16_t>& shard, const std::vector<int64_t>& windows, int seq_len,
               std::vector<int>& inputs, std::vector<int>& targets) {
  inputs.resize(windows.size() * seq_len);
  targets.resize(windows.size() * seq_len);
  for (size_t i = 0; i < windows.size(); ++i) {
    const size_t start = static_cast<size_t>(windows[i]) * seq_len;
    for (int k = 0; k < seq_len; ++k) {
      inputs[i * seq_len + k] = shard[start + k];
      targets[i * seq_len + k] = shard[start + k + 1];
    }
  }
}

// Text from the model: starting at `prompt` (a newline when empty), each next token drawn from
// the softmax of the last position's logits with a generator seeded by `seed`, over a window of
// at most block_size tokens.
std::string Sample(GptModel& model, ParameterAccess& access, const std::string& prompt, int count, uint64_t seed) {
  std::vector<int> context;
  for (char ch : prompt.empty() ? std::string("\n") : prompt) context.push_back(static_cast<unsigned char>(ch));
  const int block = model.config().block_size, vocab = model.config().vocab_size;
  uint64_t state = seed ^ 0x5a5a5a5a5a5a5a5aull;
  std::string out;
  std::vector<int> window, dummy_targets;
  for (int k = 0; k < count; ++k) {
    const size_t len = std::min<size_t>(context.size(), static_cast<size_t>(block));
    window.assign(context.end() - static_cast<std::ptrdiff_t>(len), context.end());
    dummy_targets.assign(len, 0);
    model.Forward(access, window.data(), dummy_targets.data(), 1, static_cast<int>(len));
    const float* logits = model.logits().data() + (len - 1) * static_cast<size_t>(vocab);
    float mx = *std::max_element(logits, logits + vocab);
    double total = 0.0;
    std::vector<double> p(static_cast<size_t>(vocab));
    for (int v = 0; v < vocab; ++v) total += p[static_cast<size_t>(v)] = std::exp(static_cast<double>(logits[v] - mx));
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    double r = static_cast<double>(state >> 11) / 9007199254740992.0 * total;
    int next = vocab - 1;
    for (int v = 0; v < vocab; ++v) {
      r -= p[static_cast<size_t>(v)];
      if (r <= 0) {
        next = v;
        break;
      }
    }
    context.push_back(next);
    out.push_back(next < 256 ? static_cast<char>(next) : '?');
  }
  return out;
}

// A JSON number; null for inf/NaN, which JSON cannot hold.
std::string JsonNumber(double v) {
  if (!std::isfinite(v)) return "null";
  char buf[40];
  std::snprintf(buf, sizeof(buf), "%.9g", v);
  return buf;
}

std::string FormatBytes(size_t bytes) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.2f MB", static_cast<double>(bytes) / 1e6);
  return buf;
}

}  // namespace

Result<TrainResult> Train(const TrainConfig& config, const TrainData& data, Communicator& comm,
                          const std::function<void(const std::string&)>& print,
                          const std::function<void(const std::string&)>& metrics) {
  auto record = [&](const std::string& json) {
    if (metrics && comm.rank() == 0) metrics(json);
  };
  const auto* gpt = std::get_if<GptModelConfig>(&config.model);
  if (gpt == nullptr) return FailedPreconditionError("model.type \"mlp\" cannot be trained by this build yet; use \"gpt\"");
  const int rank = comm.rank(), world = comm.world_size();
  const int seq_len = config.data.seq_len > 0 ? config.data.seq_len : gpt->block_size;
  const int micro = static_cast<int>(config.batch.micro_batch_per_gpu);
  const int accumulation = static_cast<int>(config.batch.gradient_accumulation_steps);
  BatchGeometry train_geometry{static_cast<int64_t>(data.train.size()), seq_len, micro, accumulation, world};
  if (train_geometry.windows() == 0) {
    return InvalidArgumentError(config.data.train + ": " + std::to_string(data.train.size()) +
                                " tokens hold no sequence of " + std::to_string(seq_len) + " + 1 tokens");
  }

  for (const auto* shard : {&data.train, &data.val}) {
    for (uint16_t t : *shard) {
      if (t >= gpt->vocab_size) {
        return InvalidArgumentError("token id " + std::to_string(t) + " in the data is outside model.vocab_size " +
                                    std::to_string(gpt->vocab_size));
      }
    }
  }
  GptModel model(GptConfig{gpt->n_layer, gpt->n_head, gpt->n_embd, gpt->block_size, gpt->vocab_size}, micro);
  std::vector<float> initial(model.layout().numel());
  model.InitParameters(initial, config.seed);
  DSLAUNCH_ASSIGN_OR_RETURN(std::unique_ptr<Engine> engine,
                            Engine::Create(model.layout(), comm, EngineOptionsFrom(config), initial));
  const MemoryStats m = engine->memory();
  record("{\"event\":\"start\",\"model\":\"gpt\",\"parameters\":" + std::to_string(model.layout().numel()) +
         ",\"flops_per_token\":" + JsonNumber(model.FlopsPerToken(seq_len)) + ",\"world_size\":" +
         std::to_string(world) + ",\"zero_stage\":" + std::to_string(config.zero.stage) + ",\"precision\":\"" +
         std::string(PrecisionName(config.precision)) + "\",\"bytes_per_rank\":{\"parameters\":" +
         std::to_string(m.parameters) + ",\"gradients\":" + std::to_string(m.gradients) +
         ",\"optimizer_state\":" + std::to_string(m.optimizer_state) + "}}");
  if (rank == 0) {
    char flops[64];
    std::snprintf(flops, sizeof(flops), "%.4g", model.FlopsPerToken(seq_len));
    print("model gpt: " + std::to_string(model.layout().numel()) + " parameters, " + flops +
          " FLOPs per token (forward + backward); per rank: parameters " +
          FormatBytes(m.parameters) + ", gradients " + FormatBytes(m.gradients) + ", optimizer state " +
          FormatBytes(m.optimizer_state) + " (ZeRO stage " + std::to_string(config.zero.stage) + ", " +
          std::string(PrecisionName(config.precision)) + ", world " + std::to_string(world) + ")");
  }

  TrainResult result;
  std::vector<int> inputs, targets;
  // Mean loss over eval_steps validation batches per rank, averaged over ranks; -1 without data.
  auto Validate = [&](int64_t after_step) -> Result<double> {
    BatchGeometry val_geometry{static_cast<int64_t>(data.val.size()), seq_len, micro, 1, world};
    if (data.val.empty() || val_geometry.windows() == 0) return -1.0;
    double sum = 0.0;
    const int64_t batches = std::max<int64_t>(1, config.train.eval_steps);
    for (int64_t i = 0; i < batches; ++i) {
      FillBatch(data.val, WindowsForMicroStep(config.seed, val_geometry, i, 0, rank), seq_len, inputs, targets);
      sum += model.Forward(engine->access(), inputs.data(), targets.data(), micro, seq_len);
    }
    DSLAUNCH_RETURN_IF_ERROR(engine->status());
    float val = static_cast<float>(sum / static_cast<double>(batches));
    DSLAUNCH_RETURN_IF_ERROR(comm.AllReduce(std::span<float>(&val, 1), ReduceOp::kAvg).WithContext("validation all-reduce"));
    if (rank == 0) {
      char line[128];
      std::snprintf(line, sizeof(line), "step %lld | validation loss %.6f (%lld batches per rank)",
                    static_cast<long long>(after_step), val, static_cast<long long>(batches));
      print(line);
    }
    record("{\"event\":\"validation\",\"step\":" + std::to_string(after_step) + ",\"val_loss\":" +
           JsonNumber(val) + "}");
    return static_cast<double>(val);
  };
  auto last_print = Clock::now();
  int64_t tokens_since_print = 0;
  for (int64_t step = 0; step < config.train.steps; ++step) {
    const auto step_start = Clock::now();
    engine->BeginStep();
    const float backward_scale = static_cast<float>(engine->loss_scale() / accumulation);
    double loss_sum = 0.0;
    for (int m = 0; m < accumulation; ++m) {
      FillBatch(data.train, WindowsForMicroStep(config.seed, train_geometry, step, m, rank), seq_len, inputs, targets);
      loss_sum += model.Forward(engine->access(), inputs.data(), targets.data(), micro, seq_len);
      model.Backward(engine->access(), backward_scale);
    }
    DSLAUNCH_ASSIGN_OR_RETURN(StepStats stats, engine->Step());
    float loss = static_cast<float>(loss_sum / accumulation);
    DSLAUNCH_RETURN_IF_ERROR(comm.AllReduce(std::span<float>(&loss, 1), ReduceOp::kAvg).WithContext("loss all-reduce"));
    result.losses.push_back(loss);
    const int64_t step_tokens = train_geometry.global_batch() * seq_len;
    tokens_since_print += step_tokens;
    const double step_seconds = std::chrono::duration<double>(Clock::now() - step_start).count();
    record("{\"event\":\"step\",\"step\":" + std::to_string(step + 1) + ",\"loss\":" + JsonNumber(loss) +
           ",\"lr\":" + JsonNumber(stats.lr) + ",\"loss_scale\":" + JsonNumber(stats.loss_scale) +
           ",\"grad_norm\":" + JsonNumber(stats.grad_norm) + ",\"skipped\":" + (stats.skipped ? "true" : "false") +
           ",\"tokens_per_s\":" + JsonNumber(static_cast<double>(step_tokens) / step_seconds) +
           ",\"ms_per_step\":" + JsonNumber(1e3 * step_seconds) + "}");
    if (rank == 0 && !stats.scale_event.empty()) print("step " + std::to_string(step + 1) + " | " + stats.scale_event);
    if (rank == 0 && ((step + 1) % config.steps_per_print == 0 || step + 1 == config.train.steps)) {
      const double seconds = std::chrono::duration<double>(Clock::now() - last_print).count();
      const int64_t steps_done = (step + 1) % config.steps_per_print == 0 ? config.steps_per_print
                                                                            : (step + 1) % config.steps_per_print;
      char line[256];
      std::snprintf(line, sizeof(line),
                    "step %lld | loss %.6f | lr %.3e | loss scale %g | grad norm %.4f | %.0f tokens/s | %.1f ms/step",
                    static_cast<long long>(step + 1), loss, stats.lr, stats.loss_scale, stats.grad_norm,
                    static_cast<double>(tokens_since_print) / seconds, 1e3 * seconds / static_cast<double>(steps_done));
      print(line);
      last_print = Clock::now();
      tokens_since_print = 0;
    }
    if (config.train.eval_interval > 0 && (step + 1) % config.train.eval_interval == 0) {
      const auto validation_start = Clock::now();
      DSLAUNCH_ASSIGN_OR_RETURN(result.val_loss, Validate(step + 1));
      last_print += Clock::now() - validation_start;  // validation time is not training time
    }
  }

  if (config.train.eval_interval <= 0 || config.train.steps % config.train.eval_interval != 0) {
    DSLAUNCH_ASSIGN_OR_RETURN(result.val_loss, Validate(config.train.steps));
  }
  if (config.train.sample_tokens > 0) {
    // Every rank samples (the same tokens): at ZeRO stage 3 each forward pass gathers parameters
    // from all ranks.
    std::string text =
        Sample(model, engine->access(), config.train.sample_prompt, config.train.sample_tokens, config.seed);
    DSLAUNCH_RETURN_IF_ERROR(engine->status());
    if (rank == 0) print("sample:\n" + text);
  }
  return result;
}

}  // namespace dslaunch::runtime
