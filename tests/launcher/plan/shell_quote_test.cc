#include "launcher/plan/shell_quote.h"

#include <doctest/doctest.h>

#include "tests/support/subprocess.h"

namespace dslaunch::launcher {
namespace {

TEST_CASE("ShellQuote leaves plain words alone and single-quotes everything else") {
  struct Case {
    std::string in, out;
  };
  const Case cases[] = {
      {"abc", "abc"},
      {"/opt/dslaunch/bin/dslaunch-agent", "/opt/dslaunch/bin/dslaunch-agent"},
      {"172.30.77.1:4242", "172.30.77.1:4242"},
      {"--node_rank", "--node_rank"},
      {"user@host,a+b%c", "user@host,a+b%c"},
      {"", "''"},
      {"a b", "'a b'"},
      {"it's", "'it'\\''s'"},
      {"'", "''\\'''"},
      {"$HOME", "'$HOME'"},
      {"`id`", "'`id`'"},
      {"a;b", "'a;b'"},
      {"A=B", "A=B"},
      {"=cmd", "'=cmd'"},
      {"~root", "'~root'"},
      {"*", "'*'"},
      {"line\nbreak", "'line\nbreak'"},
      {"back\\slash", "'back\\slash'"},
      {"dir with \"quotes\"", "'dir with \"quotes\"'"},
  };
  for (const Case& c : cases) {
    CAPTURE(c.in);
    CHECK(ShellQuote(c.in) == c.out);
  }
}

TEST_CASE("ShellJoin quotes each word and joins them with spaces") {
  CHECK(ShellJoin({}) == "");
  CHECK(ShellJoin({"exec", "/a b/agent", "--job_id", ""}) == "exec '/a b/agent' --job_id ''");
}

TEST_CASE("A POSIX shell reads ShellJoin's output back as the same words") {
  const std::vector<std::string> words = {"", "plain", "two words", "it's", "'", "$HOME `id` $(id)", "a\nb",
                                          "tab\there", "*?[a]", "~", "A=B", "-n", "\\", "\"", "semi;colon&amp|",
                                          "-", "@host", ":x", "[a", "a]", "caf\xc3\xa9", "\xff\xfe", "x'\xc3\xa9'"};
  // printf '%s\0' WORDS... prints every word terminated by NUL, exactly as the shell parsed it.
  auto r = testing::RunProcess({"/bin/sh", "-c", "printf '%s\\0' " + ShellJoin(words)}, std::chrono::seconds(10));
  REQUIRE(r.exit_code == 0);
  std::vector<std::string> parsed;
  size_t start = 0;
  for (size_t i = 0; i < r.out.size(); ++i) {
    if (r.out[i] == '\0') {
      parsed.push_back(r.out.substr(start, i - start));
      start = i + 1;
    }
  }
  CHECK(parsed == words);
}

}  // namespace
}  // namespace dslaunch::launcher
