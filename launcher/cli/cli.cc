#include "launcher/cli/cli.h"

#include <arpa/inet.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cctype>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <sstream>
#include <set>
#include <tuple>
#include <utility>

#include "common/cpu_list.h"
#include "common/job_id.h"
#include "common/text.h"
#include "dslaunch/config.h"
#include "launcher/cli/foreign_flags.h"
#include "launcher/cli/help_text.h"
#include "launcher/cli/node_mode_options.h"
#include "launcher/cli/option_spelling.h"

namespace dslaunch::launcher {
namespace {

constexpr char kExamples[] = R"(Examples:
  dslaunch --nproc_per_node 4 train.py --lr 3e-4      4 local workers of a Python script
  dslaunch --hostfile hosts train.py                  every slot of every host in 'hosts'
  dslaunch -H hosts --include 'w-0:0,1@w-1' train.py  slots 0,1 of w-0 and all of w-1
  dslaunch -H hosts --num_nodes 2 --num_gpus 4 x.py   first 2 hosts, 4 workers each
  dslaunch --nproc_per_node 8 --no_python ./a.out     any program, started directly
  dslaunch -H hosts --dry-run=json train.py           print the launch plan, start nothing
  dslaunch -H hosts --nnodes 2:4 --max_restarts 3 x.py  restart after failures, on 2 to 4 hosts
  dslaunch report JOB_DIR                             rebuild a job's report.html from its metrics

Workers get RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, NODE_RANK, NNODES, MASTER_ADDR,
MASTER_PORT, CUDA_VISIBLE_DEVICES, DSLAUNCH_STORE and DSLAUNCH_JOB_ID (docs/launch-plan.md).
The first worker that fails stops the whole job; dslaunch exits with its exit code (128+N for
signal N) and prints which rank failed, on which host, and the end of its stderr. With
--max_restarts N it starts the job again instead, up to N times (docs/elastic.md).
)";

// Every long name of the app's options, and the refused flags', for suggestions.
std::vector<std::string> KnownNames(const CLI::App& app) {
  std::vector<std::string> names = RefusedFlagNames();
  for (const CLI::Option* opt : app.get_options()) {
    for (const std::string& l : opt->get_lnames()) names.push_back("--" + l);
  }
  return names;
}

std::string Suggest(const CLI::App& app, const std::string& unknown) {
  const std::string best = NearestOption(unknown, KnownNames(app));
  return best.empty() ? "" : " (did you mean '" + best + "'?)";
}

// argv split at PROGRAM: the launcher's own words (argv[0] first, "--opt=" written as "--opt" "",
// "--" dropped) for CLI11, and the index of PROGRAM in argv (argv.size() if there is none).
struct SplitArgv {
  std::vector<std::string> head;
  size_t program = 0;
};

// A long option in the spelling its option has: as given, else with underscores (torchrun's
// --nproc-per-node), else with dashes (--dry_run); anything else unchanged.
std::string CanonicalName(const CLI::App& app, const std::string& name) {
  if (name.size() < 3 || name.compare(0, 2, "--") != 0 || app.get_option_no_throw(name) != nullptr) return name;
  for (const std::string& respelled : {Underscored(name), Dashed(name)}) {
    if (app.get_option_no_throw(respelled) != nullptr) return respelled;
  }
  return name;
}

// --tee takes torchrun's value from the next word when that word has a value's shape ("3",
// "0:3,1:2"), so that `--tee 3 train.py` never runs a program named 3; otherwise it is a switch
// (`--tee train.py`), as dslaunch's --tee always was.
bool IsTee(const CLI::Option* opt) { return opt->check_lname("tee"); }

// Splits argv without letting CLI11 look at the program's arguments; `given` collects the options
// that appear.
Result<SplitArgv> FindProgram(const CLI::App& app, const std::vector<std::string>& argv,
                              std::set<const CLI::Option*>& given) {
  SplitArgv split;
  if (!argv.empty()) split.head.push_back(argv[0]);
  for (size_t i = 1; i < argv.size(); ++i) {
    std::string a = argv[i];
    if (a.size() > 2 && a.compare(0, 2, "--") == 0) {
      const size_t eq = a.find('=');
      if (auto refusal = RefusalOf(a.substr(0, eq))) return InvalidArgumentError(*refusal);
      a = CanonicalName(app, a.substr(0, eq)) + (eq == std::string::npos ? "" : a.substr(eq));
    }
    if (a == "--") {
      split.program = i + 1;
      return split;
    }
    if (a.size() < 2 || a[0] != '-') {
      split.program = i;
      return split;
    }
    std::string name = a.substr(0, a.find('='));
    bool short_with_value = a[1] != '-' && a.size() > 2;  // -Hhosts
    if (short_with_value) name = a.substr(0, 2);
    const CLI::Option* opt = app.get_option_no_throw(name);
    if (opt == nullptr) {
      return InvalidArgumentError("unknown option '" + name + "'" + Suggest(app, name) +
                                  "; run 'dslaunch --help' for the list");
    }
    given.insert(opt);
    bool inline_value = a.find('=') != std::string::npos || short_with_value;
    if (inline_value && opt->get_items_expected_max() == 0) {
      // As argparse does for DeepSpeed's and torchrun's flags (and CLI11 would convert the value
      // with exceptions of its own).
      return InvalidArgumentError("option '" + name + "' takes no value: '" + a + "'");
    }
    if (!short_with_value && a.size() == name.size() + 1 && opt->get_items_expected_min() > 0) {
      // "--opt=" is "--opt" with an empty value, as in argparse; CLI11 would take the next word.
      split.head.push_back(name);
      split.head.emplace_back();
      continue;
    }
    if (IsTee(opt)) {
      // One word for CLI11, whichever way the value came (-t3, -t 3, --tee 3, --tee=3).
      std::string value;
      if (inline_value) {
        value = short_with_value ? a.substr(2) : a.substr(a.find('=') + 1);
      } else if (i + 1 < argv.size() && LooksLikeStdStreams(argv[i + 1])) {
        value = argv[++i];
      }
      split.head.push_back(value.empty() && !inline_value ? std::string("--tee") : "--tee=" + value);
      continue;
    }
    split.head.push_back(a);
    // Options with an optional value (--dry-run, --save_pid) take it only in the '=' form, so that
    // PROGRAM is never mistaken for their value.
    if (opt->get_items_expected_min() > 0 && !inline_value && i + 1 < argv.size()) {
      split.head.push_back(argv[++i]);  // the option's value, whatever it looks like
    }
  }
  split.program = argv.size();
  return split;
}

// The arguments that the PET_<NAME> variables of `environment` give for options absent from the
// command line (torchrun reads every option from them; Kubernetes' PyTorchJob sets PET_NNODES,
// PET_NPROC_PER_NODE, PET_NODE_RANK, PET_MASTER_ADDR, PET_MASTER_PORT, PET_RDZV_ENDPOINT, ...).
// `used` gets the names of the variables taken, for messages.
Result<std::vector<std::string>> EnvironmentArguments(const CLI::App& app, const std::set<const CLI::Option*>& given,
                                                      const std::map<std::string, std::string>& environment,
                                                      std::vector<std::string>& used) {
  std::vector<std::string> args;
  if (environment.empty()) return args;
  for (const CLI::Option* opt : app.get_options()) {
    if (given.count(opt) > 0) continue;
    for (const std::string& l : opt->get_lnames()) {
      if (l == "help" || l == "version") continue;
      std::string var = "PET_" + l;
      std::transform(var.begin(), var.end(), var.begin(), [](unsigned char c) {
        return c == '-' ? '_' : static_cast<char>(std::toupper(c));
      });
      auto it = environment.find(var);
      if (it == environment.end()) continue;
      const std::string& value = it->second;
      const std::string option = "--" + l;
      used.push_back(var);
      if (IsTee(opt)) {  // torchrun's PET_TEE: a value such as 3 or 0:3 (1 is stdout, not "set")
        args.push_back(value.empty() || value == "true" || value == "True" ? option : option + "=" + value);
      } else if (opt->get_items_expected_min() == 0) {  // a flag, or an option whose value is optional
        if (value == "0" || value == "false" || value == "False") break;
        if (value.empty() || value == "1" || value == "true" || value == "True") {
          args.push_back(option);
        } else if (opt->get_items_expected_max() > 0) {
          args.push_back(option + "=" + value);
        } else {
          return InvalidArgumentError(var + "='" + value + "': " + option +
                                      " is a flag; expected 1 or true to set it, 0 or false to leave it off");
        }
      } else {
        args.push_back(option);
        args.push_back(value);
      }
      break;  // one variable per option, the first of its names found
    }
  }
  return args;
}

// A number of seconds from the command line as milliseconds in [min, max]; the range is checked
// on the double, before any conversion could overflow. `hint`, if any, follows the range in the
// message: what else the user may do.
Result<std::chrono::milliseconds> Duration(const char* option, double seconds, std::chrono::milliseconds min,
                                          std::chrono::milliseconds max, const char* hint = nullptr) {
  const double min_s = std::chrono::duration<double>(min).count();
  const double max_s = std::chrono::duration<double>(max).count();
  if (!std::isfinite(seconds) || seconds < min_s || seconds > max_s) {
    std::ostringstream msg;
    msg << option << " " << seconds << ": expected seconds from " << min_s << " to " << max_s;
    if (hint != nullptr) msg << " (" << hint << ")";
    return InvalidArgumentError(msg.str());
  }
  return std::chrono::milliseconds(static_cast<int64_t>(std::llround(seconds * 1000)));
}

// A node count of --nnodes: a decimal integer from 1, nothing else.
std::optional<int> NodeCount(std::string_view text) {
  int value = 0;
  const char* end = text.data() + text.size();
  auto [ptr, ec] = std::from_chars(text.data(), end, value);
  if (text.empty() || ec != std::errc() || ptr != end) return std::nullopt;
  return value;
}

// torchrun's --nnodes: "N" (a fixed number of nodes) or "MIN:MAX" (an elastic range).
struct NnodesValue {
  int min_nodes = 0;
  int max_nodes = 0;
  bool range = false;
};

Result<NnodesValue> ParseNnodes(const std::string& text) {
  const std::string bad = "--nnodes '" + text + "': expected N or MIN:MAX with 1 <= MIN <= MAX (e.g. 4 or 2:4)";
  NnodesValue v;
  const size_t colon = text.find(':');
  std::optional<int> min = NodeCount(std::string_view(text).substr(0, colon));
  std::optional<int> max = colon == std::string::npos ? min : NodeCount(std::string_view(text).substr(colon + 1));
  if (!min || !max || *min < 1 || *max < *min) return InvalidArgumentError(bad);
  v.min_nodes = *min;
  v.max_nodes = *max;
  v.range = colon != std::string::npos;
  return v;
}

// The fault-tolerance options as given (docs/cli.md, "Fault tolerance"); absent: not given.
struct ElasticArgs {
  std::optional<std::string> nnodes;
  bool elastic_training = false;
  std::optional<int> min_elastic_nodes;
  std::optional<int> max_elastic_nodes;
  std::optional<int> max_restarts;
};

// Fills num_nodes (from --nnodes N), elastic_nodes and max_restarts of `o`; o.num_nodes holds
// --num_nodes already.
Status ResolveElastic(const ElasticArgs& a, CliOptions& o) {
  for (auto [name, value] : {std::pair{"--min_elastic_nodes", a.min_elastic_nodes},
                             std::pair{"--max_elastic_nodes", a.max_elastic_nodes}}) {
    if (!value) continue;
    const std::string given = std::string(name) + " " + std::to_string(*value);
    if (!a.elastic_training) {
      return InvalidArgumentError(given + " needs --elastic_training (DeepSpeed ignores it without), or give the "
                                          "range as --nnodes MIN:MAX");
    }
    if (*value < 1) return InvalidArgumentError(given + ": expected a number of nodes >= 1");
  }
  if (a.min_elastic_nodes && a.max_elastic_nodes && *a.min_elastic_nodes > *a.max_elastic_nodes) {
    return InvalidArgumentError("--min_elastic_nodes " + std::to_string(*a.min_elastic_nodes) +
                                " is above --max_elastic_nodes " + std::to_string(*a.max_elastic_nodes) +
                                "; the minimum must not exceed the maximum");
  }
  std::string num_nodes_option = o.num_nodes ? "--num_nodes " + std::to_string(*o.num_nodes) : "";
  if (a.elastic_training) {
    NodeRange r;
    r.option = "--elastic_training";
    if (a.min_elastic_nodes) {
      r.min_nodes = *a.min_elastic_nodes;
      r.option += " --min_elastic_nodes " + std::to_string(r.min_nodes);
    }
    if (a.max_elastic_nodes) {
      r.max_nodes = *a.max_elastic_nodes;
      r.option += " --max_elastic_nodes " + std::to_string(*r.max_nodes);
    }
    o.elastic_nodes = r;
  }
  if (a.nnodes) {
    DSLAUNCH_ASSIGN_OR_RETURN(NnodesValue n, ParseNnodes(*a.nnodes));
    const std::string given = "--nnodes " + *a.nnodes;
    if (!n.range) {
      // torchrun's fixed node count is DeepSpeed's --num_nodes: the first N selected hosts.
      if (o.num_nodes && *o.num_nodes != n.min_nodes) {
        return InvalidArgumentError(given + " and " + num_nodes_option +
                                    " disagree: both give the number of nodes; keep one of them");
      }
      o.num_nodes = n.min_nodes;
      num_nodes_option = given;
    } else {
      for (auto [name, deepspeed, mine] : {std::tuple{"--min_elastic_nodes", a.min_elastic_nodes, n.min_nodes},
                                           std::tuple{"--max_elastic_nodes", a.max_elastic_nodes, n.max_nodes}}) {
        if (deepspeed && *deepspeed != mine) {
          return InvalidArgumentError(given + " and " + name + " " + std::to_string(*deepspeed) +
                                      " disagree: both give the range of nodes; keep one of them");
        }
      }
      o.elastic_nodes = NodeRange{n.min_nodes, n.max_nodes, given};
    }
  }
  if (o.elastic_nodes && o.num_nodes && o.elastic_nodes->min_nodes > *o.num_nodes) {
    return InvalidArgumentError(o.elastic_nodes->option + " needs at least " +
                                std::to_string(o.elastic_nodes->min_nodes) + " nodes but " + num_nodes_option +
                                " selects fewer; select more nodes or lower the minimum");
  }
  if (a.max_restarts && *a.max_restarts < 0) {
    return InvalidArgumentError("--max_restarts " + std::to_string(*a.max_restarts) +
                                ": expected a number of restarts >= 0 (0: the first failure ends the job)");
  }
  o.max_restarts = a.max_restarts.value_or(a.elastic_training ? kDeepSpeedElasticMaxRestarts : 0);
  return Status::Ok();
}

// A CLI11 check that the value is one of `values`: "'x': expected on or off" (CLI11's own says "x not
// in {on,off}").
CLI::Validator OneOf(std::vector<std::string> values) {
  std::string expected;
  for (size_t i = 0; i < values.size(); ++i) {
    expected += (i == 0 ? "" : i + 1 == values.size() ? " or " : ", ") + values[i];
  }
  return CLI::Validator(
      [values, expected](std::string& value) {
        for (const std::string& v : values) {
          if (v == value) return std::string();
        }
        return "'" + value + "': expected " + expected;
      },
      "", "one of");
}

// The status page's options as given on the command line.
struct StatusArgs {
  bool port_given = false;
  int port = -1;
  bool bind_given = false;
  std::string bind;
  std::vector<std::string> hosts;  // --status_host, each value split at commas
  bool metrics_open = false;
};

bool IsIpAddress(const std::string& text) {
  unsigned char address[sizeof(in6_addr)];
  return ::inet_pton(AF_INET, text.c_str(), address) == 1 || ::inet_pton(AF_INET6, text.c_str(), address) == 1;
}

// A DNS name (letters, digits, '-' and '.', not starting with '-' or '.') or an IP address.
Status ValidateStatusHost(const std::string& host) {
  if (IsIpAddress(host)) return Status::Ok();
  constexpr size_t kMaxDnsName = 253;
  bool valid = !host.empty() && host.size() <= kMaxDnsName && host.front() != '-' && host.front() != '.';
  for (char c : host) {
    valid = valid && (std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '.');
  }
  if (valid) return Status::Ok();
  const std::string hint = host.find(':') != std::string::npos ? " without a port (any port is accepted)" : "";
  return InvalidArgumentError("--status_host '" + host + "': expected a host name or an IP address" + hint +
                              ", the name a browser uses for this machine");
}

// --status_port, --status_bind, --status_host and --status_metrics_open into `o`.
Status ResolveStatusPage(const StatusArgs& a, CliOptions& o) {
  for (const auto& [given, name] : {std::pair{a.bind_given, "--status_bind " + a.bind},
                                    std::pair{!a.hosts.empty(), std::string("--status_host")},
                                    std::pair{a.metrics_open, std::string("--status_metrics_open")}}) {
    if (given && !a.port_given) return InvalidArgumentError(name + " needs --status_port PORT (0: any free port)");
  }
  if (!a.port_given) return Status::Ok();
  if (a.port < 0 || a.port > 65535) {
    return InvalidArgumentError("--status_port " + std::to_string(a.port) + " is not a TCP port (1-65535, or 0 for any free port)");
  }
  o.status_port = static_cast<uint16_t>(a.port);
  if (a.bind_given) {
    if (!IsIpAddress(a.bind)) {
      return InvalidArgumentError("--status_bind '" + a.bind +
                                  "': expected an IP address (127.0.0.1, 0.0.0.0 for every interface, ::1), not a name");
    }
    o.status_bind = a.bind;
  }
  for (const std::string& host : a.hosts) DSLAUNCH_RETURN_IF_ERROR(ValidateStatusHost(host));
  o.status_hosts = a.hosts;
  o.status_metrics_open = a.metrics_open;
  return Status::Ok();
}

}  // namespace

