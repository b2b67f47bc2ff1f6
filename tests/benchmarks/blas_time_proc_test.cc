// libdslaunch-blas-time (benchmarks/blas_time.cc), the sgemm timer of scripts/bench-train.sh, in
// front of the real OpenBLAS: it counts every call and its FLOPs, the products stay right, and it
// finds the BLAS of a program that loaded it out of the global scope (PyTorch under Python).
#include <doctest/doctest.h>

#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "tests/support/subprocess.h"

namespace dslaunch::testing {
namespace {

using namespace std::chrono_literals;

// The fields of the one line the timer appended to `path`, by name.
std::map<std::string, std::string> TimerLine(const std::string& path) {
  std::ifstream in(path);
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  REQUIRE(lines.size() == 1);
  std::istringstream words(lines[0]);
  std::map<std::string, std::string> fields;
  for (std::string name, value; words >> name >> value;) {
    fields[name] = value;
    if (name == "program") break;
  }
  return fields;
}

std::vector<std::string> TimerEnv(const std::string& file) {
  return {std::string("LD_PRELOAD=") + DSLAUNCH_BLAS_TIME_LIBRARY, "DSLAUNCH_BLAS_TIME_FILE=" + file, "RANK=3",
          "OPENBLAS_NUM_THREADS=1"};
}

TEST_CASE("The sgemm timer counts a program's cblas_sgemm calls and their FLOPs, and the products stay right") {
  TempDir dir;
  const std::string file = dir.path() + "/times";
  const ProcessResult run =
      RunProcess({DSLAUNCH_SGEMM_CALLS, "5", "64", "48", "32"}, 60s, TimerEnv(file));
  REQUIRE_MESSAGE(run.exit_code == 0, run.err);
  const auto fields = TimerLine(file);
  CHECK(fields.at("rank") == "3");
  CHECK(fields.at("calls") == "5");
  CHECK(std::stod(fields.at("flops")) == 5.0 * 2 * 64 * 48 * 32);
  CHECK(std::stod(fields.at("sgemm_s")) > 0);
  CHECK(std::stod(fields.at("span_s")) >= std::stod(fields.at("sgemm_s")));
  CHECK(fields.at("program").find("sgemm_calls") != std::string::npos);
}

TEST_CASE("The sgemm timer counts sgemm_ calls from a library loaded with dlopen out of the global scope") {
  TempDir dir;
  const std::string file = dir.path() + "/times";
  const ProcessResult run = RunProcess(
      {DSLAUNCH_SGEMM_CALLS_DLOPEN, DSLAUNCH_FORTRAN_SGEMM_CALLER, "3", "16", "8", "24"}, 60s, TimerEnv(file));
  REQUIRE_MESSAGE(run.exit_code == 0, run.err);
  const auto fields = TimerLine(file);
  CHECK(fields.at("calls") == "3");
  CHECK(std::stod(fields.at("flops")) == 3.0 * 2 * 16 * 8 * 24);
}

TEST_CASE("Without DSLAUNCH_BLAS_TIME_FILE the sgemm timer writes nothing and the program runs as before") {
  const ProcessResult run = RunProcess({DSLAUNCH_SGEMM_CALLS, "2", "8", "8", "8"}, 60s,
                                       {std::string("LD_PRELOAD=") + DSLAUNCH_BLAS_TIME_LIBRARY});
  CHECK(run.exit_code == 0);
  CHECK(run.err.empty());
}

}  // namespace
}  // namespace dslaunch::testing
