// `dslaunch --help` (launcher/cli/help_text.h): grouped, wrapped at 100 columns, with the
// subcommands, and free of CLI11's own notation.
#include "launcher/cli/help_text.h"

#include <doctest/doctest.h>

#include <sstream>

#include "launcher/cli/cli.h"

namespace dslaunch::launcher {
namespace {

std::vector<std::string> Lines(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

TEST_CASE("WrapWords fills lines up to the width and puts a longer word on a line of its own") {
  CHECK(WrapWords("aa bb cc dd", 5) == std::vector<std::string>{"aa bb", "cc dd"});
  CHECK(WrapWords("aa bb cc", 6) == std::vector<std::string>{"aa bb", "cc"});
  CHECK(WrapWords("  aa   bb ", 80) == std::vector<std::string>{"aa bb"});
  CHECK(WrapWords("a verylongword b", 4) == std::vector<std::string>{"a", "verylongword", "b"});
  CHECK(WrapWords("", 10).empty());
}

TEST_CASE("FormatHelp writes usage once, then each group's options under its heading in order") {
  HelpPage page;
  page.usage = {"tool [OPTIONS] PROGRAM", "tool status"};
  page.description = "Does things.";
  page.entries = {{"First", "-a, --alpha N", "the alpha option, whose description is long enough to wrap"},
                  {"Second", "--a-name-longer-than-the-names-column", "short"},
                  {"First", "--beta", "beta"}};
  page.footer = "Footer.\n";
  const std::string want =
      "Usage: tool [OPTIONS] PROGRAM\n"
      "       tool status\n"
      "\n"
      "Does things.\n"
      "\n"
      "First:\n"
      "  -a, --alpha N                 the alpha option,\n"
      "                                whose description is\n"
      "                                long enough to wrap\n"
      "  --beta                        beta\n"
      "\n"
      "Second:\n"
      "  --a-name-longer-than-the-names-column\n"
      "                                short\n"
      "\n"
      "Footer.\n";
  CHECK(FormatHelp(page, 52) == want);
}

TEST_CASE("dslaunch --help fits 100 columns, names every group and subcommand, and has no CLI11 notation") {
  auto h = ParseCommandLine({"dslaunch", "--help"});
  REQUIRE(h.ok());
  REQUIRE(h->print.has_value());
  const std::string& help = *h->print;
  for (const std::string& line : Lines(help)) {
    CAPTURE(line);
    CHECK(line.size() <= kHelpWidth);
  }
  for (const char* heading :
       {"Hosts and slots:", "Program:", "Worker output:", "Running the job:", "Fault tolerance:",
        "Starting agents over SSH:", "Node mode (torchrun's rendezvous) and --no_ssh:", "Placement:", "Status page:",
        "Accepted from torchrun and DeepSpeed, changing nothing here:", "Subcommands:", "General:", "Examples:"}) {
    CAPTURE(std::string(heading));
    int found = 0;
    for (const std::string& line : Lines(help)) found += line == heading ? 1 : 0;
    CHECK(found == 1);
  }
  CHECK(help.find("Usage: dslaunch [OPTIONS] PROGRAM [ARGS...]\n") == 0);
  CHECK(help.find("Usage:", 1) == std::string::npos);
  for (const char* subcommand : {"\n       dslaunch status [JOB_ID]\n", "\n  status [JOB_ID] ",
                                 "\n       dslaunch logs [--lines N] [--log_dir DIR] JOB_ID RANK\n",
                                 "\n  logs JOB_ID RANK ", "\n       dslaunch report JOB_DIR\n", "\n  report JOB_DIR "}) {
    CAPTURE(std::string(subcommand));
    CHECK(help.find(subcommand) != std::string::npos);
  }
  // The options as a user types them, never CLI11's own notation.
  for (const char* shown : {"\n  -t, --tee [N] ", "\n  --no_tee ", "\n  --dry-run[=table|json] ",
                            "\n  --save_pid[=FILE] ", "\n  -H, --hostfile FILE ", "\n  --grace_period SECONDS "}) {
    CAPTURE(std::string(shown));
    CHECK(help.find(shown) != std::string::npos);
  }
  for (const char* artefact : {"{", "}", "TEXT", "INT", "FLOAT", ",--", "=30"}) {
    CAPTURE(std::string(artefact));
    CHECK(help.find(artefact) == std::string::npos);
  }
}

}  // namespace
}  // namespace dslaunch::launcher