Result<ElasticOptions> ElasticOptionsFor(const CliOptions& options, int candidates) {
  ElasticOptions e;
  e.max_restarts = options.max_restarts;
  if (!options.elastic_nodes) {
    e.min_nodes = e.max_nodes = candidates;
    return e;
  }
  const NodeRange& r = *options.elastic_nodes;
  if (r.min_nodes > candidates) {
    return InvalidArgumentError(r.option + ": the job needs at least " + std::to_string(r.min_nodes) +
                                " nodes but the hostfile selection has " + std::to_string(candidates) +
                                "; list more hosts or lower the minimum");
  }
  e.min_nodes = r.min_nodes;
  e.max_nodes = r.max_nodes.value_or(candidates);
  return e;
}

namespace {

// The command line as groups of options, one per concept. Each group declares its options on the
// app (Add, in the order --help lists them and PET_ variables are looked up) and, once CLI11 has
// read them, checks what was given and writes it into CliOptions (Resolve). Parse resolves the
// groups in a fixed order, so that of two mistakes the same one is reported first.

// Which hosts and slots the job uses, and the contract's MASTER_ADDR/MASTER_PORT.
struct SelectionGroup {
  static constexpr char kHeading[] = "Hosts and slots";
  std::string hostfile;
  int num_nodes = -1;
  std::string nproc_text;

