#include "launcher/cli/elastic_options.h"

#include <charconv>
#include <string_view>
#include <tuple>
#include <utility>

namespace dslaunch::launcher {
namespace {

// A node count of --nnodes: a decimal integer from 1, nothing else.
std::optional<int> NodeCount(std::string_view text) {
  int value = 0;
  const char* end = text.data() + text.size();
  auto [ptr, ec] = std::from_chars(text.data(), end, value);
  if (text.empty() || ec != std::errc() || ptr != end) return std::nullopt;
  return value;
}

// torchrun's --nnodes: "N" (a fixed number of nodes) or "MIN:MAX" (an elastic range).
struct NnodesValue {
  int min_nodes = 0;
  int max_nodes = 0;
  bool range = false;
};

Result<NnodesValue> ParseNnodes(const std::string& text) {
  const std::string bad = "--nnodes '" + text + "': expected N or MIN:MAX with 1 <= MIN <= MAX (e.g. 4 or 2:4)";
  NnodesValue v;
  const size_t colon = text.find(':');
  std::optional<int> min = NodeCount(std::string_view(text).substr(0, colon));
  std::optional<int> max = colon == std::string::npos ? min : NodeCount(std::string_view(text).substr(colon + 1));
  if (!min || !max || *min < 1 || *max < *min) return InvalidArgumentError(bad);
  v.min_nodes = *min;
  v.max_nodes = *max;
  v.range = colon != std::string::npos;
  return v;
}

}  // namespace

Status ResolveElastic(const ElasticArgs& a, CliOptions& o) {
  for (auto [name, value] : {std::pair{"--min_elastic_nodes", a.min_elastic_nodes},
                             std::pair{"--max_elastic_nodes", a.max_elastic_nodes}}) {
    if (!value) continue;
    const std::string given = std::string(name) + " " + std::to_string(*value);
    if (!a.elastic_training) {
      return InvalidArgumentError(given + " needs --elastic_training (DeepSpeed ignores it without), or give the "
                                          "range as --nnodes MIN:MAX");
    }
    if (*value < 1) return InvalidArgumentError(given + ": expected a number of nodes >= 1");
  }
  if (a.min_elastic_nodes && a.max_elastic_nodes && *a.min_elastic_nodes > *a.max_elastic_nodes) {
    return InvalidArgumentError("--min_elastic_nodes " + std::to_string(*a.min_elastic_nodes) +
                                " is above --max_elastic_nodes " + std::to_string(*a.max_elastic_nodes) +
                                "; the minimum must not exceed the maximum");
  }
  std::string num_nodes_option = o.num_nodes ? "--num_nodes " + std::to_string(*o.num_nodes) : "";
  if (a.elastic_training) {
    NodeRange r;
    r.option = "--elastic_training";
    if (a.min_elastic_nodes) {
      r.min_nodes = *a.min_elastic_nodes;
      r.option += " --min_elastic_nodes " + std::to_string(r.min_nodes);
    }
    if (a.max_elastic_nodes) {
      r.max_nodes = *a.max_elastic_nodes;
      r.option += " --max_elastic_nodes " + std::to_string(*r.max_nodes);
    }
    o.elastic_nodes = r;
  }
  if (a.nnodes) {
    DSLAUNCH_ASSIGN_OR_RETURN(NnodesValue n, ParseNnodes(*a.nnodes));
    const std::string given = "--nnodes " + *a.nnodes;
    if (!n.range) {
      // torchrun's fixed node count is DeepSpeed's --num_nodes: the first N selected hosts.
      if (o.num_nodes && *o.num_nodes != n.min_nodes) {
        return InvalidArgumentError(given + " and " + num_nodes_option +
                                    " disagree: both give the number of nodes; keep one of them");
      }
      o.num_nodes = n.min_nodes;
      num_nodes_option = given;
    } else {
      for (auto [name, deepspeed, mine] : {std::tuple{"--min_elastic_nodes", a.min_elastic_nodes, n.min_nodes},
                                           std::tuple{"--max_elastic_nodes", a.max_elastic_nodes, n.max_nodes}}) {
        if (deepspeed && *deepspeed != mine) {
          return InvalidArgumentError(given + " and " + name + " " + std::to_string(*deepspeed) +
                                      " disagree: both give the range of nodes; keep one of them");
        }
      }
      o.elastic_nodes = NodeRange{n.min_nodes, n.max_nodes, given};
    }
  }
  if (o.elastic_nodes && o.num_nodes && o.elastic_nodes->min_nodes > *o.num_nodes) {
    return InvalidArgumentError(o.elastic_nodes->option + " needs at least " +
                                std::to_string(o.elastic_nodes->min_nodes) + " nodes but " + num_nodes_option +
                                " selects fewer; select more nodes or lower the minimum");
  }
  if (a.max_restarts && *a.max_restarts < 0) {
    return InvalidArgumentError("--max_restarts " + std::to_string(*a.max_restarts) +
                                ": expected a number of restarts >= 0 (0: the first failure ends the job)");
  }
  o.max_restarts = a.max_restarts.value_or(a.elastic_training ? kDeepSpeedElasticMaxRestarts : 0);
  return Status::Ok();
}

}  // namespace dslaunch::launcher
