#include "common/error_record.h"

#include <doctest/doctest.h>

namespace dslaunch {
namespace {

TEST_CASE("An error record survives formatting and parsing") {
  ErrorRecord r{"rank 0: checkpoint of step 40: No space left on device", 1763912345123456789, false};
  auto back = ParseErrorRecord(FormatErrorRecord(r));
  REQUIRE(back.ok());
  CHECK(back->message == r.message);
  CHECK(back->time_ns == 1763912345123456789);
  CHECK_FALSE(back->caused_by_peer);
  r.caused_by_peer = true;
  CHECK(ParseErrorRecord(FormatErrorRecord(r))->caused_by_peer);
}

TEST_CASE("The formatted record is PyTorch's layout, with the timestamp in whole seconds") {
  std::string text = FormatErrorRecord({"boom", 1763912345999999999, true});
  CHECK(text ==
        "{\"dslaunch\":{\"caused_by_peer\":true,\"time_ns\":1763912345999999999},"
        "\"message\":{\"extraInfo\":{\"py_callstack\":\"\",\"timestamp\":\"1763912345\"},\"message\":\"boom\"}}\n");
}

TEST_CASE("A record written by PyTorch's @record is read: message and timestamp in seconds, not collateral") {
  auto r = ParseErrorRecord(
      R"({"message": {"message": "ValueError: boom", "extraInfo": {"py_callstack": "Traceback ...", "timestamp": "1700000000"}}})");
  REQUIRE(r.ok());
  CHECK(r->message == "ValueError: boom");
  CHECK(r->time_ns == 1700000000LL * 1000000000LL);
  CHECK_FALSE(r->caused_by_peer);
}

TEST_CASE("Unreadable error records are errors that say what is wrong") {
  struct Row {
    const char* text;
    const char* error;
  };
  for (const Row& row : {Row{"", "error record is not JSON"}, Row{"{\"message\": ", "error record is not JSON"},
                         Row{"[1, 2]", "error record has no 'message'"}, Row{"{}", "error record has no 'message'"},
                         Row{"{\"message\": 5}", "error record: 'message.message' is not a string"},
                         Row{"{\"message\": {\"message\": null}}", "error record: 'message.message' is not a string"}}) {
    CAPTURE(row.text);
    auto r = ParseErrorRecord(row.text);
    REQUIRE_FALSE(r.ok());
    CHECK(r.status().message() == row.error);
  }
  // Optional fields of the wrong type are ignored, not fatal.
  auto r = ParseErrorRecord(
      R"({"message": {"message": "m", "extraInfo": {"timestamp": "soon"}}, "dslaunch": {"time_ns": "x", "caused_by_peer": 1}})");
  REQUIRE(r.ok());
  CHECK(r->time_ns == 0);
  CHECK_FALSE(r->caused_by_peer);
}

}  // namespace
}  // namespace dslaunch
