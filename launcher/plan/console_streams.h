// Which of the workers' output streams the launcher's console shows: torchrun's --redirects,
// --tee and --local_ranks_filter, and dslaunch's --no_tee (docs/cli.md, "Worker output").
//
// dslaunch always writes every rank's stdout and stderr to its log files; these options decide
// only what is also echoed on the console. As in torchrun, a stream is shown unless it is
// redirected, and a teed stream is shown even when it is redirected. Pure.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>

#include "common/control_messages.h"
#include "common/status.h"

namespace dslaunch::launcher {

// torchrun's Std values: a bit for stdout (1) and one for stderr (2).
enum class StdStreams : uint8_t { kNone = 0, kStdout = 1, kStderr = 2, kBoth = 3 };

// One --redirects or --tee value: the same streams for every local rank ("3"), or a list of
// LOCAL_RANK:STREAMS pairs ("0:1,1:2") where an unlisted local rank gets none (torchrun's rule).
struct StdStreamsSpec {
  StdStreams all = StdStreams::kNone;
  std::map<int, StdStreams> by_local_rank;  // the per-rank form; empty for the single value

  StdStreams For(int local_rank) const;
  bool operator==(const StdStreamsSpec&) const = default;
};

// Parses "N" (N in 0..3) or "L:N[,L:N...]" (L a local rank >= 0, each at most once). `option`
// names the option in messages: "--tee '4': expected 0 (none), 1 (stdout), 2 (stderr) or 3 (both),
// or LOCAL_RANK:N pairs such as 0:3,1:2". kInvalidArgument for anything else.
Result<StdStreamsSpec> ParseStdStreams(std::string_view option, std::string_view text);

// Whether `text` has the shape of a --tee value (digits, ':' and ',' only, starting with a
// digit), so that `--tee 3` reads 3 as the value and `--tee train.py` keeps --tee a switch.
bool LooksLikeStdStreams(std::string_view text);

// --local_ranks_filter: "0" or "0,2,5", local ranks >= 0. kInvalidArgument naming the item.
Result<std::set<int>> ParseLocalRanks(std::string_view text);

struct ConsoleStreams {
  StdStreamsSpec redirects;  // --redirects; --no_tee is every stream of every rank
  StdStreamsSpec tee;        // --tee; bare --tee is 3
  std::optional<std::set<int>> local_ranks;  // --local_ranks_filter; absent: every local rank

  // Whether a line of `stream` from the worker of `local_rank` goes to the console.
  bool Shows(int local_rank, control::Stream stream) const;
  // True when no worker's line can reach the console: then agents need not send any (the status
  // page's output pane stays empty, as with --no_tee).
  bool ShowsNothing() const;
  bool operator==(const ConsoleStreams&) const = default;
};

}  // namespace dslaunch::launcher
