#include "launcher/plan/hostfile.h"

#include <doctest/doctest.h>
#include <stdlib.h>
#include <unistd.h>

#include <fstream>
#include <random>
#include <string>
#include <vector>

namespace dslaunch::launcher {
namespace {

struct Host {
  std::string user;
  std::string host;
  int slots;
  std::optional<int> max_slots;
  int line;
};

std::vector<Host> Flatten(const Hostfile& hostfile) {
  std::vector<Host> hosts;
  for (const HostEntry& e : hostfile.hosts) hosts.push_back({e.user, e.host, e.slots, e.max_slots, e.line});
  return hosts;
}

void CheckHosts(const std::vector<Host>& got, const std::vector<Host>& want) {
  REQUIRE(got.size() == want.size());
  for (std::size_t i = 0; i < got.size(); ++i) {
    CAPTURE(i);
    CHECK(got[i].user == want[i].user);
    CHECK(got[i].host == want[i].host);
    CHECK(got[i].slots == want[i].slots);
    CHECK(got[i].max_slots == want[i].max_slots);
    CHECK(got[i].line == want[i].line);
  }
}

// DeepSpeed's test_hostfile_good text: indented lines, blank lines and comments.
constexpr char kDeepSpeedGood[] = R"(
    worker-1 slots=2
    worker-2 slots=2

    localhost slots=1
    123.23.12.10 slots=2

