#include "common/job_id.h"

#include <doctest/doctest.h>

#include <random>
#include <string>

namespace dslaunch {
namespace {

TEST_CASE("ValidateJobId accepts ids that are safe as a directory name") {
  for (const char* id : {"j1", "20261122-185501-56270e", "exp.3_b-c", "A", "123456", "x.."}) {
    CAPTURE(id);
    CHECK(ValidateJobId(id).ok());
  }
  CHECK(ValidateJobId(std::string(kMaxJobIdLength, 'a')).ok());
}

TEST_CASE("ValidateJobId refuses empty, dot, slash and other ids with a clear message") {
  const std::string rule =
      "a job id is 1 to 128 characters from A-Z a-z 0-9 '.' '_' '-', starting with a letter or digit";
  struct Case {
    std::string id;
    std::string error;
  };
  for (const Case& c : {Case{"", "empty job id: " + rule},
                        Case{".", "job id '.' names a directory of its own: " + rule},
                        Case{"..", "job id '..' names a directory of its own: " + rule},
                        Case{"../x", "job id '../x': '/' is not allowed (" + rule + ")"},
                        Case{"a/b", "job id 'a/b': '/' is not allowed (" + rule + ")"},
                        Case{"a b", "job id 'a b': ' ' is not allowed (" + rule + ")"},
                        Case{"a\nb", "job id 'a?b': byte 10 is not allowed (" + rule + ")"},
                        Case{".hidden", "job id '.hidden' starts with '.': " + rule},
                        Case{"-x", "job id '-x' starts with '-': " + rule},
                        Case{std::string(kMaxJobIdLength + 1, 'a'),
                             "job id '" + std::string(40, 'a') + "...' has 129 characters: " + rule}}) {
    CAPTURE(c.id);
    Status s = ValidateJobId(c.id);
    REQUIRE_FALSE(s.ok());
    CHECK(s.code() == StatusCode::kInvalidArgument);
    CHECK(s.message() == c.error);
  }
}

TEST_CASE("ValidateJobId at the edges: special characters first, last and inside, non-ASCII, the longest") {
  for (const char* id : {"a-", "a.", "a_", "a--b", "9", "a.b.c", "x-"}) {
    CAPTURE(id);
    CHECK(ValidateJobId(id).ok());
  }
  struct Case {
    const char* id;
    const char* error_start;
  };
  for (const Case& c : {Case{"@a", "job id '@a': '@' is not allowed"}, Case{"a@", "job id 'a@': '@' is not allowed"},
                        Case{"a:b", "job id 'a:b': ':' is not allowed"}, Case{":", "job id ':': ':' is not allowed"},
                        Case{"[a]", "job id '[a]': '[' is not allowed"}, Case{"a[", "job id 'a[': '[' is not allowed"},
                        Case{"_a", "job id '_a' starts with '_'"}, Case{"-", "job id '-' starts with '-'"},
                        // UTF-8 "é": two bytes outside the charset, the first one named.
                        Case{"caf\xc3\xa9", "job id 'caf??': byte 195 is not allowed"},
                        Case{"\xc3\xa9t\xc3\xa9", "job id '??t??': byte 195 is not allowed"}}) {
    CAPTURE(c.id);
    Status s = ValidateJobId(c.id);
    REQUIRE_FALSE(s.ok());
    CHECK(s.message().starts_with(c.error_start));
  }
  CHECK(ValidateJobId(std::string(kMaxJobIdLength - 1, 'a') + "-").ok());
  CHECK_FALSE(ValidateJobId(std::string(kMaxJobIdLength, 'a') + "-").ok());
}

// The rule written the slow way: a regular-language check character by character.
bool ReferenceJobId(const std::string& id) {
  if (id.empty() || id.size() > kMaxJobIdLength || id == "." || id == "..") return false;
  const std::string allowed = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._-";
  if (id.find_first_not_of(allowed) != std::string::npos) return false;
  return allowed.find(id.front()) < 62;  // a letter or digit
}

TEST_CASE("ValidateJobId agrees with a reference on 20,000 random ids") {
  const std::string alphabet = "aZ09._-@:[]/ \xc3\xa9\n";
  std::mt19937 rng(28);
  for (int i = 0; i < 20000; ++i) {
    std::string id;
    const size_t length = rng() % 6 == 0 ? kMaxJobIdLength - 2 + rng() % 4 : rng() % 6;
    for (size_t j = 0; j < length; ++j) id += alphabet[rng() % alphabet.size()];
    CAPTURE(id);
    const Status s = ValidateJobId(id);
    CHECK(s.ok() == ReferenceJobId(id));
    if (!s.ok()) CHECK(s.code() == StatusCode::kInvalidArgument);
  }
}

}  // namespace
}  // namespace dslaunch