  void Add(CLI::App& app, CliOptions& o) {
    app.add_option("-H,--hostfile", hostfile, "hostfile with 'host slots=N' lines (docs/hostfile.md); default: this "
                   "machine alone")->option_text("FILE");
    app.add_option("-i,--include", o.include, "use only these hosts/slots: 'host[:s,s]@host...'")->option_text("SPEC");
    app.add_option("-e,--exclude", o.exclude, "do not use these hosts/slots, same grammar as --include")
        ->option_text("SPEC");
    app.add_option("--num_nodes", num_nodes, "use the first N hosts of the hostfile")->option_text("N");
    app.add_option("--num_gpus,--nproc_per_node,--num_accelerators", nproc_text,
                   "workers per host (slots 0..N-1); torchrun's auto (GPUs, else cores), gpu, cpu")
        ->option_text("N");
    app.add_option("--master_addr", o.master_addr, "MASTER_ADDR for workers (default: first host)")
        ->option_text("ADDR");
    app.add_option("--master_port", o.master_port, "MASTER_PORT for workers (default 29500)")->option_text("PORT");
  }

  Status Resolve(const CLI::App& app, CliOptions& o) const {
    if (app.count("--hostfile") > 0) o.hostfile = hostfile;
    if (num_nodes != -1) o.num_nodes = num_nodes;
    if (app.count("--nproc_per_node") > 0) {
      DSLAUNCH_RETURN_IF_ERROR(ParseNproc(nproc_text, o));
    }
    if (o.master_port < 1 || o.master_port > 65535) {
      return InvalidArgumentError("--master_port " + std::to_string(o.master_port) + " is not a TCP port (1-65535)");
    }
    return Status::Ok();
  }
};

// How PROGRAM starts.
struct ProgramGroup {
  static constexpr char kHeading[] = "Program";
  std::string python;

