// The options of the command line, group by group (docs/cli.md): which hosts, the program, the
// workers' output, running the job, fault tolerance, SSH, node mode and --no_ssh, placement, the
// status page, and torchrun's and DeepSpeed's flags that change nothing here. Each group declares
// its options on the CLI11 app under its --help heading and, once CLI11 has read them, checks
// them and writes them into CliOptions. Used by cli.cc only; not thread-safe.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "common/status.h"
#include "launcher/cli/cli.h"

namespace CLI {
class App;
}  // namespace CLI

namespace dslaunch::launcher {

// The --help heading of --help and --version.
inline constexpr char kGeneralHeading[] = "General";

class OptionGroups {
 public:
  OptionGroups();
  ~OptionGroups();

  // Declares every option on `app`, in --help's order, the options that need no checking written
  // straight into `o` (which must outlive the parse). Every number option refuses a value that is
  // not a number of its kind, saying what one looks like ("--grace_period: 'abc' is not a number of
  // seconds (e.g. 30 or 0.5)").
  void Add(CLI::App& app, CliOptions& o);

  // Once CLI11 has parsed: checks what was given, group by group in a fixed order (so that of two
  // mistakes the same one is reported first), and fills the rest of `o`. `notes` gets one line per
  // accepted flag that changes nothing here. kInvalidArgument naming the option otherwise.
  Status Resolve(const CLI::App& app, CliOptions& o, std::vector<std::string>& notes);

 private:
  struct Groups;
  std::unique_ptr<Groups> groups_;
};

}  // namespace dslaunch::launcher
