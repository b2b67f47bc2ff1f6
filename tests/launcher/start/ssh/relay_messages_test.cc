#include "launcher/start/ssh/relay_messages.h"

#include <doctest/doctest.h>

namespace dslaunch::launcher {
namespace {

std::string Chomp(std::string line) {
  REQUIRE(line.ends_with("\n"));
  line.pop_back();
  return line;
}

TEST_CASE("A relay plan survives its line") {
  RelayPlan p;
  p.ssh.user = "alice";
  p.ssh.port = 2222;
  p.ssh.identities = {"/k/id_ed25519", "/k/id_rsa"};
  p.ssh.known_hosts = "/k/known_hosts";
  p.ssh.accept_new_host_keys = true;
  p.ssh.connect_timeout = std::chrono::milliseconds(2500);
  p.ssh.fanout = 3;
  p.ssh.home = "/home/launcher";  // not sent: the relay uses its own
  p.checks = {"/opt/dslaunch-agent", "dslaunch-agent 0.1.0", "/work dir"};
  p.self_rank = 4;
  p.nodes.resize(2);
  p.nodes[0].node_rank = 5;
  p.nodes[0].host = "10.0.0.6";
  p.nodes[1].node_rank = 6;
  p.nodes[1].host = "10.0.0.7";
  p.nodes[1].user = "bob";
  std::string line = Chomp(FormatPlanLine(p));
  CHECK(line.find('\n') == std::string::npos);
  auto c = ParseRelayCommand(line);
  REQUIRE(c.ok());
  REQUIRE(c->kind == RelayCommand::Kind::kPlan);
  const RelayPlan& q = c->plan;
  CHECK(q.ssh.user == "alice");
  CHECK(q.ssh.port == 2222);
  CHECK(q.ssh.identities == p.ssh.identities);
  CHECK(q.ssh.known_hosts == "/k/known_hosts");
  CHECK(q.ssh.accept_new_host_keys);
  CHECK(q.ssh.connect_timeout == std::chrono::milliseconds(2500));
  CHECK(q.ssh.fanout == 3);
  CHECK(q.ssh.home.empty());
  CHECK(q.checks.agent_path == "/opt/dslaunch-agent");
  CHECK(q.checks.agent_version == "dslaunch-agent 0.1.0");
  CHECK(q.checks.working_directory == "/work dir");
  CHECK(q.self_rank == 4);
  REQUIRE(q.nodes.size() == 2);
  CHECK(q.nodes[0].node_rank == 5);
  CHECK(q.nodes[0].host == "10.0.0.6");
  CHECK(q.nodes[1].user == "bob");
}

TEST_CASE("Secret, start and kill lines survive their lines; a secret with a newline is refused") {
  auto secret = FormatSecretLine("s3cr3t");
  REQUIRE(secret.ok());
  auto s = ParseRelayCommand(Chomp(*secret));
  REQUIRE(s.ok());
  CHECK(s->kind == RelayCommand::Kind::kSecret);
  CHECK(s->secret == "s3cr3t");
  CHECK(FormatSecretLine("a\nb").status().code() == StatusCode::kInvalidArgument);

  AgentCommand command{"/opt/a", "10.0.0.1", 4242, "job-7", 9, std::nullopt};
  auto start = ParseRelayCommand(Chomp(FormatStartLine(command)));
  REQUIRE(start.ok());
  CHECK(start->kind == RelayCommand::Kind::kStart);
  CHECK(start->command.node_rank == 9);
  CHECK(start->command.agent_path == "/opt/a");
  CHECK(start->command.endpoint_host == "10.0.0.1");
  CHECK(start->command.endpoint_port == 4242);
  CHECK(start->command.job_id == "job-7");

  auto kill = ParseRelayCommand(Chomp(FormatKillLine(12)));
  REQUIRE(kill.ok());
  CHECK(kill->kind == RelayCommand::Kind::kKill);
  CHECK(kill->rank == 12);
}

TEST_CASE("ParseRelayCommand says what is wrong with a bad line") {
  struct Case {
    const char* line;
    const char* error;  // start of the message
  };
  for (const Case& c : {Case{"launch {}", "start relay: unknown command 'launch'"},
                        Case{"plan {", "start relay: bad 'plan' line: "},
                        Case{"plan {}", "start relay: bad 'plan' line: "},
                        Case{"start {\"rank\":1}", "start relay: bad 'start' line: "},
                        Case{"kill x", "start relay: 'kill' needs a node rank, got 'x'"},
                        Case{"secret", "start relay: 'secret' without a secret"}}) {
    CAPTURE(c.line);
    auto r = ParseRelayCommand(c.line);
    REQUIRE_FALSE(r.ok());
    CHECK(r.status().code() == StatusCode::kInvalidArgument);
    CHECK(r.status().message().starts_with(c.error));
  }
}

TEST_CASE("Relay reports survive their lines, newlines inside become spaces") {
  auto fail = ParseRelayReport(Chomp(FormatFailReport(3, "cannot connect\n(timeout)")));
  REQUIRE(fail);
  CHECK(fail->kind == RelayReport::Kind::kFail);
  CHECK(fail->rank == 3);
  CHECK(fail->text == "cannot connect (timeout)");

  auto checked = ParseRelayReport(Chomp(FormatCheckedReport()));
  REQUIRE(checked);
  CHECK(checked->kind == RelayReport::Kind::kChecked);

  auto out = ParseRelayReport(Chomp(FormatOutReport(7, "dslaunch-agent: cannot reach  the launcher")));
  REQUIRE(out);
  CHECK(out->kind == RelayReport::Kind::kOut);
  CHECK(out->rank == 7);
  CHECK(out->text == "dslaunch-agent: cannot reach  the launcher");

  for (const std::optional<ExitStatus>& status :
       {std::optional<ExitStatus>(ExitStatus::Exited(3)), std::optional<ExitStatus>(ExitStatus::Signaled(9)),
        std::optional<ExitStatus>()}) {
    auto exit = ParseRelayReport(Chomp(FormatExitReport(2, status, "ssh channel to h closed")));
    REQUIRE(exit);
    CHECK(exit->kind == RelayReport::Kind::kExit);
    CHECK(exit->rank == 2);
    CHECK(exit->status == status);
    CHECK(exit->text == "ssh channel to h closed");
  }
}

TEST_CASE("Lines that are not well-formed relay reports are the head agent's own output") {
  for (const char* line : {"dslaunch-agent: started", "dslaunch-relay", "dslaunch-relay checked now",
                           "dslaunch-relay out x y", "dslaunch-relay exit 1 code:x d", "dslaunch-relay exit 1 kill:9 d",
                           "dslaunch-relay hello 1 x", "dslaunch-ready 12 v"}) {
    CAPTURE(line);
    CHECK_FALSE(ParseRelayReport(line).has_value());
  }
}

}  // namespace
}  // namespace dslaunch::launcher
