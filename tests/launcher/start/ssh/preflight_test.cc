#include "launcher/start/ssh/preflight.h"

#include <doctest/doctest.h>
#include <sys/stat.h>

#include <csignal>
#include <fstream>

#include "launcher/start/ssh/channel_process.h"
#include "tests/support/subprocess.h"

namespace dslaunch::launcher {
namespace {

bool Contains(const std::string& text, const std::string& needle) { return text.find(needle) != std::string::npos; }

PreflightChecks Checks() { return {"/opt/ds/bin/dslaunch-agent", "dslaunch-agent 0.1.0", "/home/u/my job"}; }

CommandResult Ended(int code, std::string out = "", std::string err = "") {
  return {ExitStatus::Exited(code), std::move(out), std::move(err)};
}

TEST_CASE("StagedAgentCommand enters the quoted working directory, checks the version and waits") {
  CHECK(StagedAgentCommand(Checks()) ==
        "cd -- '/home/u/my job' || exit 97; v=$(/opt/ds/bin/dslaunch-agent --version) || exit; "
        "printf 'dslaunch-ready %s %s\\n' \"$$\" \"$v\"; IFS= read -r c || exit 0; eval \"exec $c\"");
  CHECK(StagedAgentCommand({}) ==
        "v=; printf 'dslaunch-ready %s %s\\n' \"$$\" \"$v\"; IFS= read -r c || exit 0; eval \"exec $c\"");
}

TEST_CASE("ParseReadyLine reads the pid and version of the ready line only") {
  auto ready = ParseReadyLine("dslaunch-ready 4242 dslaunch-agent 0.1.0");
  REQUIRE(ready);
  CHECK(ready->pid == 4242);
  CHECK(ready->version == "dslaunch-agent 0.1.0");
  auto no_version = ParseReadyLine("dslaunch-ready 7 ");
  REQUIRE(no_version);
  CHECK(no_version->version == "");
  CHECK_FALSE(ParseReadyLine("dslaunch-agent 0.1.0"));
  CHECK_FALSE(ParseReadyLine("dslaunch-ready x 1"));
  CHECK_FALSE(ParseReadyLine("dslaunch-ready 0 v"));
  CHECK_FALSE(ParseReadyLine("dslaunch-ready 12"));
}

TEST_CASE("VersionFailure and EndedFailure explain why a node failed") {
  const PreflightChecks c = Checks();
  CHECK_FALSE(VersionFailure(c, "dslaunch-agent 0.1.0"));
  CHECK_FALSE(VersionFailure(c, "  dslaunch-agent 0.1.0\r"));
  CHECK(VersionFailure(c, "dslaunch-agent 0.0.9") ==
        "agent '/opt/ds/bin/dslaunch-agent' reports 'dslaunch-agent 0.0.9', the launcher needs 'dslaunch-agent 0.1.0'");
  CHECK(EndedFailure(c, Ended(97, "", "bash: line 1: cd: /home/u/my job: No such file or directory\n")) ==
        "working directory '/home/u/my job' does not exist or is not accessible "
        "(bash: line 1: cd: /home/u/my job: No such file or directory)");
  CHECK(EndedFailure(c, Ended(127, "", "sh: 1: /opt/ds/bin/dslaunch-agent: not found\n")) ==
        "agent '/opt/ds/bin/dslaunch-agent' not found (sh: 1: /opt/ds/bin/dslaunch-agent: not found)");
  CHECK(EndedFailure(c, Ended(126)) == "agent '/opt/ds/bin/dslaunch-agent' is not executable");
  CHECK(EndedFailure(c, Ended(3, "", "first\nlast words\n")) ==
        "'/opt/ds/bin/dslaunch-agent --version' ended with exit code 3 (last words)");
  CHECK(EndedFailure(c, {ExitStatus::Signaled(11), "", ""}) ==
        "'/opt/ds/bin/dslaunch-agent --version' ended with signal 11 (SIGSEGV)");
}

TEST_CASE("StagedAgentInput is the quoted argv and the secret, and refuses what cannot be a line") {
  CHECK(*StagedAgentInput({"/a b/agent", "--job_id", "j"}, "s3cret") == "'/a b/agent' --job_id j\ns3cret\n");
  CHECK(StagedAgentInput({"/agent", "two\nlines"}, "s").status().code() == StatusCode::kInvalidArgument);
  CHECK(StagedAgentInput({"/agent", std::string("nul\0", 4)}, "s").status().code() == StatusCode::kInvalidArgument);
  CHECK(StagedAgentInput({"/agent"}, "a\nb").status().code() == StatusCode::kInvalidArgument);
  CHECK(KillCommand(123) == "kill -KILL -123 2>/dev/null || kill -KILL 123");
}

// The staged command under real shells: it checks, reports ready, then execs what it is sent,
// and the exec'd program reads the secret from the same stdin.
TEST_CASE("The staged command runs the sent argv with the secret on stdin under dash and bash") {
  testing::TempDir dir;
  const std::string agent = dir.path() + "/my agent";
  {
    std::ofstream(agent) << "#!/bin/sh\n"
                            "if [ \"$1\" = --version ]; then echo 'dslaunch-agent 0.1.0'; exit 0; fi\n"
                            "read -r s; echo \"pid=$$ args=$* secret=$s\"\n";
  }
  ::chmod(agent.c_str(), 0755);
  PreflightChecks checks{agent, "dslaunch-agent 0.1.0", dir.path()};
  for (const char* shell : {"/bin/sh", "/bin/bash"}) {
    CAPTURE(shell);
    const std::string stdin_file = dir.path() + "/stdin";
    std::ofstream(stdin_file) << *StagedAgentInput({agent, "--job_id", "it's a job"}, "s3cret");
    auto r = testing::RunProcess({shell, "-c", "{ " + StagedAgentCommand(checks) + "; } < '" + stdin_file + "'"},
                                 std::chrono::seconds(10));
    CHECK(r.exit_code == 0);
    auto first = r.out.substr(0, r.out.find('\n'));
    auto ready = ParseReadyLine(first);
    REQUIRE(ready);
    CHECK(ready->version == "dslaunch-agent 0.1.0");
    CHECK(r.out.substr(first.size() + 1) ==
          "pid=" + std::to_string(ready->pid) + " args=--job_id it's a job secret=s3cret\n");
  }
  PreflightChecks no_dir{agent, "dslaunch-agent 0.1.0", dir.path() + "/missing"};
  auto in_shell = [](const std::string& command) {
    return testing::RunProcess({"/bin/sh", "-c", "{ " + command + "; } </dev/null"}, std::chrono::seconds(10));
  };
  auto r = in_shell(StagedAgentCommand(no_dir));
  CHECK(r.exit_code == kPreflightNoWorkdirExit);
  PreflightChecks no_agent{dir.path() + "/none", "dslaunch-agent 0.1.0", ""};
  r = in_shell(StagedAgentCommand(no_agent));
  CHECK(r.exit_code == 127);
  // Closing stdin before the argv arrives starts nothing.
  r = in_shell(StagedAgentCommand(checks));
  CHECK(r.exit_code == 0);
  CHECK(ParseReadyLine(r.out.substr(0, r.out.find('\n'))));
  CHECK(r.out.find("pid=") == std::string::npos);
}

TEST_CASE("FormatPreflightReport lists every failing node by rank on its own line") {
  std::string report = FormatPreflightReport(
      {{3, "10.0.0.4", "agent '/a' not found"}, {1, "10.0.0.2", "host key for 10.0.0.2 is not\nin known_hosts"}}, 4);
  CHECK(report ==
        "pre-flight failed on 2 of 4 nodes; nothing was started:\n"
        "  node 1 (10.0.0.2): host key for 10.0.0.2 is not in known_hosts\n"
        "  node 3 (10.0.0.4): agent '/a' not found");
  CHECK(Contains(FormatPreflightReport({{0, "h", "r"}}, 1), "failed on 1 of 1 node;"));
}

TEST_CASE("SignalFromSshName maps RFC 4254 signal names to numbers") {
  CHECK(SignalFromSshName("KILL") == SIGKILL);
  CHECK(SignalFromSshName("TERM") == SIGTERM);
  CHECK(SignalFromSshName("SEGV") == SIGSEGV);
  CHECK(SignalFromSshName("SIGINT") == SIGINT);
  CHECK_FALSE(SignalFromSshName("NOPE"));
  CHECK_FALSE(SignalFromSshName(""));
}

}  // namespace
}  // namespace dslaunch::launcher
