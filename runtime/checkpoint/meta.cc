#include "runtime/checkpoint/meta.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include <nlohmann/json.hpp>

#include "common/check.h"
#include "common/crc32c.h"
#include "runtime/checkpoint/names.h"
#include "runtime/engine/engine_options.h"

namespace dslaunch::runtime {

std::vector<CheckpointParameter> CheckpointParametersOf(const ParameterLayout& layout) {
  std::vector<CheckpointParameter> parameters;
  for (const ParameterGroup& g : layout.groups()) {
    for (const TensorInfo& t : g.tensors) {
      parameters.push_back({t.name, std::vector<int64_t>(t.shape.begin(), t.shape.end()), t.offset, t.numel});
    }
  }
  return parameters;
}

uint64_t CheckpointPartition::elements() const {
  if (pieces.empty()) return end - begin;
  uint64_t n = 0;
  for (const WholePiece& p : pieces) n += p.numel();
  return n;
}

namespace {

using Json = nlohmann::json;

// Typed access to meta.json with errors that name the file and the JSON path.
class Reader {
 public:
  explicit Reader(std::string path) : path_(std::move(path)) {}

  template <class T>
  Status Get(const Json& object, const std::string& at, const char* key, T* out) const {
    const std::string where = at + "." + key;
    auto it = object.find(key);
    if (it == object.end()) return Error(where, "missing");
    if constexpr (std::is_same_v<T, std::string>) {
      if (!it->is_string()) return Error(where, "must be a string");
    } else if constexpr (std::is_same_v<T, double>) {
      if (!it->is_number()) return Error(where, "must be a number");
    } else if constexpr (std::is_unsigned_v<T>) {
      if (!it->is_number_unsigned()) return Error(where, "must be a non-negative integer");
    } else {
      if (!it->is_number_integer()) return Error(where, "must be an integer");
      if (it->is_number_unsigned() ? it->template get<uint64_t>() > static_cast<uint64_t>(std::numeric_limits<T>::max())
                                   : (it->template get<int64_t>() < std::numeric_limits<T>::min() ||
                                      it->template get<int64_t>() > std::numeric_limits<T>::max())) {
        return Error(where, "is out of range");
      }
    }
    *out = it->get<T>();
    return Status::Ok();
  }
  Result<const Json*> Array(const Json& object, const std::string& at, const char* key) const {
    auto it = object.find(key);
    if (it == object.end() || !it->is_array()) return Error(at + "." + key, "must be an array");
    return &*it;
  }
  Status Error(const std::string& where, const std::string& what) const {
    return DataLossError(path_ + ": " + where + " " + what);
  }

