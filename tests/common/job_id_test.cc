#include "common/job_id.h"

#include <doctest/doctest.h>

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

}  // namespace
}  // namespace dslaunch
