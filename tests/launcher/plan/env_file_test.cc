#include "launcher/plan/env_file.h"

#include <doctest/doctest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <random>
#include <string>
#include <vector>

namespace dslaunch::launcher {
namespace {

TEST_CASE("ParseEnvFile reads names and values in file order") {
  struct Case {
    std::string text;
    EnvEntries want;
  };
  const std::vector<Case> cases = {
      {"", {}},
      {"A=1", {{"A", "1"}}},
      {"A=1\nB=2\n", {{"A", "1"}, {"B", "2"}}},
      {"A=1\r\nB=2\r\n", {{"A", "1"}, {"B", "2"}}},
      {"\xEF\xBB\xBF" "A=1\n", {{"A", "1"}}},
      {"# comment\n\n   \n\t# indented comment\nA=1\n", {{"A", "1"}}},
      {"  A = 1  \n", {{"A", "1"}}},
      {"export A=1\nexport\tB=2\n", {{"A", "1"}, {"B", "2"}}},
      {"exported=1\n", {{"exported", "1"}}},
      {"A=\n", {{"A", ""}}},
      {"A=hello world\n", {{"A", "hello world"}}},
      {"A=x#y # not a comment\n", {{"A", "x#y # not a comment"}}},
      {"A=a=b=c\n", {{"A", "a=b=c"}}},
      {"A=it's\n", {{"A", "it's"}}},
      {"A=1\nA=2\n", {{"A", "1"}, {"A", "2"}}},
      {"_x9=1\n", {{"_x9", "1"}}},
      {"A='single $HOME \\n \"x\"'\n", {{"A", "single $HOME \\n \"x\""}}},
      {"A=''\n", {{"A", ""}}},
      {"A=\"\"\n", {{"A", ""}}},
      {"A=\"  padded  \"\n", {{"A", "  padded  "}}},
      {"A=\"say \\\"hi\\\" \\\\ \\$5\"\n", {{"A", "say \"hi\" \\ $5"}}},
      {"A=\"C:\\temp\\new\"\n", {{"A", "C:\\temp\\new"}}},
      {"A=\"it's # here\"  # trailing comment\n", {{"A", "it's # here"}}},
      {"A='x'\t#c\n", {{"A", "x"}}},
      {"A=\"x\"   \n", {{"A", "x"}}},
      {"NCCL_SOCKET_IFNAME=^lo,docker\nPYTHONPATH=/src:/lib\n",
       {{"NCCL_SOCKET_IFNAME", "^lo,docker"}, {"PYTHONPATH", "/src:/lib"}}},
  };
  for (const Case& c : cases) {
    CAPTURE(c.text);
    Result<EnvEntries> got = ParseEnvFile(c.text, "f");
    REQUIRE_MESSAGE(got.ok(), got.status().ToString());
    CHECK(*got == c.want);
  }
}

TEST_CASE("ParseEnvFile reports path:line and what is wrong") {
  struct Case {
    std::string text;
    std::string want;  // the whole message
  };
  const std::vector<Case> cases = {
      {"A=1\nhf_abc123\n", "/h/.dslaunch_env:2: expected NAME=VALUE, but the line has no '='"},
      {"export A\n", "/h/.dslaunch_env:1: expected NAME=VALUE, but the line has no '='"},
      {"=1\n", "/h/.dslaunch_env:1: invalid variable name '' (letters, digits and '_', not "
               "starting with a digit)"},
      {"\n\n1A=1\n", "/h/.dslaunch_env:3: invalid variable name '1A' (letters, digits and '_', "
                     "not starting with a digit)"},
      {"MY-VAR=1\n", "/h/.dslaunch_env:1: invalid variable name 'MY-VAR' (letters, digits and "
                     "'_', not starting with a digit)"},
      {"A B=1\n", "/h/.dslaunch_env:1: invalid variable name 'A B' (letters, digits and '_', not "
                  "starting with a digit)"},
      {"A=\"open\n", "/h/.dslaunch_env:1: A: unterminated double quote (values are one line)"},
      {"A='open\nB=2'\n", "/h/.dslaunch_env:1: A: unterminated single quote (values are one line)"},
      {"A=\"x\"y\n", "/h/.dslaunch_env:1: A: unexpected text after the closing quote"},
      {"A='x'#c\n", "/h/.dslaunch_env:1: A: unexpected text after the closing quote"},
      {"A=\"x\" 'y'\n", "/h/.dslaunch_env:1: A: unexpected text after the closing quote"},
      {"PATH=/opt/bin:$PATH\n",
       "/h/.dslaunch_env:1: PATH: '$' outside single quotes; dslaunch does not expand variables: "
       "write the value out, or put it in single quotes for a literal '$'"},
      {"A=\"${HOME}\"\n",
       "/h/.dslaunch_env:1: A: '$' outside single quotes; dslaunch does not expand variables: "
       "write the value out, or put it in single quotes for a literal '$'"},
      {std::string("A=x\0y\n", 6), "/h/.dslaunch_env:1: NUL byte in line"},
  };
  for (const Case& c : cases) {
    CAPTURE(c.text);
    Result<EnvEntries> got = ParseEnvFile(c.text, "/h/.dslaunch_env");
    REQUIRE_FALSE(got.ok());
    CHECK(got.status().code() == StatusCode::kInvalidArgument);
    CHECK(got.status().message() == c.want);
  }
}

TEST_CASE("ParseEnvFile errors never quote a value") {
  for (const std::string text : {"HF_TOKEN=\"hf_secret\" x\n", "HF_TOKEN=\"hf_secret\n",
                                 "HF_TOKEN=hf_secret$\n", "hf_secret\n"}) {
    CAPTURE(text);
    Result<EnvEntries> got = ParseEnvFile(text, "f");
    REQUIRE_FALSE(got.ok());
    CHECK(got.status().message().find("hf_secret") == std::string::npos);
  }
}

TEST_CASE("ParseEnvFile counts lines through comments, blanks and CRLF") {
  Result<EnvEntries> got = ParseEnvFile("# c\r\n\r\nA=1\r\n  \r\nbad line\r\n", "x");
  REQUIRE_FALSE(got.ok());
  CHECK(got.status().message().starts_with("x:5: "));
}

TEST_CASE("IsValidEnvName accepts shell identifiers only") {
  for (const char* name : {"A", "_", "a_b", "NCCL_IB_HCA", "_9", "x1"}) {
    CAPTURE(name);
    CHECK(IsValidEnvName(name));
  }
  for (const char* name : {"", "1", "9A", "A-B", "A.B", "A B", "A=B", "É"}) {
    CAPTURE(name);
    CHECK_FALSE(IsValidEnvName(name));
  }
  // Special characters first, last and alone, and non-ASCII after a valid start.
  for (const char* name : {"-A", "A-", "@A", "A@", ":A", "A:", "[A", "A[", "A]", "-", "@", ":", "[", "A\xc3\xa9",
                           "_\xc3\x89", "A\x80"}) {
    CAPTURE(name);
    CHECK_FALSE(IsValidEnvName(name));
  }
}

TEST_CASE("IsValidEnvName agrees with the shell's rule [A-Za-z_][A-Za-z0-9_]* on 20,000 random names") {
  const std::string alphabet = "aZ_09-@:[]. =\xc3\xa9";
  auto reference = [](const std::string& name) {
    const std::string word = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz_0123456789";
    return !name.empty() && word.find(name.front()) < 53 && name.find_first_not_of(word) == std::string::npos;
  };
  std::mt19937 rng(28);
  for (int i = 0; i < 20000; ++i) {
    std::string name;
    for (size_t j = rng() % 6; j > 0; --j) name += alphabet[rng() % alphabet.size()];
    CAPTURE(name);
    CHECK(IsValidEnvName(name) == reference(name));
  }
}

TEST_CASE("EnvFileCandidates lists home then the working directory, DeepSpeed's name first") {
  CHECK(EnvFileCandidates("/home/u", "/work/run") ==
        std::vector<std::string>{"/home/u/.deepspeed_env", "/home/u/.dslaunch_env",
                                 "/work/run/.deepspeed_env", "/work/run/.dslaunch_env"});
  CHECK(EnvFileCandidates("/home/u/", "/home/u") ==
        std::vector<std::string>{"/home/u/.deepspeed_env", "/home/u/.dslaunch_env"});
  CHECK(EnvFileCandidates("", "/w") ==
        std::vector<std::string>{"/w/.deepspeed_env", "/w/.dslaunch_env"});
  CHECK(EnvFileCandidates("/", "") == std::vector<std::string>{"/.deepspeed_env", "/.dslaunch_env"});
  CHECK(EnvFileCandidates("", "").empty());
}

// A fresh directory under $TMPDIR (or /tmp), removed with its files at the end of the test.
class TempDir {
 public:
  TempDir() {
    const char* tmp = std::getenv("TMPDIR");
    std::string pattern = std::string(tmp != nullptr && *tmp != '\0' ? tmp : "/tmp") + "/envfile.XXXXXX";
    REQUIRE(::mkdtemp(pattern.data()) != nullptr);
    path_ = pattern;
  }
  ~TempDir() {
    for (const std::string& file : files_) ::unlink(file.c_str());
    ::rmdir(path_.c_str());
  }
  std::string Write(const std::string& name, const std::string& text) {
    std::string file = path_ + "/" + name;
    std::ofstream(file) << text;
    files_.push_back(file);
    return file;
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  std::vector<std::string> files_;
};

TEST_CASE("ReadEnvFile tells a missing file from an empty one") {
  TempDir dir;
  Result<std::optional<EnvEntries>> missing = ReadEnvFile(dir.path() + "/.dslaunch_env");
  REQUIRE(missing.ok());
  CHECK_FALSE(missing->has_value());

  Result<std::optional<EnvEntries>> under_file = ReadEnvFile(dir.Write("plain", "") + "/.dslaunch_env");
  REQUIRE(under_file.ok());
  CHECK_FALSE(under_file->has_value());

  Result<std::optional<EnvEntries>> empty = ReadEnvFile(dir.Write("empty", "# nothing\n"));
  REQUIRE(empty.ok());
  REQUIRE(empty->has_value());
  CHECK((*empty)->empty());
}

TEST_CASE("ReadEnvFile parses the file and reports errors with its path") {
  TempDir dir;
  std::string good = dir.Write(".dslaunch_env", "A=1\nexport B='two'\n");
  Result<std::optional<EnvEntries>> entries = ReadEnvFile(good);
  REQUIRE(entries.ok());
  CHECK(**entries == EnvEntries{{"A", "1"}, {"B", "two"}});

  std::string bad = dir.Write(".deepspeed_env", "A=1\nB\n");
  Result<std::optional<EnvEntries>> error = ReadEnvFile(bad);
  REQUIRE_FALSE(error.ok());
  CHECK(error.status().message() == bad + ":2: expected NAME=VALUE, but the line has no '='");

  Result<std::optional<EnvEntries>> directory = ReadEnvFile(dir.path());
  REQUIRE_FALSE(directory.ok());
  CHECK(directory.status().code() == StatusCode::kInvalidArgument);
  CHECK(directory.status().message() == dir.path() + ": cannot read: is a directory");

  std::string big = dir.Write("big", std::string(kMaxEnvFileBytes + 1, '#'));
  Result<std::optional<EnvEntries>> too_big = ReadEnvFile(big);
  REQUIRE_FALSE(too_big.ok());
  CHECK(too_big.status().message().starts_with(big + ": larger than "));
}

TEST_CASE("ReadEnvFiles keeps the files that exist, in order") {
  TempDir dir;
  std::string first = dir.Write("first", "A=1\n");
  std::string second = dir.Write("second", "A=2\nB=3\n");
  Result<std::vector<EnvFile>> files = ReadEnvFiles({first, dir.path() + "/missing", second});
  REQUIRE(files.ok());
  REQUIRE(files->size() == 2);
  CHECK((*files)[0].path == first);
  CHECK((*files)[0].entries == EnvEntries{{"A", "1"}});
  CHECK((*files)[1].path == second);
  CHECK((*files)[1].entries == EnvEntries{{"A", "2"}, {"B", "3"}});

  std::string bad = dir.Write("bad", "x\n");
  Result<std::vector<EnvFile>> error = ReadEnvFiles({first, bad, second});
  REQUIRE_FALSE(error.ok());
  CHECK(error.status().message().starts_with(bad + ":1: "));
}

}  // namespace
}  // namespace dslaunch::launcher
