#include "launcher/elastic/elastic_policy.h"

#include <doctest/doctest.h>

#include <csignal>
#include <string>
#include <vector>

namespace dslaunch::launcher {
namespace {

using Kind = GenerationOutcome::Kind;
using DKind = Decision::Kind;

std::vector<std::string> Hosts(int n) {
  std::vector<std::string> hosts;
  for (int i = 0; i < n; ++i) hosts.push_back(std::string(1, static_cast<char>('a' + i)));
  return hosts;
}

GenerationOutcome Worker(Kind kind, int rank, ExitStatus status, std::string message, int64_t step) {
  GenerationOutcome o;
  o.kind = kind;
  o.rank = rank;
  o.status = status;
  o.error_message = std::move(message);
  o.last_step = step;
  return o;
}
GenerationOutcome Failed(int rank = 3, int64_t step = 41, std::string message = "ValueError: boom") {
  return Worker(Kind::kWorkerFailed, rank, ExitStatus::Exited(1), std::move(message), step);
}
GenerationOutcome Lost(std::vector<int> nodes, Kind kind = Kind::kNodesLost) {
  GenerationOutcome o;
  o.kind = kind;
  o.lost_nodes = std::move(nodes);
  return o;
}
GenerationOutcome Of(Kind kind) {
  GenerationOutcome o;
  o.kind = kind;
  return o;
}

std::vector<NodeState> States(const ElasticPolicy& p) {
  std::vector<NodeState> s;
  for (int n = 0; n < static_cast<int>(p.hosts().size()); ++n) s.push_back(p.state(n));
  return s;
}
constexpr NodeState A = NodeState::kActive, S = NodeState::kSpare, F = NodeState::kFailed;

TEST_CASE("ReprobeDelay starts at 1 s and doubles up to 30 s") {
  struct Case {
    int failed_probes;
    int64_t ms;
  };
  for (const Case& c : {Case{0, 1000}, Case{1, 2000}, Case{2, 4000}, Case{3, 8000}, Case{4, 16000}, Case{5, 30000},
                        Case{6, 30000}, Case{1000000, 30000}}) {
    CAPTURE(c.failed_probes);
    CHECK(ReprobeDelay(c.failed_probes) == std::chrono::milliseconds(c.ms));
  }
}

TEST_CASE("ElasticPolicy::Start makes the first MAX reachable candidates active and the rest spares") {
  struct Case {
    std::string name;
    ElasticOptions options;
    int hosts;
    std::vector<int> unreachable;
    DKind kind;
    std::vector<int> active;
    std::vector<NodeState> states;
    std::string line;
  };
  const Case cases[] = {
      {"one-shot: every node", {4, 4, 0}, 4, {}, DKind::kRun, {0, 1, 2, 3}, {A, A, A, A},
       "dslaunch: generation 0: running on 4 nodes"},
      {"range with spares", {2, 4, 3}, 6, {}, DKind::kRun, {0, 1, 2, 3}, {A, A, A, A, S, S},
       "dslaunch: generation 0: running on 4 nodes; spares: e, f"},
      {"an unreachable node is skipped and probed again", {2, 4, 3}, 6, {1}, DKind::kRun, {0, 2, 3, 4},
       {A, F, A, A, A, S}, "dslaunch: generation 0: running on 4 nodes; spares: f; unreachable: b (probed again)"},
      {"MAX above the candidates: all of them", {1, 8, 0}, 3, {}, DKind::kRun, {0, 1, 2}, {A, A, A},
       "dslaunch: generation 0: running on 3 nodes"},
      {"fewer than MIN reachable", {3, 4, 5}, 4, {0, 1}, DKind::kFail, {}, {F, F, A, A},
       "dslaunch: generation 0: 2 of 4 nodes reachable (unreachable: a, b); the job needs at least 3; stopping the "
       "job"},
      {"one-shot with a node unreachable", {2, 2, 0}, 2, {1}, DKind::kFail, {}, {A, F},
       "dslaunch: generation 0: 1 of 2 nodes reachable (unreachable: b); the job needs all of them (--nnodes MIN:MAX "
       "lets it run on fewer); stopping the job"},
  };
  for (const Case& c : cases) {
    CAPTURE(c.name);
    ElasticPolicy p(c.options, Hosts(c.hosts));
    Decision d = p.Start(c.unreachable);
    CHECK(d.kind == c.kind);
    CHECK(d.active == c.active);
    CHECK_FALSE(d.counted);
    CHECK(d.line == c.line);
    CHECK(States(p) == c.states);
    CHECK(p.generation() == 0);
    CHECK(p.history().size() == (c.kind == DKind::kRun ? 1u : 0u));
  }
}

// One row of the policy table (docs/elastic.md, "The restart policy"): a job started with
// `options` on `hosts` candidates, after `before` generations ended as given, ends the next one
// with `outcome`.
struct Row {
  std::string name;
  ElasticOptions options;
  int hosts;
  std::vector<GenerationOutcome> before;
  GenerationOutcome outcome;
  DKind kind;
  std::vector<int> active;
  bool counted;
  std::vector<NodeState> states;
  std::string line;
};

TEST_CASE("ElasticPolicy::OnGenerationEnded follows the policy table") {
  const Row rows[] = {
      {"success finishes", {2, 2, 3}, 2, {}, Of(Kind::kSucceeded), DKind::kFinish, {}, false, {A, A},
       "dslaunch: generation 0: every worker exited 0; the job is done"},
      {"an interrupted launcher finishes, with budget left", {2, 2, 3}, 2, {}, Of(Kind::kInterrupted),
       DKind::kFinish, {}, false, {A, A}, "dslaunch: generation 0: interrupted; not restarting"},
      {"worker failure: the same nodes, counted", {2, 2, 3}, 2, {}, Failed(), DKind::kRun, {0, 1}, true, {A, A},
       "dslaunch: generation 0: rank 3 failed at step 41 (exit code 1); restarting on the same 2 nodes (restart 1 "
       "of 3)"},
      {"worker stall: the same nodes, counted", {2, 2, 3}, 2, {},
       Worker(Kind::kWorkerStalled, 5, ExitStatus::Signaled(SIGKILL), "", 7), DKind::kRun, {0, 1}, true, {A, A},
       "dslaunch: generation 0: rank 5 reported no progress for its watchdog timeout (last step 7); restarting on "
       "the same 2 nodes (restart 1 of 3)"},
      {"--max_restarts 0, no range: the first failure ends the job", {2, 2, 0}, 2, {}, Failed(), DKind::kFail, {},
       false, {A, A},
       "dslaunch: generation 0: rank 3 failed at step 41 (exit code 1); no restarts allowed (--max_restarts 0); "
       "stopping the job"},
      {"--max_restarts 0, a stall ends the job", {2, 2, 0}, 2, {},
       Worker(Kind::kWorkerStalled, 0, ExitStatus::Signaled(SIGKILL), "", -1), DKind::kFail, {}, false, {A, A},
       "dslaunch: generation 0: rank 0 reported no progress for its watchdog timeout (no step reported); no "
       "restarts allowed (--max_restarts 0); stopping the job"},
      {"node lost: a spare takes its place, counted", {2, 3, 2}, 5, {}, Lost({1}), DKind::kRun, {0, 3, 2}, true,
       {A, F, A, A, S},
       "dslaunch: generation 0: node b lost; replacing b with spare d; continuing on 3 nodes (restart 1 of 2)"},
      {"two nodes lost, one spare: replace one, shrink by the other", {1, 3, 2}, 4, {}, Lost({0, 2}), DKind::kRun,
       {3, 1}, true, {F, A, F, A},
       "dslaunch: generation 0: nodes a, c lost; replacing a with spare d; no spare left; continuing on 2 nodes "
       "(restart 1 of 2)"},
      {"node lost, no spare, MIN still met: shrink", {2, 3, 2}, 3, {}, Lost({0}), DKind::kRun, {1, 2}, true,
       {F, A, A}, "dslaunch: generation 0: node a lost; no spare left; continuing on 2 nodes (restart 1 of 2)"},
      {"node lost, no spare, below MIN: fail", {3, 3, 2}, 4, {Lost({0})}, Lost({1}), DKind::kFail, {}, false,
       {F, F, A, A},
       "dslaunch: generation 1: node b lost; only 2 nodes left and no spare, fewer than the minimum of 3; stopping "
       "the job"},
      {"node lost, no range: fail, saying how to allow fewer", {3, 3, 2}, 3, {}, Lost({2}), DKind::kFail, {}, false,
       {A, A, F},
       "dslaunch: generation 0: node c lost; the job needs all 3 nodes and has no spare (--nnodes MIN:MAX lets it "
       "run on fewer); stopping the job"},
      {"node lost with a spare but no budget: fail", {2, 2, 0}, 3, {}, Lost({0}), DKind::kFail, {}, false, {F, A, S},
       "dslaunch: generation 0: node a lost; no restarts allowed (--max_restarts 0); stopping the job"},
      {"nodes that did not start count as lost", {1, 2, 1}, 3, {}, Lost({1}, Kind::kStartupFailed), DKind::kRun,
       {0, 2}, true, {A, F, A},
       "dslaunch: generation 0: node b did not start; replacing b with spare c; continuing on 2 nodes (restart 1 of "
       "1)"},
      {"a start-up failure without a node is not retried", {1, 2, 5}, 3, {}, Of(Kind::kStartupFailed), DKind::kFail,
       {}, false, {A, A, S},
       "dslaunch: generation 0: start-up failed; a start-up failure that names no node is not retried; stopping the "
       "job"},
      {"the launcher's own description is used", {2, 2, 1}, 2, {},
       [] {
         GenerationOutcome o = Lost({1});
         o.description = "node 10.0.0.14 lost (no heartbeat for 3.0 s)";
         return o;
       }(),
       DKind::kFail, {}, false, {A, F},
       "dslaunch: generation 0: node 10.0.0.14 lost (no heartbeat for 3.0 s); the job needs all 2 nodes and has no "
       "spare (--nnodes MIN:MAX lets it run on fewer); stopping the job"},
      {"a worker failure after a shrink restarts on the smaller set", {1, 2, 3}, 2, {Lost({0})}, Failed(1, -1, ""),
       DKind::kRun, {1}, true, {F, A},
       "dslaunch: generation 1: rank 1 failed (exit code 1); restarting on the same 1 node (restart 2 of 3)"},
  };
  for (const Row& r : rows) {
    CAPTURE(r.name);
    ElasticPolicy p(r.options, Hosts(r.hosts));
    REQUIRE(p.Start().kind == DKind::kRun);
    for (const GenerationOutcome& o : r.before) REQUIRE(p.OnGenerationEnded(o).kind == DKind::kRun);
    const int generation = p.generation();
    const int restarts = p.restarts();
    Decision d = p.OnGenerationEnded(r.outcome);
    CHECK(d.kind == r.kind);
    CHECK(d.active == r.active);
    CHECK(d.counted == r.counted);
    CHECK(d.line == r.line);
    CHECK(States(p) == r.states);
    CHECK(p.restarts() == restarts + (r.counted ? 1 : 0));
    CHECK(p.generation() == generation + (r.kind == DKind::kRun ? 1 : 0));
    if (r.kind == DKind::kRun) CHECK(p.active() == r.active);
  }
}

TEST_CASE("ElasticPolicy counts failures against --max_restarts and fails when the budget is used up") {
  ElasticPolicy p({2, 2, 2}, Hosts(2));
  REQUIRE(p.Start().kind == DKind::kRun);
  // Different steps each time: no repeat, so the budget decides.
  Decision first = p.OnGenerationEnded(Failed(3, 10));
  CHECK(first.kind == DKind::kRun);
  CHECK(first.line.ends_with("(restart 1 of 2)"));
  Decision second = p.OnGenerationEnded(Failed(3, 20));
  CHECK(second.kind == DKind::kRun);
  CHECK(second.line.ends_with("(restart 2 of 2)"));
  CHECK(p.restarts() == 2);
  Decision third = p.OnGenerationEnded(Failed(3, 30));
  CHECK(third.kind == DKind::kFail);
  CHECK(third.line ==
        "dslaunch: generation 2: rank 3 failed at step 30 (exit code 1); restart budget exhausted (2 of 2 used); "
        "stopping the job");
  CHECK(p.restarts() == 2);
  CHECK(p.generation() == 2);
}

TEST_CASE("ElasticPolicy never counts a scale-up, even with --max_restarts 0") {
  // Node b was unreachable at start; it answers, the job scales up without using the budget.
  ElasticPolicy p({1, 2, 0}, Hosts(2));
  REQUIRE(p.Start({1}).active == std::vector<int>{0});
  std::optional<Decision> up = p.OnNodeReturned(1);
  REQUIRE(up.has_value());
  CHECK(up->kind == DKind::kRescale);
  CHECK(up->active == std::vector<int>{0, 1});
  CHECK_FALSE(up->counted);
  CHECK(up->line ==
        "dslaunch: generation 0: node b answers again; scaling up from 1 to 2 nodes at the next step boundary (not "
        "counted as a restart)");
  // The reason is the line without its prefix: the job runner records it as the root cause, and
  // the generation's end line repeats it after one prefix, not two.
  CHECK(up->reason ==
        "node b answers again; scaling up from 1 to 2 nodes at the next step boundary (not counted as a restart)");
  CHECK(p.state(1) == S);
  GenerationOutcome rescaled = Of(Kind::kRescale);
  rescaled.description = up->reason;
  Decision d = p.OnGenerationEnded(rescaled);
  CHECK(d.kind == DKind::kRun);
  CHECK(d.active == std::vector<int>{0, 1});
  CHECK_FALSE(d.counted);
  CHECK(d.line ==
        "dslaunch: generation 0: node b answers again; scaling up from 1 to 2 nodes at the next step boundary (not "
        "counted as a restart); adding b; continuing on 2 nodes (not counted as a restart: 0 of 0 used)");
  CHECK(p.restarts() == 0);
  CHECK(p.generation() == 1);
  CHECK(States(p) == std::vector<NodeState>{A, A});
  // The budget is still 0: the next failure ends the job.
  CHECK(p.OnGenerationEnded(Failed()).kind == DKind::kFail);
}

TEST_CASE("ElasticPolicy::OnNodeReturned scales up only while the job runs below MAX") {
  SUBCASE("at MAX the node waits as a spare, and replaces the next lost node") {
    ElasticPolicy p({1, 2, 5}, Hosts(3));
    REQUIRE(p.Start().active == std::vector<int>{0, 1});
    p.OnNodeUnreachable(2);  // the spare fails a check
    CHECK(p.state(2) == F);
    CHECK_FALSE(p.OnNodeReturned(2).has_value());
    CHECK(p.state(2) == S);
    CHECK(p.OnGenerationEnded(Lost({0})).active == std::vector<int>{2, 1});
  }
  SUBCASE("a second node returning while a scale-up is pending joins the same one") {
    ElasticPolicy p({1, 3, 5}, Hosts(3));
    REQUIRE(p.Start({1, 2}).active == std::vector<int>{0});
    std::optional<Decision> up = p.OnNodeReturned(2);
    REQUIRE(up.has_value());
    CHECK(up->active == std::vector<int>{0, 2});
    CHECK_FALSE(p.OnNodeReturned(1).has_value());
    Decision d = p.OnGenerationEnded(Of(Kind::kRescale));
    CHECK(d.active == std::vector<int>{0, 1, 2});  // appended in candidate order
    CHECK(d.line ==
          "dslaunch: generation 0: stopped for a scale-up; adding b, c; continuing on 3 nodes (not counted as a "
          "restart: 0 of 5 used)");
  }
  SUBCASE("a returned node that is gone again by the stop leaves the membership as it was") {
    ElasticPolicy p({1, 2, 5}, Hosts(2));
    REQUIRE(p.Start({1}).active == std::vector<int>{0});
    REQUIRE(p.OnNodeReturned(1).has_value());
    p.OnNodeUnreachable(1);
    Decision d = p.OnGenerationEnded(Of(Kind::kRescale));
    CHECK(d.kind == DKind::kRun);
    CHECK(d.active == std::vector<int>{0});
    CHECK_FALSE(d.counted);
    CHECK(d.line ==
          "dslaunch: generation 0: stopped for a scale-up; restarting on the same 1 node (not counted as a restart: "
          "0 of 5 used)");
  }
  SUBCASE("a failure during the scale-up's stop is counted and still takes the spare") {
    ElasticPolicy p({1, 2, 5}, Hosts(2));
    REQUIRE(p.Start({1}).active == std::vector<int>{0});
    REQUIRE(p.OnNodeReturned(1).has_value());
    Decision d = p.OnGenerationEnded(Failed());
    CHECK(d.kind == DKind::kRun);
    CHECK(d.counted);
    CHECK(d.active == std::vector<int>{0, 1});
    CHECK(d.line ==
          "dslaunch: generation 0: rank 3 failed at step 41 (exit code 1); adding b; continuing on 2 nodes (restart "
          "1 of 5)");
    // The pending scale-up was consumed: the next returning node may ask for its own.
  }
  SUBCASE("after the job ended nothing is started") {
    ElasticPolicy p({1, 2, 5}, Hosts(2));
    REQUIRE(p.Start({1}).kind == DKind::kRun);
    REQUIRE(p.OnGenerationEnded(Of(Kind::kSucceeded)).kind == DKind::kFinish);
    CHECK_FALSE(p.OnNodeReturned(1).has_value());
    CHECK(p.state(1) == S);
  }
  SUBCASE("a node lost and back is admitted at a later generation") {
    ElasticPolicy p({1, 2, 5}, Hosts(2));
    REQUIRE(p.Start().kind == DKind::kRun);
    REQUIRE(p.OnGenerationEnded(Lost({1})).active == std::vector<int>{0});
    std::optional<Decision> up = p.OnNodeReturned(1);
    REQUIRE(up.has_value());
    CHECK(up->line ==
          "dslaunch: generation 1: node b answers again; scaling up from 1 to 2 nodes at the next step boundary (not "
          "counted as a restart)");
    Decision d = p.OnGenerationEnded(Of(Kind::kRescale));
    CHECK(d.active == std::vector<int>{0, 1});
    CHECK(p.restarts() == 1);
    CHECK(p.generation() == 2);
  }
}

TEST_CASE("ElasticPolicy stops early when a failure repeats the previous generation's") {
  struct Case {
    std::string name;
    GenerationOutcome first;
    GenerationOutcome second;
    bool repeated;
  };
  const GenerationOutcome base = Failed(3, 41, "ValueError: boom");
  auto with = [&](auto change) {
    GenerationOutcome o = base;
    change(o);
    return o;
  };
  const Case cases[] = {
      {"same rank, status, message and step", base, base, true},
      {"the same message, no step reported", Failed(3, -1, "ImportError: no module x"),
       Failed(3, -1, "ImportError: no module x"), true},
      {"the same step, no message", Failed(3, 41, ""), Failed(3, 41, ""), true},
      {"the same stall", Worker(Kind::kWorkerStalled, 2, ExitStatus::Signaled(SIGKILL), "", 9),
       Worker(Kind::kWorkerStalled, 2, ExitStatus::Signaled(SIGKILL), "", 9), true},
      {"another rank", base, with([](GenerationOutcome& o) { o.rank = 4; }), false},
      {"another exit code", base, with([](GenerationOutcome& o) { o.status = ExitStatus::Exited(2); }), false},
      {"a signal instead", base, with([](GenerationOutcome& o) { o.status = ExitStatus::Signaled(SIGSEGV); }), false},
      {"another message", base, with([](GenerationOutcome& o) { o.error_message = "ValueError: bang"; }), false},
      {"another step", base, with([](GenerationOutcome& o) { o.last_step = 42; }), false},
      {"a stall after a failure at the same step", base,
       with([](GenerationOutcome& o) { o.kind = Kind::kWorkerStalled; }), false},
      {"no step and no message: an exit code alone is no evidence", Failed(3, -1, ""), Failed(3, -1, ""), false},
  };
  for (const Case& c : cases) {
    CAPTURE(c.name);
    ElasticPolicy p({2, 2, 5}, Hosts(2));
    REQUIRE(p.Start().kind == DKind::kRun);
    REQUIRE(p.OnGenerationEnded(c.first).kind == DKind::kRun);
    Decision d = p.OnGenerationEnded(c.second);
    CHECK(d.kind == (c.repeated ? DKind::kStopRepeated : DKind::kRun));
    CHECK(p.restarts() == (c.repeated ? 1 : 2));
  }
  SUBCASE("the line names the generation it repeats") {
    ElasticPolicy p({2, 2, 5}, Hosts(2));
    REQUIRE(p.Start().kind == DKind::kRun);
    REQUIRE(p.OnGenerationEnded(base).kind == DKind::kRun);
    CHECK(p.OnGenerationEnded(base).line ==
          "dslaunch: generation 1: rank 3 failed at step 41 (exit code 1); the same failure as in generation 0 (same "
          "rank, exit status, message and step, on the same nodes): stopping early instead of restarting (1 of 5 "
          "restarts used)");
  }
  SUBCASE("a repeat wins over an exhausted budget: it names the root cause") {
    ElasticPolicy p({2, 2, 1}, Hosts(2));
    REQUIRE(p.Start().kind == DKind::kRun);
    REQUIRE(p.OnGenerationEnded(base).kind == DKind::kRun);
    CHECK(p.OnGenerationEnded(base).kind == DKind::kStopRepeated);
  }
  SUBCASE("only consecutive generations: another failure in between resets it") {
    ElasticPolicy p({2, 2, 5}, Hosts(2));
    REQUIRE(p.Start().kind == DKind::kRun);
    REQUIRE(p.OnGenerationEnded(base).kind == DKind::kRun);
    REQUIRE(p.OnGenerationEnded(Failed(1, 7, "OSError")).kind == DKind::kRun);
    CHECK(p.OnGenerationEnded(base).kind == DKind::kRun);
  }
  SUBCASE("after a node was replaced, the next failure starts a new comparison") {
    ElasticPolicy p({1, 2, 5}, Hosts(3));
    REQUIRE(p.Start().kind == DKind::kRun);
    REQUIRE(p.OnGenerationEnded(base).kind == DKind::kRun);       // generation 1 on a, b
    REQUIRE(p.OnGenerationEnded(Lost({0})).kind == DKind::kRun);  // generation 2 on c, b
    REQUIRE(p.OnGenerationEnded(base).kind == DKind::kRun);       // generation 3 on c, b
    CHECK(p.OnGenerationEnded(base).kind == DKind::kStopRepeated);
  }
  SUBCASE("not when the membership changed between the two: the ranks sit on other nodes") {
    ElasticPolicy p({1, 2, 5}, Hosts(2));
    REQUIRE(p.Start({1}).active == std::vector<int>{0});
    REQUIRE(p.OnNodeReturned(1).has_value());
    REQUIRE(p.OnGenerationEnded(base).active == std::vector<int>{0, 1});  // counted, and bigger
    CHECK(p.OnGenerationEnded(base).kind == DKind::kRun);
    CHECK(p.OnGenerationEnded(base).kind == DKind::kStopRepeated);
  }
}

TEST_CASE("ElasticPolicy keeps one record per generation for the summary") {
  ElasticPolicy p({1, 2, 3}, Hosts(3));
  REQUIRE(p.Start().kind == DKind::kRun);
  REQUIRE(p.OnGenerationEnded(Failed(0, 5, "")).kind == DKind::kRun);
  REQUIRE(p.OnGenerationEnded(Lost({1})).kind == DKind::kRun);
  REQUIRE(p.OnGenerationEnded(Of(Kind::kSucceeded)).kind == DKind::kFinish);
  const std::vector<GenerationRecord>& h = p.history();
  REQUIRE(h.size() == 3);
  CHECK(h[0].generation == 0);
  CHECK(h[0].nodes == std::vector<int>{0, 1});
  CHECK(h[0].ended);
  CHECK(h[0].outcome.kind == Kind::kWorkerFailed);
  CHECK(h[0].outcome.description == "rank 0 failed at step 5 (exit code 1)");
  CHECK(h[0].decision.kind == DKind::kRun);
  CHECK(h[0].decision.counted);
  CHECK(h[1].nodes == std::vector<int>{0, 1});
  CHECK(h[1].outcome.description == "node b lost");
  CHECK(h[1].decision.active == std::vector<int>{0, 2});
  CHECK(h[2].generation == 2);
  CHECK(h[2].nodes == std::vector<int>{0, 2});
  CHECK(h[2].decision.kind == DKind::kFinish);
  CHECK(h[2].decision.line == "dslaunch: generation 2: every worker exited 0; the job is done");
  CHECK(p.restarts() == 2);
}

TEST_CASE("ElasticPolicy::restartable says whether another generation can ever run") {
  struct Case {
    ElasticOptions options;
    int hosts;
    bool restartable;
  };
  for (const Case& c : {Case{{4, 4, 0}, 4, false}, Case{{4, 4, 1}, 4, true}, Case{{2, 4, 0}, 4, true},
                        Case{{4, 4, 0}, 5, true}, Case{{1, 1, 0}, 1, false}}) {
    CAPTURE(c.options.min_nodes);
    CAPTURE(c.options.max_nodes);
    CAPTURE(c.options.max_restarts);
    CAPTURE(c.hosts);
    CHECK(ElasticPolicy(c.options, Hosts(c.hosts)).restartable() == c.restartable);
  }
}

}  // namespace
}  // namespace dslaunch::launcher
