#include "common/auth/secret.h"

#include <sys/stat.h>
#include <unistd.h>

#include <doctest/doctest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <set>

namespace dslaunch {
namespace {

// A fresh directory under the system temp dir, removed at the end of the test.
class TempDir {
 public:
  TempDir() {
    std::string tmpl = (std::filesystem::temp_directory_path() / "dslaunch-secret-XXXXXX").string();
    REQUIRE(::mkdtemp(tmpl.data()) != nullptr);
    path_ = tmpl;
  }
  ~TempDir() { std::filesystem::remove_all(path_); }
  std::string operator/(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

TEST_CASE("GenerateSecret returns 64 hex characters, different every time") {
  std::set<std::string> seen;
  for (int i = 0; i < 16; ++i) {
    std::string s = GenerateSecret();
    CHECK(s.size() == 2 * kSecretRandomBytes);
    CHECK(s.find_first_not_of("0123456789abcdef") == std::string::npos);
    seen.insert(s);
  }
  CHECK(seen.size() == 16);
}

TEST_CASE("WriteSecretFile creates a 0600 file that ReadSecretFile reads back") {
  TempDir dir;
  std::string path = dir / "secret";
  std::string secret = GenerateSecret();
  ::umask(022);
  REQUIRE(WriteSecretFile(path, secret).ok());
  struct stat st {};
  REQUIRE(::stat(path.c_str(), &st) == 0);
  CHECK((st.st_mode & 0777) == 0600);
  auto back = ReadSecretFile(path);
  REQUIRE(back.ok());
  CHECK(*back == secret);
}

TEST_CASE("WriteSecretFile never overwrites an existing file") {
  TempDir dir;
  std::string path = dir / "secret";
  REQUIRE(WriteSecretFile(path, "first").ok());
  Status st = WriteSecretFile(path, "second-secret");
  CHECK_FALSE(st.ok());
  CHECK(st.message().find(path) != std::string::npos);
  CHECK(st.message().find("second-secret") == std::string::npos);
  CHECK(*ReadSecretFile(path) == "first");
}

TEST_CASE("ReadSecretFile refuses files that others can read, missing files and empty files") {
  TempDir dir;
  std::string path = dir / "open";
  { std::ofstream(path) << "topsecret\n"; }
  REQUIRE(::chmod(path.c_str(), 0644) == 0);
  auto r = ReadSecretFile(path);
  CHECK(r.status().code() == StatusCode::kFailedPrecondition);
  CHECK(r.status().message().find("0644") != std::string::npos);
  CHECK(r.status().message().find("topsecret") == std::string::npos);

  REQUIRE(::chmod(path.c_str(), 0640) == 0);  // group access is allowed (Kubernetes fsGroup)
  auto ok = ReadSecretFile(path);
  REQUIRE(ok.ok());
  CHECK(*ok == "topsecret");  // one trailing newline dropped

  CHECK(ReadSecretFile(dir / "missing").status().code() == StatusCode::kNotFound);
  std::string empty = dir / "empty";
  { std::ofstream(empty) << ""; }
  REQUIRE(::chmod(empty.c_str(), 0600) == 0);
  CHECK(ReadSecretFile(empty).status().code() == StatusCode::kInvalidArgument);
}

TEST_CASE("ReadSecretFile reads a Kubernetes secret volume, whose files are links into ..data/") {
  // The kubelet's layout: DIR/secret -> ..data/secret, DIR/..data -> ..TIMESTAMP/, and the file
  // itself group-readable for the pod's fsGroup.
  TempDir dir;
  std::filesystem::create_directory(dir / "..2026_01_01");
  std::string file = dir / "..2026_01_01/secret";
  { std::ofstream(file) << "mounted-secret"; }
  REQUIRE(::chmod(file.c_str(), 0440) == 0);
  std::filesystem::create_directory_symlink("..2026_01_01", dir / "..data");
  std::filesystem::create_symlink("..data/secret", dir / "secret");
  auto read = ReadSecretFile(dir / "secret");
  REQUIRE_MESSAGE(read.ok(), read.status().ToString());
  CHECK(*read == "mounted-secret");

  // The mode is checked on the file the links reach.
  REQUIRE(::chmod(file.c_str(), 0444) == 0);
  CHECK(ReadSecretFile(dir / "secret").status().code() == StatusCode::kFailedPrecondition);
}

}  // namespace
}  // namespace dslaunch
