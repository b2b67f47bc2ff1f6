#include "launcher/plan/resource_filter.h"

#include <doctest/doctest.h>

#include <algorithm>
#include <random>
#include <set>
#include <string>
#include <vector>

namespace dslaunch::launcher {
namespace {

Hostfile MustParse(const std::string& text) {
  Result<Hostfile> parsed = ParseHostfile(text, "hosts");
  REQUIRE_MESSAGE(parsed.ok(), parsed.status().ToString());
  return *parsed;
}

std::string Describe(const Resources& resources) {
  std::string s;
  for (const NodeResources& node : resources) {
    s += node.user.empty() ? node.host : node.user + "@" + node.host;
    s += "[";
    for (std::size_t i = 0; i < node.slots.size(); ++i) {
      s += (i ? "," : "") + std::to_string(node.slots[i]);
    }
    s += "] ";
  }
  return s;
}

FilterOptions Opts(std::string include, std::string exclude, std::optional<int> num_nodes = {},
                   std::optional<int> num_gpus = {}) {
  return FilterOptions{std::move(include), std::move(exclude), num_nodes, num_gpus};
}

constexpr char kOneNode[] = "worker-0 slots=4\n";
constexpr char kTwoNodes[] = "worker-0 slots=4\nworker-1 slots=4\n";

struct Case {
  const char* name;
  std::string hostfile;
  FilterOptions options;
  Resources want;     // when error is empty
  std::string error;  // exact message; empty: success expected
};

void RunCases(const std::vector<Case>& cases) {
  for (const Case& c : cases) {
    SUBCASE(c.name) {
      CAPTURE(c.hostfile);
      CAPTURE(c.options.include);
      CAPTURE(c.options.exclude);
      Result<Resources> got = SelectResources(MustParse(c.hostfile), c.options);
      if (c.error.empty()) {
        REQUIRE_MESSAGE(got.ok(), got.status().ToString());
        CHECK(Describe(*got) == Describe(c.want));
        CHECK(*got == c.want);
      } else {
        REQUIRE_FALSE(got.ok());
        CHECK(got.status().code() == StatusCode::kInvalidArgument);
        CHECK(got.status().message() == c.error);
      }
    }
  }
}

TEST_CASE("SelectResources follows DeepSpeed's parse_resource_filter on one node") {
  // DeepSpeed test_parser_local.
  RunCases({
      {"no filter keeps everything", kOneNode, {}, {{"", "worker-0", {0, 1, 2, 3}}}, ""},
      {"exclude one slot", kOneNode, Opts("", "worker-0:1"), {{"", "worker-0", {0, 2, 3}}}, ""},
      {"exclude two slots", kOneNode, Opts("", "worker-0:1,2"), {{"", "worker-0", {0, 3}}}, ""},
      {"include one slot", kOneNode, Opts("worker-0:1", ""), {{"", "worker-0", {1}}}, ""},
      {"repeated slot is merged", kOneNode, Opts("worker-0:1,1", ""), {{"", "worker-0", {1}}}, ""},
      {"repeated host is merged", kOneNode, Opts("worker-0:1@worker-0:0,1", ""),
       {{"", "worker-0", {0, 1}}}, ""},
      {"bare host includes all slots", kOneNode, Opts("worker-0", ""),
       {{"", "worker-0", {0, 1, 2, 3}}}, ""},
      // DeepSpeed returns an empty pool here; dslaunch says so at once.
      {"excluding the whole host leaves nothing", kOneNode, Opts("", "worker-0"), {},
       "--exclude 'worker-0' leaves no slot to run on in hostfile 'hosts'"},
      {"excluding every slot leaves nothing", kOneNode, Opts("", "worker-0:0,1,2,3"), {},
       "--exclude 'worker-0:0,1,2,3' leaves no slot to run on in hostfile 'hosts'"},
  });
}

TEST_CASE("SelectResources follows DeepSpeed's parse_resource_filter on several nodes") {
  // DeepSpeed test_parser_multinode and test_parse_inclusion_exclusion.
  RunCases({
      {"no filter keeps everything", kTwoNodes, {},
       {{"", "worker-0", {0, 1, 2, 3}}, {"", "worker-1", {0, 1, 2, 3}}}, ""},
      {"include slots of one node", kTwoNodes, Opts("worker-1:0,3", ""), {{"", "worker-1", {0, 3}}}, ""},
      {"exclude a node", kTwoNodes, Opts("", "worker-1"), {{"", "worker-0", {0, 1, 2, 3}}}, ""},
      {"exclude part of each node", kTwoNodes, Opts("", "worker-0:0,1@worker-1:3"),
       {{"", "worker-0", {2, 3}}, {"", "worker-1", {0, 1, 2}}}, ""},
      {"include a whole node", kTwoNodes, Opts("worker-0", ""), {{"", "worker-0", {0, 1, 2, 3}}}, ""},
      {"docstring example", kTwoNodes, Opts("worker-0@worker-1:0,2", ""),
       {{"", "worker-0", {0, 1, 2, 3}}, {"", "worker-1", {0, 2}}}, ""},
      {"include slots 0 and 2", kTwoNodes, Opts("worker-1:0,2", ""), {{"", "worker-1", {0, 2}}}, ""},
      {"exclude one slot keeps other nodes whole", kTwoNodes, Opts("", "worker-0:1"),
       {{"", "worker-0", {0, 2, 3}}, {"", "worker-1", {0, 1, 2, 3}}}, ""},
      // DeepSpeed test_visible_devices_*: CUDA_VISIBLE_DEVICES=0,2 becomes --include localhost:0,2.
      {"visible devices become an include", "localhost slots=4\n", Opts("localhost:0,2", ""),
       {{"", "localhost", {0, 2}}}, ""},
      {"visible devices beyond the pool are rejected", "localhost slots=2\n",
       Opts("localhost:0,2", ""), {},
       "--include 'localhost:0,2': host 'localhost' has no slot 2 (it has slots 0-1; hostfile 'hosts' line 1)"},
  });
}

TEST_CASE("SelectResources rejects unknown hosts, unknown slots and bad syntax, naming the token") {
  // DeepSpeed test_parser_errors and test_parse_inclusion_exclusion_errors.
  RunCases({
      {"include unknown host", kTwoNodes, Opts("jeff", ""), {},
       "--include 'jeff': host 'jeff' is not in hostfile 'hosts'"},
      {"exclude unknown host", kTwoNodes, Opts("", "jeff"), {},
       "--exclude 'jeff': host 'jeff' is not in hostfile 'hosts'"},
      {"include unknown slot", kTwoNodes, Opts("worker-1:4", ""), {},
       "--include 'worker-1:4': host 'worker-1' has no slot 4 (it has slots 0-3; hostfile 'hosts' line 2)"},
      {"exclude unknown slot", kTwoNodes, Opts("", "worker-1:4"), {},
       "--exclude 'worker-1:4': host 'worker-1' has no slot 4 (it has slots 0-3; hostfile 'hosts' line 2)"},
      {"formatting: a slot where a host belongs", kTwoNodes, Opts("", "worker-1@worker-0:1@5"), {},
       "--exclude '5': host '5' is not in hostfile 'hosts'"},
      {"include slot 4 of 4", kOneNode, Opts("worker-0:4", ""), {},
       "--include 'worker-0:4': host 'worker-0' has no slot 4 (it has slots 0-3; hostfile 'hosts' line 1)"},
      {"include slot 99", kOneNode, Opts("worker-0:99", ""), {},
       "--include 'worker-0:99': host 'worker-0' has no slot 99 (it has slots 0-3; hostfile 'hosts' line 1)"},
      {"include slots 0 and 4", kOneNode, Opts("worker-0:0,4", ""), {},
       "--include 'worker-0:0,4': host 'worker-0' has no slot 4 (it has slots 0-3; hostfile 'hosts' line 1)"},
      {"exclude slot 4 of 4", kOneNode, Opts("", "worker-0:4"), {},
       "--exclude 'worker-0:4': host 'worker-0' has no slot 4 (it has slots 0-3; hostfile 'hosts' line 1)"},
      {"exclude slot 99", kOneNode, Opts("", "worker-0:99"), {},
       "--exclude 'worker-0:99': host 'worker-0' has no slot 99 (it has slots 0-3; hostfile 'hosts' line 1)"},
      {"exclude slots 0 and 4", kOneNode, Opts("", "worker-0:0,4"), {},
       "--exclude 'worker-0:0,4': host 'worker-0' has no slot 4 (it has slots 0-3; hostfile 'hosts' line 1)"},
      {"huge slot id", kOneNode, Opts("worker-0:99999999999999999999", ""), {},
       "--include 'worker-0:99999999999999999999': host 'worker-0' has no slot 99999999999999999999 "
       "(it has slots 0-3; hostfile 'hosts' line 1)"},
      {"trailing @", kOneNode, Opts("worker-0@", ""), {}, "--include 'worker-0@': empty host entry"},
      {"leading @", kOneNode, Opts("@worker-0", ""), {}, "--include '@worker-0': empty host entry"},
      {"empty slot list", kOneNode, Opts("worker-0:", ""), {}, "--include 'worker-0:': empty slot id"},
      {"empty slot id", kOneNode, Opts("worker-0:1,,2", ""), {}, "--include 'worker-0:1,,2': empty slot id"},
      {"non-numeric slot", kOneNode, Opts("worker-0:a", ""), {},
       "--include 'worker-0:a': slot 'a' is not a non-negative integer"},
      {"negative slot", kOneNode, Opts("", "worker-0:-1"), {},
       "--exclude 'worker-0:-1': slot '-1' is not a non-negative integer"},
      {"missing host before slots", kOneNode, Opts(":0", ""), {}, "--include ':0': missing host name"},
  });
}

TEST_CASE("SelectResources keeps hostfile order, users and case-insensitive names") {
  RunCases({
      {"include order does not change node order", kTwoNodes, Opts("worker-1:1@worker-0:2", ""),
       {{"", "worker-0", {2}}, {"", "worker-1", {1}}}, ""},
      {"bare host wins over a slot list", kOneNode, Opts("worker-0:1@worker-0", ""),
       {{"", "worker-0", {0, 1, 2, 3}}}, ""},
      {"slots are sorted", kOneNode, Opts("worker-0:3,0,2", ""), {{"", "worker-0", {0, 2, 3}}}, ""},
      {"host names ignore case", kOneNode, Opts("WORKER-0:1", ""), {{"", "worker-0", {1}}}, ""},
      {"user comes from the hostfile", "alice@a slots=2\nb slots=1\n", Opts("", "b"),
       {{"alice", "a", {0, 1}}}, ""},
      {"bracketed IPv6 with slots", "[fe80::1] slots=2\n", Opts("[fe80::1]:1", ""),
       {{"", "fe80::1", {1}}}, ""},
      {"bracketed IPv6 whole host", "fe80::1 slots=2\n", Opts("[fe80::1]", ""),
       {{"", "fe80::1", {0, 1}}}, ""},
      {"bare IPv6 in a filter is ambiguous", "fe80::1 slots=2\n", Opts("fe80::1:1", ""), {},
       "--include 'fe80::1:1': more than one ':' (write IPv6 hosts in brackets, e.g. '[fe80::1]:0,1')"},
      {"unclosed bracket", "fe80::1 slots=2\n", Opts("[fe80::1", ""), {},
       "--include '[fe80::1': missing ']'"},
      {"junk after bracket", "fe80::1 slots=2\n", Opts("[fe80::1]x", ""), {},
       "--include '[fe80::1]x': unexpected 'x' after ']'"},
  });
}

TEST_CASE("SelectResources makes include, exclude and num_nodes/num_gpus mutually exclusive") {
  // DeepSpeed test_parser_mutual_exclusive (on an empty pool) and test_num_plus_parser.
  Result<Resources> both = SelectResources(Hostfile{}, Opts("A", "B"));
  REQUIRE_FALSE(both.ok());
  CHECK(both.status().message() == "--include 'A' and --exclude 'B' are mutually exclusive");

  const std::string local = "localhost slots=1\n";
  RunCases({
      {"num_nodes with include", local, Opts("localhost", "", 1), {},
       "--num_nodes 1 cannot be combined with --include 'localhost'"},
      {"num_nodes and num_gpus with include", local,
       Opts("localhost", "", 1, 1), {},
       "--num_nodes 1 cannot be combined with --include 'localhost'"},
      {"num_gpus with include", local, Opts("localhost", "", {}, 1), {},
       "--num_gpus/--nproc_per_node 1 cannot be combined with --include 'localhost'"},
      {"num_nodes with exclude", local, Opts("", "localhost", 1), {},
       "--num_nodes 1 cannot be combined with --exclude 'localhost'"},
      {"num_nodes and num_gpus with exclude", local,
       Opts("", "localhost", 1, 1), {},
       "--num_nodes 1 cannot be combined with --exclude 'localhost'"},
      {"num_gpus with exclude", local, Opts("", "localhost", {}, 1), {},
       "--num_gpus/--nproc_per_node 1 cannot be combined with --exclude 'localhost'"},
  });
}

TEST_CASE("SelectResources applies num_nodes and num_gpus") {
  const std::string capped = "worker-0 slots=4 max_slots=6\nworker-1 slots=4\n";
  RunCases({
      {"first node", kTwoNodes, Opts("", "", 1), {{"", "worker-0", {0, 1, 2, 3}}}, ""},
      {"all nodes", kTwoNodes, Opts("", "", 2),
       {{"", "worker-0", {0, 1, 2, 3}}, {"", "worker-1", {0, 1, 2, 3}}}, ""},
      {"more nodes than hosts", kTwoNodes, Opts("", "", 3), {},
       "--num_nodes 3 but hostfile 'hosts' has only 2 host(s)"},
      {"zero nodes", kTwoNodes, Opts("", "", 0), {}, "--num_nodes must be at least 1, got 0"},
      {"negative nodes", kTwoNodes, Opts("", "", -1), {}, "--num_nodes must be at least 1, got -1"},
      {"fewer gpus than slots", kTwoNodes, Opts("", "", {}, 2),
       {{"", "worker-0", {0, 1}}, {"", "worker-1", {0, 1}}}, ""},
      {"more gpus than slots without max_slots", kOneNode, Opts("", "", {}, 8),
       {{"", "worker-0", {0, 1, 2, 3, 4, 5, 6, 7}}}, ""},
      {"gpus up to max_slots", capped, Opts("", "", 1, 6),
       {{"", "worker-0", {0, 1, 2, 3, 4, 5}}}, ""},
      {"gpus beyond max_slots", capped, Opts("", "", {}, 7), {},
       "--num_gpus/--nproc_per_node 7 exceeds max_slots=6 of host 'worker-0' (hostfile 'hosts' line 1)"},
      {"max_slots of an unselected host does not matter", "a slots=1\nb slots=1 max_slots=1\n",
       Opts("", "", 1, 3), {{"", "a", {0, 1, 2}}}, ""},
      {"zero gpus", kOneNode, Opts("", "", {}, 0), {}, "--num_gpus/--nproc_per_node must be at least 1, got 0"},
      {"gpus over the per-host limit", kOneNode, Opts("", "", {}, 65536), {},
       "--num_gpus/--nproc_per_node 65536 exceeds the limit of 1024 slots per host"},
      {"nodes and gpus together", kTwoNodes, Opts("", "", 1, 1), {{"", "worker-0", {0}}}, ""},
  });
}

TEST_CASE("SelectResources takes --num_gpus up to the per-host limit") {
  Result<Resources> got = SelectResources(LocalHostfile(1), Opts("", "", {}, kMaxSlotsPerHost));
  REQUIRE(got.ok());
  REQUIRE(got->size() == 1);
  CHECK(got->front().slots.size() == static_cast<std::size_t>(kMaxSlotsPerHost));
  CHECK(got->front().slots.back() == kMaxSlotsPerHost - 1);
}

TEST_CASE("SelectResources returns a selection or an error for any filter, never crashing") {
  Hostfile hostfile = MustParse("a slots=4\nb slots=2\n[fe80::1] slots=1\n");
  const std::string alphabet = "ab@:,[]0123-9fe8 ";
  std::mt19937 rng(777);
  for (int i = 0; i < 3000; ++i) {
    std::string spec;
    std::size_t length = 1 + rng() % 16;
    for (std::size_t j = 0; j < length; ++j) spec += alphabet[rng() % alphabet.size()];
    CAPTURE(spec);
    for (bool include : {true, false}) {
      Result<Resources> got = SelectResources(hostfile, include ? Opts(spec, "") : Opts("", spec));
      if (!got.ok()) {
        CHECK(got.status().code() == StatusCode::kInvalidArgument);
        continue;
      }
      REQUIRE_FALSE(got->empty());
      for (const NodeResources& node : *got) {
        REQUIRE_FALSE(node.slots.empty());
        CHECK(std::is_sorted(node.slots.begin(), node.slots.end()));
        CHECK(std::adjacent_find(node.slots.begin(), node.slots.end()) == node.slots.end());
      }
    }
  }
}

// Valid filters built at random (hosts named bare or with slot lists, repeated, in any order)
// against the selection computed the slow way: a set of (host, slot) pairs.
TEST_CASE("SelectResources agrees with a set-based reference on 3,000 random valid include and exclude filters") {
  // A host with a user (selected by its host name alone) and an IPv6 literal (':' inside brackets).
  const std::vector<std::pair<std::string, int>> hosts = {{"w-0", 4}, {"w-1", 2}, {"g2", 3}, {"[fe80::1]", 1}};
  Hostfile hostfile = MustParse("w-0 slots=4\nw-1 slots=2\nme@g2 slots=3\n[fe80::1] slots=1\n");
  std::mt19937 rng(28);
  for (int i = 0; i < 3000; ++i) {
    std::set<std::pair<size_t, int>> named;  // (host index, slot)
    std::string spec;
    for (size_t entries = 1 + rng() % 4; entries > 0; --entries) {
      const size_t h = rng() % 2 == 0 ? rng() % 2 : rng() % hosts.size();  // w-0 and w-1 more often: repeats
      spec += spec.empty() ? "" : "@";
      spec += hosts[h].first;
      if (rng() % 2 == 0) {
        for (int s = 0; s < hosts[h].second; ++s) named.insert({h, s});
        continue;
      }
      spec += ":";
      for (size_t k = 1 + rng() % 3; k > 0; --k) {
        const int s = static_cast<int>(rng() % static_cast<unsigned>(hosts[h].second));
        spec += std::to_string(s) + (k > 1 ? "," : "");
        named.insert({h, s});
      }
    }
    if (spec.empty()) continue;
    CAPTURE(spec);
    for (bool include : {true, false}) {
      CAPTURE(include);
      Resources want;
      for (size_t h = 0; h < hosts.size(); ++h) {
        // The hostfile keeps the IPv6 literal without its brackets.
        NodeResources node{h == 2 ? "me" : "", h == 3 ? "fe80::1" : hosts[h].first, {}};
        for (int s = 0; s < hosts[h].second; ++s) {
          if (named.contains({h, s}) == include) node.slots.push_back(s);
        }
        if (!node.slots.empty()) want.push_back(node);
      }
      Result<Resources> got = SelectResources(hostfile, include ? Opts(spec, "") : Opts("", spec));
      if (want.empty()) {
        CHECK_FALSE(got.ok());  // everything excluded
        continue;
      }
      REQUIRE_MESSAGE(got.ok(), got.status().ToString());
      CHECK(Describe(*got) == Describe(want));
    }
  }
}

TEST_CASE("SelectResources names a host with non-ASCII or filter characters that the hostfile lacks") {
  RunCases({
      {"non-ASCII host", "w-0 slots=2\n", Opts("w\xc3\xa9", ""), {},
       "--include 'w\xc3\xa9': host 'w\xc3\xa9' is not in hostfile 'hosts'"},
      {"stray ]", "w-0 slots=2\n", Opts("w-0]", ""), {}, "--include 'w-0]': host 'w-0]' is not in hostfile 'hosts'"},
      {"unclosed [", "w-0 slots=2\n", Opts("[w-0", ""), {}, "--include '[w-0': missing ']'"},
      {"trailing space", "w-0 slots=2\n", Opts("", "w-0 "), {},
       "--exclude 'w-0 ': host 'w-0 ' is not in hostfile 'hosts'"},
  });
}

TEST_CASE("SelectResources works on the local host list") {
  Hostfile local = LocalHostfile(2);
  Result<Resources> all = SelectResources(local, {});
  REQUIRE(all.ok());
  CHECK(*all == Resources{{"", "localhost", {0, 1}}});

  Result<Resources> four = SelectResources(local, Opts("", "", {}, 4));
  REQUIRE(four.ok());
  CHECK(*four == Resources{{"", "localhost", {0, 1, 2, 3}}});

  Result<Resources> missing = SelectResources(local, Opts("worker-0", ""));
  REQUIRE_FALSE(missing.ok());
  CHECK(missing.status().message() ==
        "--include 'worker-0': host 'worker-0' is not in the local host list (no --hostfile)");

  Result<Resources> bad_slot = SelectResources(local, Opts("localhost:2", ""));
  REQUIRE_FALSE(bad_slot.ok());
  CHECK(bad_slot.status().message() ==
        "--include 'localhost:2': host 'localhost' has no slot 2 (it has slots 0-1)");
}

}  // namespace
}  // namespace dslaunch::launcher
