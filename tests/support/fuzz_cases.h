// Bounded randomized ("fuzz") tests in the unit tier: how many cases to run and from which seed.
//
// The unit tier runs a small fixed number of cases from a fixed seed, so a failure reproduces
// exactly and the tier stays fast. scripts/fuzz.sh runs the same tests longer by setting
// DSLAUNCH_FUZZ_CASES (a multiplier of each test's own default count) and DSLAUNCH_FUZZ_SEED;
// a failing case prints its seed and index (CAPTURE them) so it can be replayed.
#pragma once

#include <cstdint>
#include <cstdlib>
#include <string>

namespace dslaunch::testing {

// The seed every randomized test starts from unless DSLAUNCH_FUZZ_SEED says otherwise.
inline constexpr uint64_t kDefaultFuzzSeed = 0x5eed'd51a'0000'0001ull;

inline uint64_t FuzzSeed() {
  const char* s = std::getenv("DSLAUNCH_FUZZ_SEED");
  return s != nullptr && *s != '\0' ? std::strtoull(s, nullptr, 0) : kDefaultFuzzSeed;
}

// `default_cases` times the multiplier in DSLAUNCH_FUZZ_CASES (1 when unset).
inline int FuzzCases(int default_cases) {
  const char* s = std::getenv("DSLAUNCH_FUZZ_CASES");
  long m = s != nullptr && *s != '\0' ? std::strtol(s, nullptr, 10) : 1;
  return default_cases * static_cast<int>(m < 1 ? 1 : m);
}

}  // namespace dslaunch::testing