    #worker-1 slots=3
    # this is a comment

    )";

TEST_CASE("ParseHostfile accepts the documented grammar") {
  struct Case {
    const char* name;
    std::string text;
    std::vector<Host> want;
  };
  const std::vector<Case> cases = {
      {"deepspeed good hostfile",
       kDeepSpeedGood,
       {{"", "worker-1", 2, {}, 2},
        {"", "worker-2", 2, {}, 3},
        {"", "localhost", 1, {}, 5},
        {"", "123.23.12.10", 2, {}, 6}}},
      {"trailing comment", "worker-0 slots=4   # the GPU box\n", {{"", "worker-0", 4, {}, 1}}},
      {"comment glued to value", "worker-0 slots=4#x\n", {{"", "worker-0", 4, {}, 1}}},
      {"tabs and surrounding blanks", "\t worker-0\tslots=4 \t\n", {{"", "worker-0", 4, {}, 1}}},
      {"CRLF line ends", "a slots=1\r\nb slots=2\r\n", {{"", "a", 1, {}, 1}, {"", "b", 2, {}, 2}}},
      {"no final newline", "a slots=3", {{"", "a", 3, {}, 1}}},
      {"max_slots", "a slots=2 max_slots=8\n", {{"", "a", 2, 8, 1}}},
      {"max_slots first and equal", "a max_slots=2 slots=2\n", {{"", "a", 2, 2, 1}}},
      {"user@host", "alice@node1 slots=2\n", {{"alice", "node1", 2, {}, 1}}},
      {"fqdn with underscore", "node_01.cluster.local slots=8\n",
       {{"", "node_01.cluster.local", 8, {}, 1}}},
      {"bare IPv6", "fe80::1 slots=2\n", {{"", "fe80::1", 2, {}, 1}}},
      {"bracketed IPv6 is stored bare", "[::1] slots=1\n", {{"", "::1", 1, {}, 1}}},
      {"user and bracketed IPv6", "bob@[2001:db8::7] slots=1\n", {{"bob", "2001:db8::7", 1, {}, 1}}},
      {"IPv6 with zone id", "fe80::1%eth0 slots=1\n", {{"", "fe80::1%eth0", 1, {}, 1}}},
      {"largest slot count", "a slots=1024 max_slots=1024\n", {{"", "a", 1024, 1024, 1}}},
      {"comment-only lines before hosts", "# cluster\n#\n\nz slots=1\n", {{"", "z", 1, {}, 4}}},
  };
  for (const Case& c : cases) {
    SUBCASE(c.name) {
      CAPTURE(c.text);
      Result<Hostfile> parsed = ParseHostfile(c.text, "hosts");
      REQUIRE_MESSAGE(parsed.ok(), parsed.status().ToString());
      CHECK(parsed->path == "hosts");
      CheckHosts(Flatten(*parsed), c.want);
    }
  }
}

TEST_CASE("ParseHostfile reports what is wrong and where") {
  struct Case {
    const char* name;
    std::string text;
    std::string error;  // exact message
  };
  const std::vector<Case> cases = {
      // DeepSpeed test_hostfiles_bad.
      {"deepspeed duplicate host", "\n    worker-1 slots=2\n    worker-2 slots=1\n    worker-1 slots=1\n    ",
       "hosts:4: duplicate host 'worker-1' (first at line 2)"},
      {"deepspeed incorrect whitespace", "\n    this is bad slots=1\n    ",
       "hosts:2: malformed line 'this is bad slots=1': expected 'HOST slots=N [max_slots=M]' (one "
       "host per line)"},
      {"deepspeed no whitespace", "\n    missingslots\n    ",
       "hosts:2: missing slots=N for host 'missingslots'"},
      {"deepspeed empty", "\n    ",
       "hosts: no hosts (only comments and blank lines); expected lines like 'worker-0 slots=4'"},
      {"deepspeed mix of good and bad",
       "\n    worker-1 slots=2\n    this is bad slots=1\n    worker-2 slots=4\n    missingslots\n\n    ",
       "hosts:3: malformed line 'this is bad slots=1': expected 'HOST slots=N [max_slots=M]' (one "
       "host per line)"},
      // Our own.
      {"empty text", "", "hosts: no hosts (only comments and blank lines); expected lines like 'worker-0 slots=4'"},
      {"only comments", "# a\n  # b\n", "hosts: no hosts (only comments and blank lines); expected lines like 'worker-0 slots=4'"},
      {"duplicate host ignores case", "A slots=1\na slots=2\n", "hosts:2: duplicate host 'a' (first at line 1)"},
      {"duplicate host ignores user", "alice@a slots=1\nbob@a slots=1\n",
       "hosts:2: duplicate host 'a' (first at line 1)"},
      {"duplicate IPv6 bare and bracketed", "[::1] slots=1\n::1 slots=1\n",
       "hosts:2: duplicate host '::1' (first at line 1)"},
      {"spaces around =", "a slots = 2\n",
       "hosts:1: malformed line 'a slots = 2': expected 'HOST slots=N [max_slots=M]' (one host per line)"},
      {"empty slots value", "a slots=\n", "hosts:1: missing value for slots="},
      {"non-integer slots", "a slots=abc\n", "hosts:1: slots must be a positive integer, got 'abc'"},
      {"slots with suffix", "a slots=4x\n", "hosts:1: slots must be a positive integer, got '4x'"},
      {"fractional slots", "a slots=1.5\n", "hosts:1: slots must be a positive integer, got '1.5'"},
      {"plus sign", "a slots=+4\n", "hosts:1: slots must be a positive integer, got '+4'"},
      {"zero slots", "a slots=0\n", "hosts:1: slots must be at least 1, got 0"},
      {"negative slots", "a slots=-2\n", "hosts:1: slots must be at least 1, got -2"},
      {"huge slots", "a slots=99999999999999999999\n",
       "hosts:1: slots=99999999999999999999 exceeds the limit of 1024 slots per host (docs/hostfile.md)"},
      {"one slot over the limit", "a slots=1\nb slots=1025\n",
       "hosts:2: slots=1025 exceeds the limit of 1024 slots per host (docs/hostfile.md)"},
      {"max_slots over the limit", "a slots=4 max_slots=2048\n",
       "hosts:1: max_slots=2048 exceeds the limit of 1024 slots per host (docs/hostfile.md)"},
      {"max_slots below slots", "a slots=4 max_slots=2\n", "hosts:1: max_slots=2 is less than slots=4"},
      {"max_slots not a number", "a slots=4 max_slots=many\n",
       "hosts:1: max_slots must be a positive integer, got 'many'"},
      {"max_slots without slots", "a max_slots=4\n", "hosts:1: missing slots=N for host 'a'"},
      {"unknown key", "a slots=2 gpus=4\n", "hosts:1: unknown key 'gpus' (expected slots or max_slots)"},
      {"repeated key", "a slots=2 slots=3\n", "hosts:1: slots= given twice"},
      {"trailing junk", "a slots=2 extra\n", "hosts:1: trailing junk 'extra' after the host entry"},
      {"no host", "slots=2\n", "hosts:1: missing host before 'slots=2'"},
      {"two @", "a@b@c slots=1\n", "hosts:1: invalid host 'a@b@c': more than one '@'"},
      {"empty user", "@a slots=1\n",
       "hosts:1: invalid user name '' in '@a' (letters, digits, '.', '_', '-'; not starting with '-')"},
      {"empty host after user", "alice@ slots=1\n", "hosts:1: missing host name in 'alice@'"},
      {"host looks like an option", "-evil slots=1\n",
       "hosts:1: invalid host name '-evil' (letters, digits, '.', '_', '-'; starting with a letter or digit)"},
      {"host with shell characters", "a;rm slots=1\n",
       "hosts:1: invalid host name 'a;rm' (letters, digits, '.', '_', '-'; starting with a letter or digit)"},
      {"unclosed bracket", "[::1 slots=1\n", "hosts:1: invalid bracketed IPv6 address '[::1'"},
      {"bracketed non-IPv6", "[node1] slots=1\n", "hosts:1: invalid bracketed IPv6 address '[node1]'"},
      {"bad IPv6", "fe80::zz slots=1\n", "hosts:1: invalid IPv6 address 'fe80::zz'"},
      {"host:port is not a host", "a:22 slots=1\n", "hosts:1: invalid IPv6 address 'a:22'"},
      {"error on a later line keeps its number", "a slots=1\n\n# x\nb slots=0\n",
       "hosts:4: slots must be at least 1, got 0"},
  };
  for (const Case& c : cases) {
    SUBCASE(c.name) {
      CAPTURE(c.text);
      Result<Hostfile> parsed = ParseHostfile(c.text, "hosts");
      REQUIRE_FALSE(parsed.ok());
      CHECK(parsed.status().code() == StatusCode::kInvalidArgument);
      CHECK(parsed.status().message() == c.error);
    }
  }
}

TEST_CASE("ParseHostfile returns a value or an error for any input, never crashing") {
  // Deterministic random texts over the characters the grammar cares about.
  const std::string alphabet = "ab1-.:_@[]#=%\t\r\n slotsmax_slots=0123456789\xff";
  std::mt19937 rng(12345);
  for (int i = 0; i < 3000; ++i) {
    std::string text;
    std::size_t length = rng() % 60;
    for (std::size_t j = 0; j < length; ++j) text += alphabet[rng() % alphabet.size()];
    CAPTURE(text);
    Result<Hostfile> parsed = ParseHostfile(text, "fuzz");
    if (parsed.ok()) {
      REQUIRE_FALSE(parsed->hosts.empty());
      for (const HostEntry& e : parsed->hosts) CHECK(e.slots >= 1);
    } else {
      CHECK(parsed.status().code() == StatusCode::kInvalidArgument);
      CHECK(parsed.status().message().rfind("fuzz", 0) == 0);
    }
  }
}

TEST_CASE("ParseHostfile reports both lines of a duplicate host") {
  Result<Hostfile> parsed =
      ParseHostfile("# rack 1\na slots=1\nb slots=1\n\n\n\na slots=2\n", "hosts");
  REQUIRE_FALSE(parsed.ok());
  CHECK(parsed.status().message() == "hosts:7: duplicate host 'a' (first at line 2)");
}

// A fresh directory under /tmp, removed with its one file by the destructor.
class TempDir {
 public:
  TempDir() : path_("/tmp/dslaunch_hostfile_test_XXXXXX") {
    REQUIRE(mkdtemp(path_.data()) != nullptr);
  }
  ~TempDir() {
    ::unlink(File().c_str());
    ::rmdir(path_.c_str());
  }
  std::string File() const { return path_ + "/hosts"; }