  void Add(CLI::App& app, CliOptions& o) {
    app.add_flag("--no_python", o.no_python, "start PROGRAM directly, not under python3");
    app.add_flag("-m,--module", o.module, "PROGRAM is a Python module (python3 -m)");
    app.add_flag("--run_path", o.run_path, "PROGRAM is a Python script whatever its name (torchrun's --run-path)");
    app.add_flag("--no_local_rank", o.no_local_rank, "do not append --local_rank=N to Python programs");
    app.add_option("--python", python, "interpreter for .py programs and -m (default: $PYTHON_EXEC, else python3)")
        ->option_text("PATH");
    app.add_option("--role", o.role, "the workers' ROLE_NAME (torchrun's --role; default: default)")
        ->option_text("NAME");
    app.add_option("--export", o.exports, "pass NAME (from this environment) or NAME=VALUE to every worker; repeatable")
        ->option_text("NAME[=VALUE]");
  }

  Status Resolve(const CLI::App& app, CliOptions& o) const {
    if (o.module && o.no_python) {
      return InvalidArgumentError("--module and --no_python exclude each other: a module runs under python3");
    }
    if (o.run_path && (o.no_python || o.module)) {
      return InvalidArgumentError(std::string("--run_path and ") + (o.no_python ? "--no_python" : "--module") +
                                  " exclude each other: --run_path runs PROGRAM as a Python script file");
    }
    if (o.role.empty()) return InvalidArgumentError("--role: empty name; give the workers' ROLE_NAME or leave it out");
    if (app.count("--python") > 0) {
      if (python.empty()) return InvalidArgumentError("--python: empty interpreter path");
      if (o.no_python) {
        return InvalidArgumentError("--python and --no_python exclude each other: --no_python starts PROGRAM directly");
      }
      o.python = python;
    }
    return Status::Ok();
  }
};

// Where the workers' output goes: the log files, and what of it the console shows (docs/cli.md,
// "Worker output").
struct OutputGroup {
  static constexpr char kHeading[] = "Worker output";
  // DeepSpeed's --enable_each_rank_log default: no directory.
  static constexpr char kNoEachRankLog[] = "None";
  std::string tee, redirects, local_ranks, each_rank_dir;
  bool no_tee = false;

  void Add(CLI::App& app, CliOptions& o) {
    app.add_option("--log_dir", o.log_dir, "per-rank log files go to LOG_DIR/JOB_ID/ (default: $TMPDIR/dslaunch-$UID)")
        ->option_text("DIR");
    app.add_flag("-t,--tee{3}", tee,
                 "also show these streams on the console when redirected: 0 none, 1 stdout, 2 stderr, 3 both, or "
                 "LOCAL_RANK:N pairs (0:3,1:2); alone: 3. Everything is shown unless redirected")
        ->expected(0, 1)
        ->option_text("[N]");
    app.add_flag("--no_tee", no_tee, "show no worker output on the console, only write the log files (--redirects 3)");
    app.add_option("-r,--redirects", redirects,
                   "streams kept off the console (only in the log files): 0-3 or LOCAL_RANK:N pairs, as --tee")
        ->option_text("N");
    app.add_option("--local_ranks_filter", local_ranks,
                   "show only these local ranks' output on the console, e.g. 0 or 0,1 (the log files get all)")
        ->option_text("RANKS");
    app.add_option("--enable_each_rank_log", each_rank_dir,
                   "DeepSpeed's: write each rank's output to files under DIR, not to the console (--log_dir DIR "
                   "--redirects 3)")
        ->option_text("DIR");
    app.add_option("--events_file", o.events_file,
                   "append the job's events (generations started and ended, faults, decisions) to FILE, one JSON "
                   "object per line (docs/elastic.md)")
        ->option_text("FILE");
  }

  Status Resolve(const CLI::App& app, CliOptions& o) const {
    ConsoleStreams& c = o.console;
    const bool each_rank_log = app.count("--enable_each_rank_log") > 0 && each_rank_dir != kNoEachRankLog;
    if (no_tee) {
      if (app.count("--tee") > 0 || app.count("--redirects") > 0) {
        return InvalidArgumentError(std::string("--no_tee and ") + (app.count("--tee") > 0 ? "--tee" : "--redirects") +
                                    " exclude each other: --no_tee is --redirects 3; keep one of them");
      }
      c.redirects.all = StdStreams::kBoth;
    }
    if (app.count("--redirects") > 0) {
      DSLAUNCH_ASSIGN_OR_RETURN(c.redirects, ParseStdStreams("--redirects", redirects));
    } else if (each_rank_log) {
      c.redirects.all = StdStreams::kBoth;  // DeepSpeed writes each rank's output to its files only
    }
    if (app.count("--tee") > 0) {
      DSLAUNCH_ASSIGN_OR_RETURN(c.tee, ParseStdStreams("--tee", tee));
    }
    if (app.count("--local_ranks_filter") > 0) {
      DSLAUNCH_ASSIGN_OR_RETURN(c.local_ranks, ParseLocalRanks(local_ranks));
    }
    if (each_rank_log) {
      if (each_rank_dir.empty()) return InvalidArgumentError("--enable_each_rank_log: empty directory");
      if (app.count("--log_dir") > 0 && o.log_dir != each_rank_dir) {
        return InvalidArgumentError("--enable_each_rank_log " + each_rank_dir + " and --log_dir " + o.log_dir +
                                    " disagree: both name the log directory; keep one of them");
      }
      o.log_dir = each_rank_dir;
    }
    return Status::Ok();
  }
};

// The launcher's own conduct of the job: the store proxy, stopping, heartbeats, the job id, the
// pid file and --dry-run.
struct ConductGroup {
  static constexpr char kHeading[] = "Running the job";
  std::string store_proxy = "on";
  double grace_seconds = std::chrono::duration<double>(kDefaultGracePeriod).count();
  std::string save_pid;
  std::string dry_run;
  double heartbeat_seconds = std::chrono::duration<double>(kDefaultHeartbeatTimeout).count();
  double heartbeat_interval_seconds = 0;

  void Add(CLI::App& app, CliOptions& o) {
    app.add_option("--store_proxy", store_proxy,
                   "on: each node's agent carries its workers' store traffic to the launcher, one connection per "
                   "node (default); off: every worker connects to the launcher itself (docs/protocol.md)")
        ->check(OneOf({"on", "off"}))
        ->option_text("on|off");
    app.add_option("--grace_period", grace_seconds, "seconds between SIGTERM and SIGKILL when stopping")
        ->capture_default_str()
        ->option_text("SECONDS");
    app.add_flag("--save_pid{}", save_pid, "write the launcher pid to FILE (default $TMPDIR/<pid>.ds)")
        ->expected(0, 1)
        ->option_text("[=FILE]");
    app.add_flag("--dry-run{table}", dry_run, "print the launch plan and exit, starting nothing")
        ->expected(0, 1)
        ->option_text("[=table|json]");
    app.add_option("--job_id", o.job_id, "job id (default: generated)")->option_text("ID");
    app.add_option("--heartbeat_timeout", heartbeat_seconds,
                   "seconds of silence after which an agent or the launcher counts as lost")
        ->capture_default_str()
        ->option_text("SECONDS");
    app.add_option("--heartbeat_interval", heartbeat_interval_seconds,
                   "seconds between heartbeats, at most half the timeout (default: min(1, timeout / 3))")
        ->option_text("SECONDS");
  }