 private:
  std::string path_;
};

// A version 2 partition's `elements` and `pieces`: each piece [begin, stride, run, count] within
// [0, numel), its runs apart (stride >= run) and stride 0 for a single run; the runs so far in
// *runs, at most kMaxCheckpointRuns.
Status ReadPieces(const Reader& r, const Json& p, const std::string& at, uint64_t numel, uint64_t* runs,
                  CheckpointPartition* cp) {
  uint64_t elements = 0;
  DSLAUNCH_RETURN_IF_ERROR(r.Get(p, at, "elements", &elements));
  DSLAUNCH_ASSIGN_OR_RETURN(const Json* pieces, r.Array(p, at, "pieces"));
  uint64_t sum = 0;
  for (size_t k = 0; k < pieces->size(); ++k) {
    const std::string where = at + ".pieces[" + std::to_string(k) + "]";
    const Json& q = (*pieces)[k];
    bool numbers = q.is_array() && q.size() == 4;
    for (size_t f = 0; numbers && f < 4; ++f) numbers = q[f].is_number_unsigned();
    if (!numbers) return r.Error(where, "must be [begin, stride, run, count], non-negative integers");
    const WholePiece piece{q[0].get<uint64_t>(), q[1].get<uint64_t>(), q[2].get<uint64_t>(), q[3].get<uint64_t>()};
    const bool shaped = piece.run >= 1 && piece.count >= 1 && (piece.count == 1 ? piece.stride == 0 : piece.stride >= piece.run);
    if (!shaped) return r.Error(where, "must have run and count of at least 1, and stride 0 for one run, else >= run");
    // Its last element, compared without overflow: (count - 1) x stride + run <= numel - begin.
    const uint64_t room = piece.begin <= numel ? numel - piece.begin : 0;
    // (count x run <= numel too, so that numel() cannot overflow.)
    const bool inside = piece.run <= room && piece.count <= numel / piece.run &&
                        (piece.count == 1 || (piece.count - 1) <= (room - piece.run) / piece.stride);
    if (!inside) return r.Error(where, "ends past $.numel " + std::to_string(numel));
    if (piece.count > kMaxCheckpointRuns - *runs) {
      return r.Error(where, "brings the runs past " + std::to_string(kMaxCheckpointRuns) + ": not a checkpoint");
    }
    if (piece.numel() > numel - sum) return r.Error(at + ".pieces", "hold more than $.numel elements");
    *runs += piece.count;
    sum += piece.numel();
    cp->pieces.push_back(piece);
  }
  if (sum != elements) {
    return r.Error(at + ".elements", "is " + std::to_string(elements) + ", but the pieces hold " + std::to_string(sum));
  }
  return Status::Ok();
}

// Version 2: the partitions' runs together hold every element of [0, numel) once.
Status CheckPiecesCover(const Reader& r, const CheckpointMeta& m) {
  std::vector<std::pair<uint64_t, uint64_t>> runs;  // begin, end
  for (const CheckpointPartition& p : m.partitions) {
    ForEachRun(p.pieces, [&](uint64_t begin, uint64_t count) { runs.emplace_back(begin, begin + count); });
  }
  std::sort(runs.begin(), runs.end());
  uint64_t at = 0;
  for (const auto& [begin, end] : runs) {
    if (begin != at) {
      return r.Error("$.partitions", begin > at ? "leave elements [" + std::to_string(at) + ", " +
                                                      std::to_string(begin) + ") out"
                                                : "hold element " + std::to_string(begin) + " twice");
    }
    at = end;
  }
  if (at != m.numel) {
    return r.Error("$.partitions", "leave elements [" + std::to_string(at) + ", " + std::to_string(m.numel) + ") out");
  }
  return Status::Ok();
}

}  // namespace

std::map<std::string, std::string> ShardHeaderOf(int64_t step, int world, const CheckpointPartition& part) {
  std::map<std::string, std::string> header = {
      {"step", std::to_string(step)}, {"rank", std::to_string(part.rank)}, {"world_size", std::to_string(world)}};
  if (part.pieces.empty()) {
    header["begin"] = std::to_string(part.begin);
    header["end"] = std::to_string(part.end);
  } else {
    header["elements"] = std::to_string(part.elements());
  }
  return header;
}

std::string CheckpointMetaToJson(const CheckpointMeta& m) {
  Json j;
  const bool grid = !m.grid.trivial();
  j["format"] = kCheckpointFormatName;
  j["version"] = grid ? kCheckpointFormatVersion : kCheckpointFormatVersionWithoutGrid;
  j["step"] = m.step;
  j["applied_steps"] = m.applied_steps;
  j["optimizer_step"] = m.optimizer_step;
  j["world_size"] = m.world_size;
  if (grid) {
    j["grid"] = {{"pipeline", m.grid.pipeline},
                 {"data", m.grid.data(m.world_size)},
                 {"tensor", m.grid.tensor}};
  }
  j["zero_stage"] = m.zero_stage;
  j["precision"] = m.precision;
  j["model"] = m.model;
  j["optimizer"] = m.optimizer;
  j["numel"] = m.numel;
  j["global_batch"] = m.global_batch;
  j["samples_seen"] = m.step * m.global_batch;
  j["seed"] = m.seed;
  j["state_tensors"] = m.state_tensors;
  j["state_dtype"] = "F32";
  Json params = Json::array();
  for (const auto& p : m.parameters) {
    params.push_back({{"name", p.name}, {"shape", p.shape}, {"offset", p.offset}, {"numel", p.numel}});
  }
  j["parameters"] = std::move(params);
  Json parts = Json::array();
  for (const auto& p : m.partitions) {
    Json part = {{"rank", p.rank}, {"file", p.file}, {"bytes", p.bytes}, {"crc32c", Crc32cText(p.crc32c)}};
    if (grid) {
      part["elements"] = p.elements();
      Json pieces = Json::array();
      for (const WholePiece& piece : p.pieces) pieces.push_back({piece.begin, piece.stride, piece.run, piece.count});
      part["pieces"] = std::move(pieces);
    } else {
      DSLAUNCH_CHECK(p.pieces.empty()) << "pieces in a checkpoint without a grid";
      part["begin"] = p.begin;
      part["end"] = p.end;
    }
    parts.push_back(std::move(part));
  }
  j["partitions"] = std::move(parts);
  j["loss_scaler"] = {{"scale", m.loss_scaler.scale},
                      {"iteration", m.loss_scaler.iteration},
                      {"last_overflow_iteration", m.loss_scaler.last_overflow_iteration},
                      {"hysteresis_left", m.loss_scaler.hysteresis_left}};
  // The LR schedule is a pure function of the applied steps (DeepSpeed's last_batch_iteration).
  j["lr_scheduler"] = {{"last_batch_iteration", m.applied_steps - 1}};
  // Nothing random is stateful: sample order and initialisation derive from the seed.
  j["rng"] = {{"seed", m.seed}};
  j["config_sha256"] = m.config_sha256;
  return j.dump(1) + "\n";
}

Result<CheckpointMeta> CheckpointMetaFromJson(const std::string& text, const std::string& path) {
  Json j = Json::parse(text, nullptr, /*allow_exceptions=*/false);
  Reader r(path);
  if (j.is_discarded() || !j.is_object()) return r.Error("$", "is not a JSON object (truncated or corrupt?)");
  CheckpointMeta m;
  std::string format;
  DSLAUNCH_RETURN_IF_ERROR(r.Get(j, "$", "format", &format));
  if (format != kCheckpointFormatName) return r.Error("$.format", "is \"" + format + "\", not a dslaunch checkpoint");
  DSLAUNCH_RETURN_IF_ERROR(r.Get(j, "$", "version", &m.version));
  if (m.version != kCheckpointFormatVersion && m.version != kCheckpointFormatVersionWithoutGrid) {
    return r.Error("$.version", std::to_string(m.version) + " is not supported by this build (it reads versions " +
                                    std::to_string(kCheckpointFormatVersionWithoutGrid) + " and " +
                                    std::to_string(kCheckpointFormatVersion) + ")");
  }
  const bool grid = m.version == kCheckpointFormatVersion;
  DSLAUNCH_RETURN_IF_ERROR(r.Get(j, "$", "step", &m.step));
  DSLAUNCH_RETURN_IF_ERROR(r.Get(j, "$", "applied_steps", &m.applied_steps));
  DSLAUNCH_RETURN_IF_ERROR(r.Get(j, "$", "optimizer_step", &m.optimizer_step));
  DSLAUNCH_RETURN_IF_ERROR(r.Get(j, "$", "world_size", &m.world_size));
  DSLAUNCH_RETURN_IF_ERROR(r.Get(j, "$", "zero_stage", &m.zero_stage));
  DSLAUNCH_RETURN_IF_ERROR(r.Get(j, "$", "precision", &m.precision));
  DSLAUNCH_RETURN_IF_ERROR(r.Get(j, "$", "model", &m.model));
  DSLAUNCH_RETURN_IF_ERROR(r.Get(j, "$", "optimizer", &m.optimizer));
  DSLAUNCH_RETURN_IF_ERROR(r.Get(j, "$", "numel", &m.numel));
  DSLAUNCH_RETURN_IF_ERROR(r.Get(j, "$", "global_batch", &m.global_batch));
  DSLAUNCH_RETURN_IF_ERROR(r.Get(j, "$", "seed", &m.seed));
  DSLAUNCH_RETURN_IF_ERROR(r.Get(j, "$", "config_sha256", &m.config_sha256));
  if (m.world_size < 1) return r.Error("$.world_size", "must be at least 1");
  if (grid) {
    auto g = j.find("grid");
    if (g == j.end() || !g->is_object()) return r.Error("$.grid", "must be an object");
    int data = 0;
    DSLAUNCH_RETURN_IF_ERROR(r.Get(*g, "$.grid", "pipeline", &m.grid.pipeline));
    DSLAUNCH_RETURN_IF_ERROR(r.Get(*g, "$.grid", "data", &data));
    DSLAUNCH_RETURN_IF_ERROR(r.Get(*g, "$.grid", "tensor", &m.grid.tensor));
    auto size = [&](int n) { return n >= 1 && n <= m.world_size; };  // then the product fits int64
    if (!size(m.grid.pipeline) || !size(data) || !size(m.grid.tensor) ||
        static_cast<int64_t>(m.grid.pipeline) * data * m.grid.tensor != m.world_size) {
      return r.Error("$.grid", "must be three sizes of at least 1 whose product is $.world_size " +
                                   std::to_string(m.world_size));
    }
  }
  if (m.step < 0) return r.Error("$.step", "must not be negative");
  if (m.applied_steps < 0 || m.applied_steps > m.step) {
    return r.Error("$.applied_steps", "must be between 0 and $.step");
  }
  // Adam's t counts applied updates, never more than the steps.
  if (m.optimizer_step < 0 || m.optimizer_step > m.step) {
    return r.Error("$.optimizer_step", "must be between 0 and $.step");
  }
  if (m.zero_stage < 0 || m.zero_stage > kMaxZeroStage) return r.Error("$.zero_stage", "must be 0, 1, 2 or 3");

  DSLAUNCH_ASSIGN_OR_RETURN(const Json* names, r.Array(j, "$", "state_tensors"));
  for (size_t i = 0; i < names->size(); ++i) {
    if (!(*names)[i].is_string()) return r.Error("$.state_tensors[" + std::to_string(i) + "]", "must be a string");
    m.state_tensors.push_back((*names)[i].get<std::string>());
  }
  DSLAUNCH_ASSIGN_OR_RETURN(const Json* params, r.Array(j, "$", "parameters"));
  for (size_t i = 0; i < params->size(); ++i) {
    const std::string at = "$.parameters[" + std::to_string(i) + "]";
    const Json& p = (*params)[i];
    CheckpointParameter cp;
    DSLAUNCH_RETURN_IF_ERROR(r.Get(p, at, "name", &cp.name));
    DSLAUNCH_RETURN_IF_ERROR(r.Get(p, at, "offset", &cp.offset));
    DSLAUNCH_RETURN_IF_ERROR(r.Get(p, at, "numel", &cp.numel));
    DSLAUNCH_ASSIGN_OR_RETURN(const Json* shape, r.Array(p, at, "shape"));
    // The shape's element count, stopped past numel so that it cannot overflow.
    uint64_t elements = 1;
    for (const auto& d : *shape) {
      if (!d.is_number_integer() || d.get<int64_t>() < 0) return r.Error(at + ".shape", "must hold non-negative integers");
      cp.shape.push_back(d.get<int64_t>());
      const uint64_t dim = static_cast<uint64_t>(cp.shape.back());
      elements = dim != 0 && elements > m.numel / dim ? m.numel + 1 : elements * dim;
    }
    if (elements != cp.numel) {
      return r.Error(at + ".numel", "is " + std::to_string(cp.numel) + ", but its shape holds " +
                                        (elements > m.numel ? "more than $.numel" : std::to_string(elements)) +
                                        " elements");
    }
    if (cp.offset > m.numel || cp.numel > m.numel - cp.offset) {
      return r.Error(at, "ends past $.numel " + std::to_string(m.numel) + " (offset " + std::to_string(cp.offset) +
                             ", numel " + std::to_string(cp.numel) + ")");
    }
    m.parameters.push_back(std::move(cp));
  }
  DSLAUNCH_ASSIGN_OR_RETURN(const Json* parts, r.Array(j, "$", "partitions"));
  uint64_t covered = 0;  // version 1: the end of the partitions so far
  uint64_t runs = 0;     // version 2: of the pieces so far
  for (size_t i = 0; i < parts->size(); ++i) {
    const std::string at = "$.partitions[" + std::to_string(i) + "]";
    const Json& p = (*parts)[i];
    CheckpointPartition cp;
    std::string crc;
    DSLAUNCH_RETURN_IF_ERROR(r.Get(p, at, "rank", &cp.rank));
    if (grid) {
      DSLAUNCH_RETURN_IF_ERROR(ReadPieces(r, p, at, m.numel, &runs, &cp));
      if (cp.rank != static_cast<int>(i)) {
        return r.Error(at, "is rank " + std::to_string(cp.rank) + "'s: the partitions must be in rank order");
      }
    } else {
      DSLAUNCH_RETURN_IF_ERROR(r.Get(p, at, "begin", &cp.begin));
      DSLAUNCH_RETURN_IF_ERROR(r.Get(p, at, "end", &cp.end));
    }
    DSLAUNCH_RETURN_IF_ERROR(r.Get(p, at, "file", &cp.file));
    DSLAUNCH_RETURN_IF_ERROR(r.Get(p, at, "bytes", &cp.bytes));
    DSLAUNCH_RETURN_IF_ERROR(r.Get(p, at, "crc32c", &crc));
    if (!grid && (cp.rank != static_cast<int>(i) || cp.begin != covered || cp.end < cp.begin)) {
      return r.Error(at, "does not continue the partitions in rank order (rank " + std::to_string(cp.rank) +
                             ", [" + std::to_string(cp.begin) + ", " + std::to_string(cp.end) + "))");
    }
    if (crc.size() != 8 || crc.find_first_not_of("0123456789abcdef") != std::string::npos) {
      return r.Error(at + ".crc32c", "must be 8 lower-case hex digits");
    }
    cp.crc32c = static_cast<uint32_t>(std::stoul(crc, nullptr, 16));
    if (cp.file.empty() || cp.file.find('/') != std::string::npos) return r.Error(at + ".file", "must be a file name");
    if (cp.file != ShardFileName(cp.rank)) {
      return r.Error(at + ".file", "is \"" + cp.file + "\", not rank " + std::to_string(cp.rank) + "'s shard " +
                                       ShardFileName(cp.rank));
    }
    covered = cp.end;
    m.partitions.push_back(std::move(cp));
  }
  if (grid) {
    if (static_cast<int>(m.partitions.size()) != m.world_size) {
      return r.Error("$.partitions", "must be " + std::to_string(m.world_size) + " partitions, one per rank");
    }
    DSLAUNCH_RETURN_IF_ERROR(CheckPiecesCover(r, m));
  } else if (static_cast<int>(m.partitions.size()) != m.world_size || covered != m.numel) {
    return r.Error("$.partitions", "must be " + std::to_string(m.world_size) + " partitions covering [0, " +
                                       std::to_string(m.numel) + ")");
  }
  auto scaler = j.find("loss_scaler");
  if (scaler == j.end() || !scaler->is_object()) return r.Error("$.loss_scaler", "must be an object");
  DSLAUNCH_RETURN_IF_ERROR(r.Get(*scaler, "$.loss_scaler", "scale", &m.loss_scaler.scale));
  DSLAUNCH_RETURN_IF_ERROR(r.Get(*scaler, "$.loss_scaler", "iteration", &m.loss_scaler.iteration));
  DSLAUNCH_RETURN_IF_ERROR(
      r.Get(*scaler, "$.loss_scaler", "last_overflow_iteration", &m.loss_scaler.last_overflow_iteration));
  DSLAUNCH_RETURN_IF_ERROR(r.Get(*scaler, "$.loss_scaler", "hysteresis_left", &m.loss_scaler.hysteresis_left));
  if (!std::isfinite(m.loss_scaler.scale) || m.loss_scaler.scale <= 0.0) {
    return r.Error("$.loss_scaler.scale", "must be a positive finite number");
  }
  return m;
}

}  // namespace dslaunch::runtime