 private:
  std::string path_;
};

TEST_CASE("ReadHostfile reads and parses a file, naming it in errors") {
  TempDir dir;
  std::string path = dir.File();
  {
    std::ofstream out(path);
    out << "# two nodes\nworker-0 slots=2\nworker-1 slots=bad\n";
  }
  Result<Hostfile> parsed = ReadHostfile(path);
  REQUIRE_FALSE(parsed.ok());
  CHECK(parsed.status().message() == path + ":3: slots must be a positive integer, got 'bad'");
  {
    std::ofstream out(path);
    out << "worker-0 slots=2\nworker-1 slots=4\n";
  }
  parsed = ReadHostfile(path);
  REQUIRE_MESSAGE(parsed.ok(), parsed.status().ToString());
  CHECK(parsed->path == path);
  CheckHosts(Flatten(*parsed), {{"", "worker-0", 2, {}, 1}, {"", "worker-1", 4, {}, 2}});
}

TEST_CASE("ReadHostfile reports a missing file as not found instead of running locally") {
  Result<Hostfile> parsed = ReadHostfile("/nonexistent/dslaunch/hosts");
  REQUIRE_FALSE(parsed.ok());
  CHECK(parsed.status().code() == StatusCode::kNotFound);
  CHECK(parsed.status().message() ==
        "hostfile '/nonexistent/dslaunch/hosts' does not exist (omit --hostfile to run on this "
        "machine only)");
}

TEST_CASE("ReadHostfile rejects a directory") {
  Result<Hostfile> parsed = ReadHostfile("/tmp");
  REQUIRE_FALSE(parsed.ok());
  CHECK(parsed.status().code() == StatusCode::kInvalidArgument);
  CHECK(parsed.status().message() == "hostfile '/tmp' is not a regular file");
}

TEST_CASE("The example hostfiles in hostfiles/ parse") {
  for (const char* name : {"example", "localhost"}) {
    CAPTURE(name);
    Result<Hostfile> parsed = ReadHostfile(std::string(DSLAUNCH_SOURCE_DIR) + "/hostfiles/" + name);
    CHECK_MESSAGE(parsed.ok(), parsed.status().ToString());
  }
}

TEST_CASE("LocalHostfile is one localhost entry with the given slots") {
  Hostfile local = LocalHostfile(3);
  CHECK(local.path.empty());
  CheckHosts(Flatten(local), {{"", "localhost", 3, {}, 0}});
}

TEST_CASE("SameHost and IsLocalhostName compare names without resolving them") {
  CHECK(SameHost("Worker-0", "worker-0"));
  CHECK_FALSE(SameHost("worker-0", "worker-01"));
  CHECK(IsLocalhostName("localhost"));
  CHECK(IsLocalhostName("LOCALHOST"));
  CHECK_FALSE(IsLocalhostName("127.0.0.1"));
  CHECK_FALSE(IsLocalhostName("localhost2"));
}

}  // namespace
}  // namespace dslaunch::launcher