  // Stopping and heartbeats: resolved early, before the options that depend on no other group.
  Status ResolveTiming(const CLI::App& app, CliOptions& o) const {
    DSLAUNCH_ASSIGN_OR_RETURN(o.grace_period,
                              Duration("--grace_period", grace_seconds, std::chrono::milliseconds(0), kMaxGracePeriod));
    o.store_proxy = store_proxy == "on";
    DSLAUNCH_ASSIGN_OR_RETURN(o.heartbeat_timeout, Duration("--heartbeat_timeout", heartbeat_seconds,
                                                            kMinHeartbeatTimeout, kMaxHeartbeatTimeout));
    if (app.count("--heartbeat_interval") == 0) {
      o.heartbeat_interval = std::min(kHeartbeatInterval, o.heartbeat_timeout / kDefaultHeartbeatsPerTimeout);
      return Status::Ok();
    }
    DSLAUNCH_ASSIGN_OR_RETURN(o.heartbeat_interval, Duration("--heartbeat_interval", heartbeat_interval_seconds,
                                                             kMinHeartbeatInterval, kMaxHeartbeatTimeout));
    if (o.heartbeat_interval * kMinHeartbeatsPerTimeout > o.heartbeat_timeout) {
      std::ostringstream msg;
      msg << "--heartbeat_interval " << heartbeat_interval_seconds << " is more than half of --heartbeat_timeout "
          << heartbeat_seconds << ": one late heartbeat would make a lost node; lower the interval or raise the timeout";
      return InvalidArgumentError(msg.str());
    }
    return Status::Ok();
  }

  // The pid file and --dry-run.
  Status ResolveOutputs(const CLI::App& app, CliOptions& o) const {
    if (app.count("--save_pid") > 0) o.save_pid = save_pid;
    if (app.count("--dry-run") == 0) return Status::Ok();
    if (dry_run == "table") {
      o.dry_run = DryRunFormat::kTable;
    } else if (dry_run == "json") {
      o.dry_run = DryRunFormat::kJson;
    } else {
      return InvalidArgumentError("--dry-run=" + dry_run + ": expected 'table' or 'json'");
    }
    return Status::Ok();
  }
};

// Fault tolerance (docs/elastic.md): restarts, the elastic range, the watchdog, stragglers.
struct FaultGroup {
  static constexpr char kHeading[] = "Fault tolerance";
  std::string nnodes;
  ElasticArgs elastic;
  int max_restarts = 0, min_elastic_nodes = 0, max_elastic_nodes = 0;
  double watchdog_seconds = 0;

  void Add(CLI::App& app, CliOptions& o) {
    app.add_option("--max_restarts", max_restarts,
                   "restart the job after up to N failures (default 0: the first failure ends it; 100 with --elastic_training)")
        ->option_text("N");
    app.add_option("--nnodes", nnodes,
                   "N: the first N hosts (as --num_nodes); MIN:MAX: elastic, run on MIN to MAX hosts, the others are spares")
        ->option_text("N|MIN:MAX");
    app.add_flag("--elastic_training", elastic.elastic_training,
                 "DeepSpeed's spelling of an elastic range: --min_elastic_nodes (default 1) to --max_elastic_nodes (default all)");
    app.add_option("--min_elastic_nodes", min_elastic_nodes, "--elastic_training: the fewest nodes to run on")
        ->option_text("N");
    app.add_option("--max_elastic_nodes", max_elastic_nodes, "--elastic_training: the most nodes to run on")
        ->option_text("N");
    app.add_option("--watchdog_timeout", watchdog_seconds,
                   "seconds without progress after which a rank counts as hung (default: off; docs/elastic.md)")
        ->option_text("SECONDS");
    app.add_option("--straggler_factor", o.stragglers.factor,
                   "flag a rank whose median step time is more than F times its peers' (0: off; docs/observability.md)")
        ->capture_default_str()
        ->option_text("F");
    app.add_option("--straggler_window", o.stragglers.window, "steps of each rank the straggler rule looks at")
        ->capture_default_str()
        ->option_text("STEPS");
  }

  Status Resolve(const CLI::App& app, CliOptions& o) {
    if (app.count("--watchdog_timeout") > 0) {
      DSLAUNCH_ASSIGN_OR_RETURN(o.watchdog_timeout, Duration("--watchdog_timeout", watchdog_seconds, kMinWatchdogTimeout,
                                                             kMaxWatchdogTimeout, "leave it out for no watchdog"));
    }
    DSLAUNCH_RETURN_IF_ERROR(ValidateStragglerOptions(o.stragglers));
    if (app.count("--nnodes") > 0) elastic.nnodes = nnodes;
    if (app.count("--min_elastic_nodes") > 0) elastic.min_elastic_nodes = min_elastic_nodes;
    if (app.count("--max_elastic_nodes") > 0) elastic.max_elastic_nodes = max_elastic_nodes;
    if (app.count("--max_restarts") > 0) elastic.max_restarts = max_restarts;
    return ResolveElastic(elastic, o);
  }
};

// Starting agents over SSH (docs/ssh.md).
struct SshGroup {
  static constexpr char kHeading[] = "Starting agents over SSH";
  double timeout_seconds = std::chrono::duration<double>(kSshDefaultConnectTimeout).count();

  void Add(CLI::App& app, CliOptions& o) {
    app.add_option("--agent_path", o.agent_path, "dslaunch-agent on the nodes (default: this one's absolute path)")
        ->option_text("PATH");
    app.add_option("--ssh_user", o.ssh.user, "SSH user for hosts without user@ in the hostfile")->option_text("USER");
    app.add_option("--ssh_port", o.ssh.port, "SSH port")->capture_default_str()->option_text("PORT");
    app.add_option("--ssh_identity", o.ssh.identities, "SSH private key file; repeatable (default: ssh-agent, ~/.ssh/id_*)")
        ->option_text("FILE");
    app.add_option("--ssh_known_hosts", o.ssh.known_hosts, "known_hosts file (default: ~/.ssh/known_hosts)")
        ->option_text("FILE");
    app.add_flag("--ssh_accept_new_host_keys", o.ssh.accept_new_host_keys,
                 "add unknown host keys to known_hosts (changed keys are still refused)");
    app.add_option("--ssh_connect_timeout", timeout_seconds, "seconds per SSH connection attempt")
        ->capture_default_str()
        ->option_text("SECONDS");
    app.add_option("--ssh_fanout", o.ssh.fanout, "SSH handshakes and pre-flight commands in flight at once (as pdsh -f)")
        ->capture_default_str()
        ->option_text("N");
    app.add_option("--ssh_tree_threshold", o.ssh.tree_threshold,
                   "past this many nodes, agents start the agents of their subtree over SSH (docs/ssh.md)")
        ->capture_default_str()
        ->option_text("NODES");
  }

