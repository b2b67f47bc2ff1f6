// DisplayText (common/display_text.h): control bytes escaped, invalid UTF-8 replaced, the rest kept.
#include "common/display_text.h"

#include <doctest/doctest.h>

#include <cstdio>
#include <string>

namespace dslaunch {
namespace {

const std::string kFffd = "\xEF\xBF\xBD";

TEST_CASE("DisplayText keeps empty and printable ASCII text as it is, newline and tab included") {
  CHECK(DisplayText("") == "");
  CHECK(DisplayText("hello, world") == "hello, world");
  std::string printable;
  for (int c = 0x20; c < 0x7F; ++c) printable += static_cast<char>(c);
  CHECK(DisplayText(printable) == printable);
  CHECK(DisplayText("line 1\nline 2\tend\n") == "line 1\nline 2\tend\n");
}

TEST_CASE("DisplayText escapes every other C0 control byte and DEL as \\xHH") {
  for (int c = 0; c < 0x20; ++c) {
    if (c == '\n' || c == '\t') continue;
    CAPTURE(c);
    char expected[8];
    std::snprintf(expected, sizeof(expected), "\\x%02x", c);
    CHECK(DisplayText(std::string("a") + static_cast<char>(c) + "b") == std::string("a") + expected + "b");
  }
  CHECK(DisplayText(std::string("\x7F", 1)) == "\\x7f");
  CHECK(DisplayText(std::string("\0", 1)) == "\\x00");
  CHECK(DisplayText("\x1b[31mred\x1b[0m\r") == "\\x1b[31mred\\x1b[0m\\x0d");
}

TEST_CASE("DisplayText keeps valid multi-byte UTF-8 and escapes the C1 controls") {
  const std::string text = "caf\xC3\xA9 \xE2\x82\xAC \xF0\x9F\x98\x80 \xF4\x8F\xBF\xBF \xEF\xBF\xBD";  // é € 😀 U+10FFFF U+FFFD
  CHECK(DisplayText(text) == text);
  CHECK(DisplayText("\xC2\xA0") == "\xC2\xA0");  // U+00A0, the first after the C1 range
  CHECK(DisplayText("\xC2\x80") == "\\u0080");
  CHECK(DisplayText("a\xC2\x9B" "1m") == "a\\u009b1m");  // CSI
}

TEST_CASE("DisplayText replaces truncated sequences, one U+FFFD per maximal ill-formed part") {
  CHECK(DisplayText("\xC3") == kFffd);                       // at the end
  CHECK(DisplayText("\xE2\x82") == kFffd);                   // two of three bytes
  CHECK(DisplayText("\xF0\x9F\x98") == kFffd);               // three of four
  CHECK(DisplayText("\xE2\x82" "A") == kFffd + "A");          // cut by ASCII, which is kept
  CHECK(DisplayText("\xE2\xE2\x82\xAC") == kFffd + "\xE2\x82\xAC");  // a new lead byte starts over
  CHECK(DisplayText("\x80") == kFffd);                       // a stray continuation byte
  CHECK(DisplayText("\x80\xBF") == kFffd + kFffd);
  CHECK(DisplayText("\xFF\xFE") == kFffd + kFffd);
}

TEST_CASE("DisplayText replaces overlong forms, surrogates and code points above U+10FFFF") {
  CHECK(DisplayText("\xC0\xAF") == kFffd + kFffd);           // overlong '/': C0 never starts a sequence
  CHECK(DisplayText("\xC1\xBF") == kFffd + kFffd);
  CHECK(DisplayText("\xE0\x80\xAF") == kFffd + kFffd + kFffd);  // overlong 3-byte form
  CHECK(DisplayText("\xF0\x80\x80\xAF") == kFffd + kFffd + kFffd + kFffd);
  CHECK(DisplayText("\xED\xA0\x80") == kFffd + kFffd + kFffd);  // U+D800, a surrogate
  CHECK(DisplayText("\xF4\x90\x80\x80") == kFffd + kFffd + kFffd + kFffd);  // U+110000
  CHECK(DisplayText("\xF5\x80") == kFffd + kFffd);
}

TEST_CASE("DisplayText applied twice changes nothing") {
  constexpr char kRaw[] = "a\0b\x1b[0m\xC3(\xE2\x82\xC2\x85 ok \xF0\x9F\x98\x80";
  const std::string raw(kRaw, sizeof(kRaw) - 1);
  const std::string once = DisplayText(raw);
  CHECK(DisplayText(once) == once);
}

}  // namespace
}  // namespace dslaunch
