// torchrun's --redirects/--tee values and --local_ranks_filter (docs/cli.md, "Worker output").
#include "launcher/plan/console_streams.h"

#include <doctest/doctest.h>

namespace dslaunch::launcher {
namespace {

using control::Stream;

TEST_CASE("ParseStdStreams reads torchrun's single value and its per-rank form") {
  for (auto [text, streams] : {std::pair{"0", StdStreams::kNone}, {"1", StdStreams::kStdout},
                               {"2", StdStreams::kStderr}, {"3", StdStreams::kBoth}}) {
    CAPTURE(text);
    auto s = ParseStdStreams("--tee", text);
    REQUIRE(s.ok());
    CHECK(s->all == streams);
    CHECK(s->by_local_rank.empty());
    CHECK(s->For(0) == streams);
    CHECK(s->For(7) == streams);
  }
  auto per_rank = ParseStdStreams("--redirects", "0:1,1:2,4:3");
  REQUIRE(per_rank.ok());
  CHECK(per_rank->by_local_rank == std::map<int, StdStreams>{{0, StdStreams::kStdout}, {1, StdStreams::kStderr},
                                                             {4, StdStreams::kBoth}});
  CHECK(per_rank->For(0) == StdStreams::kStdout);
  CHECK(per_rank->For(1) == StdStreams::kStderr);
  CHECK(per_rank->For(4) == StdStreams::kBoth);
  // A local rank the list leaves out gets none, as in torchrun.
  CHECK(per_rank->For(2) == StdStreams::kNone);
}

TEST_CASE("ParseStdStreams refuses anything else, saying what a value looks like") {
  const std::string form =
      "expected 0 (none), 1 (stdout), 2 (stderr) or 3 (both), or LOCAL_RANK:N pairs such as 0:3,1:2";
  struct Case {
    const char* text;
    std::string error;
  };
  for (const Case& c : {Case{"4", "--tee '4': " + form}, Case{"", "--tee '': " + form},
                        Case{"-1", "--tee '-1': " + form}, Case{"both", "--tee 'both': " + form},
                        Case{"0:4", "--tee '0:4': " + form + " (at '0:4')"},
                        Case{"0:1,", "--tee '0:1,': " + form + " (at '')"},
                        Case{"x:1", "--tee 'x:1': " + form + " (at 'x:1')"},
                        Case{"0:1,0:2", "--tee '0:1,0:2': local rank 0 is given twice"}}) {
    CAPTURE(c.text);
    auto s = ParseStdStreams("--tee", c.text);
    REQUIRE_FALSE(s.ok());
    CHECK(s.status().code() == StatusCode::kInvalidArgument);
    CHECK(s.status().message() == c.error);
  }
}

TEST_CASE("LooksLikeStdStreams tells a --tee value from a program") {
  for (const char* value : {"0", "3", "0:3", "0:1,1:2", "12"}) CHECK_MESSAGE(LooksLikeStdStreams(value), value);
  for (const char* program : {"", "train.py", "./3", "-m", "3x", ":3", "python3"}) {
    CHECK_FALSE_MESSAGE(LooksLikeStdStreams(program), program);
  }
}

TEST_CASE("ParseLocalRanks reads --local_ranks_filter and names a bad item") {
  auto r = ParseLocalRanks("0,2,5");
  REQUIRE(r.ok());
  CHECK(*r == std::set<int>{0, 2, 5});
  auto bad = ParseLocalRanks("0,x");
  REQUIRE_FALSE(bad.ok());
  CHECK(bad.status().message() ==
        "--local_ranks_filter '0,x': 'x' is not a local rank; expected local ranks such as 0 or 0,1,3");
  CHECK(ParseLocalRanks("").status().message() ==
        "--local_ranks_filter '': '' is not a local rank; expected local ranks such as 0 or 0,1,3");
}

TEST_CASE("ConsoleStreams shows a stream unless it is redirected, and a teed one always") {
  ConsoleStreams all;
  CHECK(all.Shows(0, Stream::kStdout));
  CHECK(all.Shows(3, Stream::kStderr));
  CHECK_FALSE(all.ShowsNothing());

  ConsoleStreams redirected;
  redirected.redirects.all = StdStreams::kBoth;  // --redirects 3, or --no_tee
  CHECK_FALSE(redirected.Shows(0, Stream::kStdout));
  CHECK_FALSE(redirected.Shows(0, Stream::kStderr));
  CHECK(redirected.ShowsNothing());

  ConsoleStreams stderr_only = redirected;
  stderr_only.tee.all = StdStreams::kStderr;  // --redirects 3 --tee 2
  CHECK_FALSE(stderr_only.Shows(1, Stream::kStdout));
  CHECK(stderr_only.Shows(1, Stream::kStderr));
  CHECK_FALSE(stderr_only.ShowsNothing());

  ConsoleStreams per_rank;  // --redirects 0:1,1:3: rank 0's stdout and all of rank 1 kept off
  per_rank.redirects.by_local_rank = {{0, StdStreams::kStdout}, {1, StdStreams::kBoth}};
  CHECK_FALSE(per_rank.Shows(0, Stream::kStdout));
  CHECK(per_rank.Shows(0, Stream::kStderr));
  CHECK_FALSE(per_rank.Shows(1, Stream::kStderr));
  CHECK(per_rank.Shows(2, Stream::kStdout));
  CHECK_FALSE(per_rank.ShowsNothing());

  ConsoleStreams filtered;  // --local_ranks_filter 0,2
  filtered.local_ranks = std::set<int>{0, 2};
  CHECK(filtered.Shows(0, Stream::kStdout));
  CHECK(filtered.Shows(2, Stream::kStderr));
  CHECK_FALSE(filtered.Shows(1, Stream::kStdout));
  CHECK_FALSE(filtered.Shows(-1, Stream::kStdout));
  CHECK_FALSE(filtered.ShowsNothing());

  ConsoleStreams teed_rank = redirected;  // --redirects 3 --tee 1:3: only rank 1 reaches the console
  teed_rank.tee.by_local_rank = {{1, StdStreams::kBoth}};
  CHECK(teed_rank.Shows(1, Stream::kStdout));
  CHECK_FALSE(teed_rank.Shows(0, Stream::kStdout));
  CHECK_FALSE(teed_rank.ShowsNothing());
}

}  // namespace
}  // namespace dslaunch::launcher