  Status Resolve(CliOptions& o) const {
    DSLAUNCH_ASSIGN_OR_RETURN(o.ssh.connect_timeout, Duration("--ssh_connect_timeout", timeout_seconds,
                                                              kMinSshConnectTimeout, kMaxSshConnectTimeout));
    if (o.ssh.tree_threshold < 1) {
      return InvalidArgumentError("--ssh_tree_threshold " + std::to_string(o.ssh.tree_threshold) +
                                  " must be at least 1 (a job of that many nodes or fewer starts without a tree)");
    }
    if (o.ssh.fanout < 1) {
      return InvalidArgumentError("--ssh_fanout " + std::to_string(o.ssh.fanout) + " must be at least 1");
    }
    if (o.ssh.port < 1 || o.ssh.port > 65535) {
      return InvalidArgumentError("--ssh_port " + std::to_string(o.ssh.port) + " is not a TCP port (1-65535)");
    }
    return Status::Ok();
  }
};

// Nodes that start themselves: --no_ssh, and node mode (torchrun's rendezvous; docs/node-mode.md).
struct SelfStartGroup {
  static constexpr char kHeading[] = "Node mode (torchrun's rendezvous) and --no_ssh";
  int node_rank = -1;
  std::string rdzv_endpoint, rdzv_id, rdzv_backend, rdzv_conf;
  bool standalone = false;

  void Add(CLI::App& app, CliOptions& o) {
    app.add_flag("--no_ssh", o.no_ssh, "run this same command on every node yourself, with --node_rank");
    app.add_option("--node_rank", node_rank, "this node's rank (0 hosts the launcher); node mode or --no_ssh")
        ->option_text("N");
    app.add_option("--rdzv_port", o.rdzv_port, "--no_ssh: port of the launcher's endpoint on node 0")
        ->capture_default_str()
        ->option_text("PORT");
    app.add_option("--secret_file", o.secret_file,
                   "--no_ssh and node mode: file holding the job secret, the same on every node")
        ->option_text("FILE");
    app.add_option("--rdzv_endpoint", rdzv_endpoint,
                   "node mode: HOST[:PORT] of the rendezvous endpoint (default port: --rdzv_port); its node hosts "
                   "it. Port 0 on one node: a job on this machine, as --standalone")
        ->option_text("HOST[:PORT]");
    app.add_option("--rdzv_id", rdzv_id, "node mode: the job's id, the same on every node (as --job_id)")
        ->option_text("ID");
    app.add_option("--rdzv_backend", rdzv_backend, "torchrun's rendezvous backend: c10d or static (both: dslaunch's store)")
        ->option_text("c10d|static");
    app.add_option("--rdzv_conf", rdzv_conf, "node mode: join_timeout=SECONDS,last_call_timeout=SECONDS")
        ->option_text("KEY=VALUE,...");
    app.add_flag("--standalone", standalone, "torchrun's one-node job with a local rendezvous (the default without a hostfile)");
    app.add_option("--local_addr", o.local_addr,
                   "node mode: this node's address; on the node hosting the rendezvous, the workers' MASTER_ADDR "
                   "unless --master_addr gives one")
        ->option_text("ADDR");
  }

  Status Resolve(const CLI::App& app, CliOptions& o, std::vector<std::string>& notes) const {
    if (app.count("--local_addr") > 0 && o.local_addr.empty()) {
      return InvalidArgumentError("--local_addr: empty address; give this node's address or leave it out");
    }
    if (o.rdzv_port < 0 || o.rdzv_port > 65535) {
      return InvalidArgumentError("--rdzv_port " + std::to_string(o.rdzv_port) +
                                  " is not a TCP port (1-65535, or 0 for any free port on a one-node job)");
    }
    if (app.count("--node_rank") > 0) {
      if (node_rank < 0) {
        return InvalidArgumentError("--node_rank " + std::to_string(node_rank) + ": expected a node rank >= 0");
      }
      o.node_rank = node_rank;
    }
    if (!rdzv_id.empty()) {
      if (!o.job_id.empty() && o.job_id != rdzv_id) {
        return InvalidArgumentError("--rdzv_id " + rdzv_id + " and --job_id " + o.job_id +
                                    " disagree: both name the job; keep one of them");
      }
      o.job_id = rdzv_id;
    }
    NodeModeArgs node_mode{rdzv_endpoint, rdzv_backend, rdzv_conf, standalone,
                           app.count("--rdzv_endpoint") > 0 || app.count("--rdzv_id") > 0 ||
                               app.count("--rdzv_conf") > 0};
    DSLAUNCH_RETURN_IF_ERROR(ResolveNodeMode(node_mode, o));
    if (o.rendezvous) return Status::Ok();  // node mode: every check below is of --no_ssh mode
    if (!o.local_addr.empty()) {
      notes.push_back("--local_addr " + o.local_addr +
                      ": ignored outside node mode (the workers' MASTER_ADDR is --master_addr, else the first host)");
    }
    if (o.no_ssh) {
      if (!o.node_rank || *o.node_rank < 0) {
        return InvalidArgumentError("--no_ssh needs --node_rank N (0 on the node that hosts the launcher)");
      }
      if (o.master_addr.empty()) {
        return InvalidArgumentError("--no_ssh needs --master_addr, the address of node 0");
      }
      if (o.job_id.empty()) {
        return InvalidArgumentError("--no_ssh needs --job_id, the same on every node");
      }
    } else if (o.node_rank) {
      return InvalidArgumentError("--node_rank is for node mode (with --nnodes and --rdzv_endpoint or --master_addr, "
                                  "no hostfile) or --no_ssh mode");
    }
    return Status::Ok();
  }

  // --job_id or --rdzv_id, whichever named the job, once both are merged.
  static Status ValidateJob(const CLI::App& app, const CliOptions& o) {
    if (app.count("--job_id") == 0 && app.count("--rdzv_id") == 0) return Status::Ok();
    Status valid = ValidateJobId(o.job_id);
    if (valid.ok()) return valid;
    return InvalidArgumentError((app.count("--job_id") > 0 ? "--job_id: " : "--rdzv_id: ") + valid.message());
  }
};

// Core binding (docs/launch-plan.md, "Core binding") and how agents start (docs/slurm.md).
struct PlacementGroup {
  static constexpr char kHeading[] = "Placement";
  std::string bind_core_list;
  std::string launcher;
  static constexpr char kPdsh[] = "pdsh";  // DeepSpeed's default launcher: SSH to every node

  void Add(CLI::App& app, CliOptions& o) {
    app.add_flag("--bind_cores_to_rank", o.bind_cores_to_rank,
                 "give each local rank its own share of the node's cores (and NUMA node), OMP_NUM_THREADS to match");
    app.add_option("--bind_core_list", bind_core_list,
                   "--bind_cores_to_rank: the cores to share, e.g. 0-3,8,10-11 (default: the node's, one thread per core)")
        ->option_text("LIST");
    app.add_option("--launcher", launcher,
                   "how agents start: slurm (srun, inside an allocation), ssh (also DeepSpeed's pdsh) or local "
                   "(default: chosen, docs/slurm.md)")
        ->option_text("slurm|ssh|local");
  }

