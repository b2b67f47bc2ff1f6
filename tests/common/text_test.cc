#include "common/text.h"

#include <doctest/doctest.h>

namespace dslaunch {
namespace {

TEST_CASE("EditDistance counts insertions, deletions and substitutions") {
  CHECK(EditDistance("", "") == 0);
  CHECK(EditDistance("hostfile", "hostfile") == 0);
  CHECK(EditDistance("hostfiel", "hostfile") == 2);
  CHECK(EditDistance("stage", "stages") == 1);
  CHECK(EditDistance("abc", "") == 3);
}

TEST_CASE("EnvironmentMap splits at the first '=' and skips entries without one") {
  const char* entries[] = {"A=1", "B=x=y", "EMPTY=", "junk", "A=2", nullptr};
  auto env = EnvironmentMap(entries);
  CHECK(env.size() == 3);
  CHECK(env.at("A") == "1");  // the first of duplicates, as getenv
  CHECK(env.at("B") == "x=y");
  CHECK(env.at("EMPTY").empty());
  CHECK(EnvironmentMap(nullptr).empty());
}

TEST_CASE("SplitText cuts at every separator and is JoinText's inverse") {
  CHECK(SplitText("", ':') == std::vector<std::string>{""});
  CHECK(SplitText(":", ':') == std::vector<std::string>{"", ""});
  CHECK(SplitText("a", ':') == std::vector<std::string>{"a"});
  CHECK(SplitText("a:b::c", ':') == std::vector<std::string>{"a", "b", "", "c"});
  CHECK(SplitText(":a:", ':') == std::vector<std::string>{"", "a", ""});
  CHECK(SplitText("\xc3\xa9:\xe2\x80\xae", ':') == std::vector<std::string>{"\xc3\xa9", "\xe2\x80\xae"});
  for (const char* text : {"", "x", "a b c", " lead", "trail ", "  "}) {
    CHECK(JoinText(SplitText(text, ' '), " ") == text);
  }
}

TEST_CASE("FormatSeconds prints seconds with one decimal") {
  CHECK(FormatSeconds(std::chrono::milliseconds(10400)) == "10.4 s");
  CHECK(FormatSeconds(std::chrono::milliseconds(0)) == "0.0 s");
  CHECK(FormatSeconds(std::chrono::milliseconds(1250)) == "1.2 s");  // round half to even, as printf
  CHECK(FormatSeconds(std::chrono::milliseconds(123456)) == "123.5 s");
}

TEST_CASE("LowerAscii lowers ASCII letters only") {
  CHECK(LowerAscii("GPipe 1F1B") == "gpipe 1f1b");
  CHECK(LowerAscii("") == "");
  CHECK(LowerAscii("\xC3\x89t\xC3\xA9") == "\xC3\x89t\xC3\xA9");  // UTF-8 bytes untouched
}

}  // namespace
}  // namespace dslaunch
