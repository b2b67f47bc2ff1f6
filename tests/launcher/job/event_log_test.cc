#include "launcher/job/event_log.h"

#include <doctest/doctest.h>

#include <nlohmann/json.hpp>

namespace dslaunch::launcher {
namespace {

TEST_CASE("FormatEvent writes one JSON object per line, escaping the detail") {
  const std::string line = FormatEvent(1763900000123, 2, "fault", "rank 3 said \"boom\"\n\tagain\x01");
  REQUIRE(line.back() == '\n');
  CHECK(line.find('\n') == line.size() - 1);
  auto j = nlohmann::json::parse(line);
  CHECK(j.at("t_ms") == 1763900000123);
  CHECK(j.at("generation") == 2);
  CHECK(j.at("event") == "fault");
  CHECK(j.at("detail") == "rank 3 said \"boom\"\n\tagain\x01");
}

}  // namespace
}  // namespace dslaunch::launcher