  Status Resolve(const CLI::App& app, CliOptions& o, std::vector<std::string>& notes) const {
    if (app.count("--bind_core_list") > 0) {
      const std::string given = "--bind_core_list '" + bind_core_list + "'";
      if (!o.bind_cores_to_rank) {
        return InvalidArgumentError(given + " needs --bind_cores_to_rank (DeepSpeed ignores it without)");
      }
      auto cores = ParseCpuList(bind_core_list);
      if (!cores.ok()) return InvalidArgumentError(given + ": " + cores.status().message() + " (expected e.g. 0-3,8,10-11)");
      if (cores->empty()) return InvalidArgumentError(given + ": no cores listed (expected e.g. 0-3,8,10-11)");
      o.bind_core_list = std::move(*cores);
    }
    if (app.count("--launcher") > 0) {
      if (auto refusal = RefusalOfLauncher(launcher)) return InvalidArgumentError(*refusal);
      if (launcher == kPdsh) {
        notes.push_back("--launcher pdsh: dslaunch starts the agents over SSH itself, as pdsh would (--launcher ssh)");
      }
      DSLAUNCH_ASSIGN_OR_RETURN(o.launcher, ParseLauncherKind(launcher == kPdsh ? "ssh" : launcher));
      if (o.no_ssh || o.rendezvous) {
        return InvalidArgumentError(std::string("--launcher and ") + (o.no_ssh ? "--no_ssh" : "node mode") +
                                    " exclude each other: there every node's agent is started by the node's own dslaunch");
      }
    }
    return Status::Ok();
  }
};

// The live status page (docs/observability.md).
struct StatusGroup {
  static constexpr char kHeading[] = "Status page";
  StatusArgs status;

  void Add(CLI::App& app) {
    app.add_option("--status_port", status.port,
                   "serve the live job page, JSON and /metrics on this port (0: any free port; default: off)")
        ->option_text("PORT");
    app.add_option("--status_bind", status.bind,
                   "--status_port: the IP address to listen on (default 127.0.0.1; 0.0.0.0 for every interface)")
        ->option_text("ADDR");
    app.add_option("--status_host", status.hosts,
                   "--status_port: a name the page is opened by besides its address (repeat or comma-separate)")
        ->delimiter(',')
        ->option_text("NAME");
    app.add_flag("--status_metrics_open", status.metrics_open,
                 "--status_port: serve /metrics without the job's token (for a Prometheus scraper)");
  }

  Status Resolve(const CLI::App& app, CliOptions& o) {
    status.port_given = app.count("--status_port") > 0;
    status.bind_given = app.count("--status_bind") > 0;
    return ResolveStatusPage(status, o);
  }
};

// torchrun's and DeepSpeed's flags that change nothing in dslaunch: accepted, so that their
// command lines run, each with a note saying why it changes nothing (docs/cli.md).
struct CompatGroup {
  static constexpr char kHeading[] = "Accepted from torchrun and DeepSpeed, changing nothing here";
  double monitor_interval = 0;
  std::string start_method, comment;
  bool no_ssh_check = false, force_multi = false;

  void Add(CLI::App& app) {
    app.add_option("--monitor_interval", monitor_interval,
                   "torchrun's polling interval: agents hear of a worker's exit at once, without polling")
        ->option_text("SECONDS");
    app.add_option("--start_method", start_method,
                   "torchrun's spawn, fork or forkserver: every worker is a new process (as spawn)")
        ->check(OneOf({"spawn", "fork", "forkserver"}))
        ->option_text("spawn|fork|forkserver");
    app.add_flag("--no_ssh_check", no_ssh_check, "DeepSpeed's: the SSH pre-flight is how dslaunch starts its agents");
    app.add_flag("--force_multi", force_multi,
                 "DeepSpeed's: other hosts always start over SSH; this machine alone runs here without it");
    app.add_option("--comment", comment, "DeepSpeed's comment for srun: not passed on")->option_text("COMMENT");
  }

  Status Resolve(const CLI::App& app, std::vector<std::string>& notes) const {
    if (app.count("--monitor_interval") > 0) {
      if (!std::isfinite(monitor_interval) || monitor_interval < 0) {
        return InvalidArgumentError("--monitor_interval: expected seconds >= 0 (e.g. 0.1)");
      }
      notes.push_back("--monitor_interval: ignored: the agents hear of a worker's exit at once, without polling");
    }
    if (app.count("--start_method") > 0 && start_method != "spawn") {
      notes.push_back("--start_method " + start_method +
                      ": ignored: every worker is a new process (fork and exec), as with spawn");
    }
    if (no_ssh_check) {
      notes.push_back("--no_ssh_check: ignored: the pre-flight over SSH is part of starting each node's agent");
    }
    if (force_multi) {
      notes.push_back("--force_multi: ignored: other hosts always start over SSH, and a job on this machine alone "
                      "runs here without SSH");
    }
    if (app.count("--comment") > 0) notes.push_back("--comment: ignored: dslaunch passes no comment to srun");
    return Status::Ok();
  }
};

// Every group of the command line, declared in the order --help lists them. A group's options are
// added under its heading (kHeading); adding an option to a group is one add_option in its Add.
struct OptionGroups {
  SelectionGroup selection;
  ProgramGroup program;
  OutputGroup output;
  ConductGroup conduct;
  FaultGroup fault;
  SshGroup ssh;
  SelfStartGroup self_start;
  PlacementGroup placement;
  StatusGroup status;
  CompatGroup compat;

  void Add(CLI::App& app, CliOptions& o) {
    auto under = [&app](const char* heading) { app.option_defaults()->group(heading); };
    under(SelectionGroup::kHeading), selection.Add(app, o);
    under(ProgramGroup::kHeading), program.Add(app, o);
    under(OutputGroup::kHeading), output.Add(app, o);
    under(ConductGroup::kHeading), conduct.Add(app, o);
    under(FaultGroup::kHeading), fault.Add(app, o);
    under(SshGroup::kHeading), ssh.Add(app, o);
    under(SelfStartGroup::kHeading), self_start.Add(app, o);
    under(PlacementGroup::kHeading), placement.Add(app, o);
    under(StatusGroup::kHeading), status.Add(app);
    under(CompatGroup::kHeading), compat.Add(app);
  }

