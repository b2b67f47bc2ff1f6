#include "launcher/slurm/hostlist.h"

#include <doctest/doctest.h>

#include <algorithm>
#include <random>
#include <string>

namespace dslaunch::launcher {
namespace {

using Hosts = std::vector<std::string>;

// Every expansion below is what `scontrol show hostnames` of slurm-wlm 22.05.8 printed for the
// same expression on this machine (docs/slurm.md, "Hostlist expressions").
TEST_CASE("ExpandHostlist expands Slurm's hostlist expressions as scontrol does") {
  struct Row {
    std::string expression;
    Hosts hosts;
  };
  const Row rows[] = {
      {"node[01-04,07],gpu-[1-3]", {"node01", "node02", "node03", "node04", "node07", "gpu-1", "gpu-2", "gpu-3"}},
      {"n[1-2]-r[3-4]", {"n1-r3", "n1-r4", "n2-r3", "n2-r4"}},
      {"a,b[008-010],c", {"a", "b008", "b009", "b010", "c"}},
      {"x[9-11]", {"x9", "x10", "x11"}},
      {"rack[1-2]-node[01-02]", {"rack1-node01", "rack1-node02", "rack2-node01", "rack2-node02"}},
      {"h", {"h"}},
      {"node[098-101]", {"node098", "node099", "node100", "node101"}},
      {"a[1-2]b[3]", {"a1b3", "a2b3"}},
      {"x[1-010]", {"x1", "x2", "x3", "x4", "x5", "x6", "x7", "x8", "x9", "x10"}},
      {"x[5-5]", {"x5"}},
      {"a b", {"a", "b"}},
      {"[1-2]", {"1", "2"}},
      {"x[1-2],x1", {"x1", "x2", "x1"}},
      {"x[001-3]", {"x001", "x002", "x003"}},
      {"10.0.0.[1-2]", {"10.0.0.1", "10.0.0.2"}},
      {"", {}},
  };
  for (const Row& row : rows) {
    CAPTURE(row.expression);
    auto hosts = ExpandHostlist(row.expression);
    REQUIRE(hosts.ok());
    CHECK(*hosts == row.hosts);
  }
}

TEST_CASE("ExpandHostlist refuses what Slurm refuses, and unbalanced brackets, saying where") {
  struct Row {
    std::string expression;
    std::string message;
  };
  const Row rows[] = {
      {"x[010-1]", "hostlist 'x[010-1]' at offset 2: range '010-1' runs backwards"},
      {"x[]", "hostlist 'x[]' at offset 2: '' is not a number or a range N-M"},
      {"x[1,,2]", "hostlist 'x[1,,2]' at offset 4: '' is not a number or a range N-M"},
      {"x[1-2]y", "hostlist 'x[1-2]y' at offset 6: text 'y' after the last bracket group"},
      {"a[1-2]-b", "hostlist 'a[1-2]-b' at offset 6: text '-b' after the last bracket group"},
      {"x[1-2", "hostlist 'x[1-2' at offset 1: '[' is not closed"},
      {"x1-2]", "hostlist 'x1-2]' at offset 4: ']' without '['"},
      {"x[a-b]", "hostlist 'x[a-b]' at offset 2: 'a-b' is not a number or a range N-M"},
      {"x[[1]]", "hostlist 'x[[1]]' at offset 2: '[' inside a bracket group"},
      {"n[1-99999999]", "hostlist 'n[1-99999999]' at offset 2: range '1-99999999' names more than 100000 hosts"},
      {"a[1-1000]b[1-1000]", "hostlist 'a[1-1000]b[1-1000]' at offset 0: names more than 100000 hosts"},
  };
  for (const Row& row : rows) {
    CAPTURE(row.expression);
    auto hosts = ExpandHostlist(row.expression);
    REQUIRE_FALSE(hosts.ok());
    CHECK(hosts.status().code() == StatusCode::kInvalidArgument);
    CHECK(hosts.status().message() == row.message);
  }
}

TEST_CASE("ExpandHostlist gives back the hosts a random expression was written from, in order") {
  // Each expression is a comma-separated list of PREFIX[RANGES] groups, RANGES being numbers and
  // N-M ranges of one zero-padded width; the expected hosts are written out one by one.
  std::mt19937_64 rng(28);
  const char* prefixes[] = {"n", "node-", "10.0.0.", "gpu", "r1-n"};
  for (int trial = 0; trial < 1000; ++trial) {
    std::string expression;
    Hosts expected;
    const int groups = 1 + static_cast<int>(rng() % 3);
    for (int g = 0; g < groups; ++g) {
      const std::string prefix = prefixes[rng() % 5];
      const int width = 1 + static_cast<int>(rng() % 3);
      const int limit = width == 1 ? 10 : width == 2 ? 100 : 1000;
      std::string ranges;
      const int parts = 1 + static_cast<int>(rng() % 3);
      for (int p = 0; p < parts; ++p) {
        const int lo = static_cast<int>(rng() % static_cast<uint64_t>(limit));
        const int hi = std::min(limit - 1, lo + static_cast<int>(rng() % 4));
        auto padded = [width](int v) {
          std::string t = std::to_string(v);
          return std::string(static_cast<size_t>(width) - std::min(t.size(), static_cast<size_t>(width)), '0') + t;
        };
        ranges += (p == 0 ? "" : ",") + padded(lo) + (hi == lo ? "" : "-" + padded(hi));
        for (int v = lo; v <= hi; ++v) expected.push_back(prefix + padded(v));
      }
      expression += (g == 0 ? "" : ",") + prefix + "[" + ranges + "]";
    }
    CAPTURE(expression);
    auto hosts = ExpandHostlist(expression);
    REQUIRE(hosts.ok());
    CHECK(*hosts == expected);
  }
}

TEST_CASE("ExpandTasksPerNode repeats counts marked (xK)") {
  CHECK(*ExpandTasksPerNode("2(x3),1") == std::vector<int>{2, 2, 2, 1});
  CHECK(*ExpandTasksPerNode("4") == std::vector<int>{4});
  CHECK(*ExpandTasksPerNode("1,8(x2)") == std::vector<int>{1, 8, 8});
  for (const char* bad : {"", "0", "2(x0)", "2(3)", "2(x)", "x", "2,", "-1", "2(x3", "1000000000"}) {
    CAPTURE(bad);
    auto counts = ExpandTasksPerNode(bad);
    REQUIRE_FALSE(counts.ok());
    CHECK(counts.status().message().find("is not COUNT or COUNT(xREPEAT)") != std::string::npos);
  }
  CHECK(ExpandTasksPerNode("1(x200000)").status().message() ==
        "SLURM_TASKS_PER_NODE '1(x200000)' names more than 100000 nodes");
}

}  // namespace
}  // namespace dslaunch::launcher
