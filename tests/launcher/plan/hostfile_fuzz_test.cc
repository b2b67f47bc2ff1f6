// Bounded randomized test of the hostfile parser: mutations of valid hostfiles must give either a
// valid Hostfile or an error that says where ("hosts:LINE: ..."), never a crash, an exception or a
// hang. Case count and seed: tests/support/fuzz_cases.h (scripts/fuzz.sh runs it longer).
#include <doctest/doctest.h>

#include <array>
#include <random>
#include <regex>
#include <string>
#include <vector>

#include "launcher/plan/hostfile.h"
#include "tests/support/fuzz_cases.h"

namespace dslaunch::launcher {
namespace {

constexpr std::array<const char*, 6> kValidHostfiles = {
    "worker-0 slots=8\nworker-1 slots=8\n",
    "# cluster\nalice@10.0.0.7 slots=4 max_slots=8   # trailing\n\n[fe80::1] slots=2\n",
    "  a slots=1\r\nb slots=1024 max_slots=1024\r\n",
    "fe80::1%eth0 slots=2\nnode_01.cluster.local slots=16\n",
    "localhost slots=1",
    "bob@[2001:db8::7] slots=3\n#x\n127.0.0.1 slots=2 # y\n",
};

// Pieces of the grammar, and things around it, that mutations splice in.
constexpr std::array<const char*, 23> kTokens = {
    "slots=", "max_slots=", "=", "@", "[", "]", "#", "\n", "\r", "\t", " ", "::", "%", ":",
    "99999999999999999999", "1025", "0", "-1", "1024", "a", "A", "\xff", "slots=1\n"};

std::string Mutate(std::string text, std::mt19937_64& rng) {
  const int edits = 1 + static_cast<int>(rng() % 4);
  for (int e = 0; e < edits; ++e) {
    const std::size_t pos = text.empty() ? 0 : rng() % (text.size() + 1);
    switch (rng() % 5) {
      case 0:  // a random byte
        text.insert(pos, 1, static_cast<char>(rng() % 256));
        break;
      case 1:  // a token of the grammar
        text.insert(pos, rng() % 2 == 0 ? std::string(kTokens[rng() % kTokens.size()]) : std::string(1, '\0'));
        break;
      case 2:  // delete a run
        if (!text.empty()) text.erase(pos == text.size() ? pos - 1 : pos, 1 + rng() % 8);
        break;
      case 3:  // replace one byte
        if (!text.empty()) text[rng() % text.size()] = static_cast<char>(rng() % 256);
        break;
      case 4:  // duplicate a run (repeated hosts, long lines)
        if (!text.empty()) {
          std::size_t from = rng() % text.size();
          text.insert(pos, text.substr(from, 1 + rng() % 32));
        }
        break;
    }
  }
  return text;
}

TEST_CASE("ParseHostfile gives a valid hostfile or an error with its location for mutated input") {
  const uint64_t seed = testing::FuzzSeed();
  const int cases = testing::FuzzCases(4000);
  std::mt19937_64 rng(seed);
  // "hosts:LINE: what" for a bad line, "hosts: no hosts ..." for a file without any.
  const std::regex located("^hosts:([0-9]+: |\\s)[^\\n]+$");
  int accepted = 0;
  for (int i = 0; i < cases; ++i) {
    std::string text = Mutate(kValidHostfiles[rng() % kValidHostfiles.size()], rng);
    CAPTURE(seed);
    CAPTURE(i);
    CAPTURE(text);
    Result<Hostfile> parsed = ParseHostfile(text, "hosts");
    if (!parsed.ok()) {
      REQUIRE(parsed.status().code() == StatusCode::kInvalidArgument);
      REQUIRE(std::regex_match(parsed.status().message(), located));
      continue;
    }
    ++accepted;
    REQUIRE_FALSE(parsed->hosts.empty());
    int last_line = 0;
    for (const HostEntry& h : parsed->hosts) {
      REQUIRE_FALSE(h.host.empty());
      REQUIRE(h.slots >= 1);
      REQUIRE(h.slots <= kMaxSlotsPerHost);
      if (h.max_slots) REQUIRE((*h.max_slots >= h.slots && *h.max_slots <= kMaxSlotsPerHost));
      REQUIRE(h.line > last_line);
      last_line = h.line;
    }
  }
  // The mutations are small enough that some inputs stay valid: both paths are exercised.
  CHECK(accepted > 0);
  CHECK(accepted < cases);
}

}  // namespace
}  // namespace dslaunch::launcher