  Status Resolve(const CLI::App& app, CliOptions& o, std::vector<std::string>& notes) {
    DSLAUNCH_RETURN_IF_ERROR(selection.Resolve(app, o));
    DSLAUNCH_RETURN_IF_ERROR(conduct.ResolveTiming(app, o));
    DSLAUNCH_RETURN_IF_ERROR(fault.Resolve(app, o));
    DSLAUNCH_RETURN_IF_ERROR(ssh.Resolve(o));
    DSLAUNCH_RETURN_IF_ERROR(self_start.Resolve(app, o, notes));
    DSLAUNCH_RETURN_IF_ERROR(placement.Resolve(app, o, notes));
    DSLAUNCH_RETURN_IF_ERROR(status.Resolve(app, o));
    DSLAUNCH_RETURN_IF_ERROR(conduct.ResolveOutputs(app, o));
    DSLAUNCH_RETURN_IF_ERROR(output.Resolve(app, o));
    DSLAUNCH_RETURN_IF_ERROR(program.Resolve(app, o));
    DSLAUNCH_RETURN_IF_ERROR(compat.Resolve(app, notes));
    return SelfStartGroup::ValidateJob(app, o);
  }
};

constexpr char kGeneralHeading[] = "General";

// What a number option's value must look like, by its metavar, for messages.
std::string ExpectedNumber(const CLI::Option& opt) {
  const std::string& metavar = opt.get_option_text();
  if (metavar == "SECONDS") return "a number of seconds (e.g. 30 or 0.5)";
  if (metavar == "PORT") return "a TCP port number (e.g. 29500)";
  if (opt.get_type_name() == "FLOAT") return "a number (e.g. 1.5)";
  return "a whole number (e.g. 4)";
}

// CLI11 reads an empty value as 0 for a number, so "--rdzv_port ''" would mean "any free port"
// and "--grace_period ''" no grace at all: an empty number is an error instead. Any other value
// that is not a number of the option's kind is refused saying what one looks like (CLI11 would say
// only "Could not convert").
void CheckNumbers(CLI::App& app) {
  for (CLI::Option* opt : app.get_options()) {
    const std::string type = opt->get_type_name();
    const bool integer = type == "INT" || type == "UINT";
    if (!integer && type != "FLOAT") continue;
    const std::string expected = ExpectedNumber(*opt);
    opt->check(
        [integer, expected](const std::string& value) {
          if (value.empty()) return std::string("empty value, expected a number");
          bool valid = false;
          if (integer) {
            int64_t n = 0;
            auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), n);
            if (end == value.data() + value.size() &&
                (ec == std::errc::result_out_of_range || (ec == std::errc() && (n < INT32_MIN || n > INT32_MAX)))) {
              return "'" + value + "' is out of range: expected " + expected;
            }
            valid = ec == std::errc() && end == value.data() + value.size();
          } else {
            char* end = nullptr;
            errno = 0;
            std::strtod(value.c_str(), &end);
            valid = end == value.c_str() + value.size() && errno != ERANGE;
          }
          return valid ? std::string() : "'" + value + "' is not " + expected;
        },
        "", "number");
  }
}

// The help text: usage with the subcommands, then the options by group (help_text.h).
std::string HelpText(const CLI::App& app) {
  HelpPage page;
  page.usage = {"dslaunch [OPTIONS] PROGRAM [ARGS...]", "dslaunch status [JOB_ID]",
                "dslaunch logs [--lines N] [--log_dir DIR] JOB_ID RANK", "dslaunch report JOB_DIR"};
  page.description =
      "Start a distributed training job on a set of machines and keep it alive. Options come before PROGRAM; "
      "ARGS are passed to PROGRAM untouched. Every long option may be spelled with underscores (DeepSpeed) or "
      "dashes (torchrun), and read from PET_<NAME> (docs/cli.md).";
  std::vector<HelpEntry> general;
  for (const CLI::Option* opt : app.get_options()) {
    std::string names;
    for (const std::string& n : opt->get_snames()) names += (names.empty() ? "-" : ", -") + n;
    for (const std::string& n : opt->get_lnames()) names += (names.empty() ? "--" : ", --") + n;
    const std::string& metavar = opt->get_option_text();
    if (!metavar.empty()) names += (metavar.front() == '[' && metavar[1] == '=' ? "" : " ") + metavar;
    std::string text = opt->get_description();
    if (!opt->get_default_str().empty() && text.find("default") == std::string::npos) {
      text += " (default " + opt->get_default_str() + ")";
    }
    HelpEntry entry{opt->get_group(), names, text};
    (entry.group == kGeneralHeading ? general : page.entries).push_back(std::move(entry));
  }
  page.entries.push_back({"Subcommands", "status [JOB_ID]", "the rank table of a running job (--status_port)"});
  page.entries.push_back({"Subcommands", "logs JOB_ID RANK", "a rank's output, running or finished"});
  page.entries.push_back({"Subcommands", "report JOB_DIR", "rebuild a job's report.html from its metrics"});
  for (HelpEntry& e : general) page.entries.push_back(std::move(e));
  page.footer = kExamples;
  return FormatHelp(page);
}

// ParseCommandLine, with `from_environment` naming the PET_ variables it took.
Result<CliCommand> Parse(const std::vector<std::string>& argv, const std::map<std::string, std::string>& environment,
                         std::vector<std::string>& from_environment) {
  CliCommand command;
  CliOptions& o = command.options;
  CLI::App app{"", "dslaunch"};  // --help is HelpText's, not CLI11's
  // A repeated option takes its last value, as argparse (and so DeepSpeed and torchrun) does.
  app.option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  app.set_help_flag("-h,--help", "print this help and exit")->group(kGeneralHeading);
  app.set_version_flag("--version", std::string("dslaunch ") + DSLAUNCH_VERSION)
      ->description("print the version and exit")
      ->group(kGeneralHeading);
  OptionGroups groups;
  groups.Add(app, o);
  CheckNumbers(app);

  std::set<const CLI::Option*> given;
  auto split = FindProgram(app, argv, given);
  if (!split.ok()) return split.status();
  const size_t program_at = split->program;
  auto env_args = EnvironmentArguments(app, given, environment, from_environment);
  if (!env_args.ok()) return env_args.status();
  split->head.insert(split->head.end(), env_args->begin(), env_args->end());
  std::vector<const char*> head;
  for (const std::string& a : split->head) head.push_back(a.c_str());
  try {
    app.parse(static_cast<int>(head.size()), head.data());
  } catch (const CLI::CallForHelp&) {
    command.print = HelpText(app);
    return command;
  } catch (const CLI::CallForVersion&) {
    command.print = std::string("dslaunch ") + DSLAUNCH_VERSION + "\n";
    return command;
  } catch (const CLI::ParseError& e) {
    return InvalidArgumentError(e.what());
  } catch (const std::exception& e) {
    // A conversion CLI11 did not wrap in a ParseError (std::stoll on a value out of range).
    return InvalidArgumentError(std::string("cannot read the options before PROGRAM: ") + e.what() +
                                " (a number out of range?)");
  }

  if (program_at >= argv.size()) {
    return InvalidArgumentError("missing PROGRAM: usage: dslaunch [options] PROGRAM [ARGS...]");
  }
  o.program = argv[program_at];
  if (o.program.empty()) return InvalidArgumentError("empty PROGRAM: an empty argument stands where PROGRAM goes");
  o.program_args.assign(argv.begin() + static_cast<long>(program_at) + 1, argv.end());
  DSLAUNCH_RETURN_IF_ERROR(groups.Resolve(app, o, command.notes));
  return command;
}

}  // namespace

Result<CliCommand> ParseCommandLine(const std::vector<std::string>& argv,
                                    const std::map<std::string, std::string>& environment) {
  std::vector<std::string> from_environment;
  auto command = Parse(argv, environment, from_environment);
  if (command.ok() || from_environment.empty() || command.status().message().starts_with("PET_")) return command;
  std::string names;
  for (const std::string& v : from_environment) names += (names.empty() ? "" : ", ") + v;
  return InvalidArgumentError(command.status().message() + " (options from the environment: " + names + ")");
}

}  // namespace dslaunch::launcher
