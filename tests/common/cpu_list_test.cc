// CPU lists (common/cpu_list.h): DeepSpeed's --bind_core_list grammar and the kernel's sysfs lists.
#include "common/cpu_list.h"

#include <doctest/doctest.h>

#include <random>
#include <set>

namespace dslaunch {
namespace {

TEST_CASE("ParseCpuList reads numbers and inclusive ranges in ascending order") {
  struct Row {
    const char* text;
    std::vector<int> cpus;
  };
  for (const Row& row : {Row{"0", {0}}, Row{"0-3", {0, 1, 2, 3}}, Row{"0-3,8,10-11", {0, 1, 2, 3, 8, 10, 11}},
                         Row{"1,3-5,7", {1, 3, 4, 5, 7}}, Row{"5-5", {5}}, Row{"8191", {8191}}, Row{"", {}},
                         Row{"\n", {}}, Row{"0-1\n", {0, 1}}, Row{"0,64", {0, 64}}}) {
    CAPTURE(row.text);
    auto cpus = ParseCpuList(row.text);
    REQUIRE(cpus.ok());
    CHECK(*cpus == row.cpus);
  }
}

TEST_CASE("ParseCpuList names the offending item") {
  struct Row {
    const char* text;
    const char* message;
  };
  for (const Row& row : {
           Row{"3-1", "'3-1': the range ends below its start"},
           Row{"0,x", "'x': not a CPU number"},
           Row{"0, 1", "' 1': not a CPU number"},
           Row{"-1", "'-1': not a CPU number"},
           Row{"1-", "'1-': not a CPU number"},
           Row{"1-2-3", "'1-2-3': not a CPU number"},
           Row{"0x1", "'0x1': not a CPU number"},
           Row{"1-4,2", "'2' after '1-4': items must be ascending and must not overlap"},
           Row{"0-3,3-5", "'3-5' after '0-3': items must be ascending and must not overlap"},
           Row{"5,1", "'1' after '5': items must be ascending and must not overlap"},
           Row{"1,1", "'1' after '1': items must be ascending and must not overlap"},
           Row{"0,,1", "empty item (two commas, or a comma at an end)"},
           Row{"0,", "empty item (two commas, or a comma at an end)"},
           Row{"8192", "'8192': CPU 8192 is beyond the largest CPU id 8191"},
           Row{"0-99999999999", "'0-99999999999': CPU 99999999999 is beyond the largest CPU id 8191"},
       }) {
    CAPTURE(row.text);
    auto cpus = ParseCpuList(row.text);
    REQUIRE_FALSE(cpus.ok());
    CHECK(cpus.status().code() == StatusCode::kInvalidArgument);
    CHECK(cpus.status().message() == row.message);
  }
}

TEST_CASE("FormatCpuList writes the shortest list and parses back") {
  CHECK(FormatCpuList({}) == "");
  CHECK(FormatCpuList({4}) == "4");
  CHECK(FormatCpuList({0, 1}) == "0-1");
  CHECK(FormatCpuList({0, 1, 2, 3, 8, 10, 11}) == "0-3,8,10-11");
  for (const std::vector<int>& cpus : {std::vector<int>{0, 2, 4}, std::vector<int>{7, 8, 9, 100}}) {
    auto back = ParseCpuList(FormatCpuList(cpus));
    REQUIRE(back.ok());
    CHECK(*back == cpus);
  }
}

// The slow reference: every maximal run of consecutive ids as "A-B" (or "A" alone), comma-joined.
std::string ReferenceCpuList(const std::set<int>& cpus) {
  std::string out;
  for (auto it = cpus.begin(); it != cpus.end();) {
    int first = *it, last = *it;
    for (++it; it != cpus.end() && *it == last + 1; ++it) last = *it;
    if (!out.empty()) out += ",";
    out += first == last ? std::to_string(first) : std::to_string(first) + "-" + std::to_string(last);
  }
  return out;
}

TEST_CASE("FormatCpuList matches a slow reference on random sets, and every list parses back") {
  std::mt19937 rng(2811);
  for (int round = 0; round < 2000; ++round) {
    std::set<int> cpus;
    const int count = static_cast<int>(rng() % 40);  // 0-39 ids: empty, one, even and odd sizes
    const int span = 1 + static_cast<int>(rng() % 100);
    for (int i = 0; i < count; ++i) cpus.insert(static_cast<int>(rng() % span));
    if (rng() % 10 == 0) cpus.insert(kMaxCpuId - 1);  // the extreme
    const std::vector<int> sorted(cpus.begin(), cpus.end());
    CAPTURE(ReferenceCpuList(cpus));
    CHECK(FormatCpuList(sorted) == ReferenceCpuList(cpus));
    auto back = ParseCpuList(FormatCpuList(sorted));
    REQUIRE(back.ok());
    CHECK(*back == sorted);
  }
}

TEST_CASE("ParseCpuList refuses leading and trailing special characters and non-ASCII digits") {
  for (const char* text : {"-0", "@0", ":0", "[0-3]", "0-3]", "0:3", "0@1", "0-3,", ",0", " 0", "0 ", "0\n\n",
                           "\xd9\xa1", "1\xc2\xa0", "+1", "0-3\t"}) {
    CAPTURE(text);
    CHECK_FALSE(ParseCpuList(text).ok());
  }
}

}  // namespace
}  // namespace dslaunch
