#include "launcher/cli/cli.h"

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cctype>
#include <set>

#include "dslaunch/config.h"
#include "launcher/cli/foreign_flags.h"
#include "launcher/cli/help_text.h"
#include "launcher/cli/option_groups.h"
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

// Every option of the command line on `app`, writing into `o` and `groups`.
void Declare(CLI::App& app, OptionGroups& groups, CliOptions& o) {
  // A repeated option takes its last value, as argparse (and so DeepSpeed and torchrun) does.
  app.option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  app.set_help_flag("-h,--help", "print this help and exit")->group(kGeneralHeading);
  app.set_version_flag("--version", std::string("dslaunch ") + DSLAUNCH_VERSION)
      ->description("print the version and exit")
      ->group(kGeneralHeading);
  groups.Add(app, o);
}

// ParseCommandLine, with `from_environment` naming the PET_ variables it took.
Result<CliCommand> Parse(const std::vector<std::string>& argv, const std::map<std::string, std::string>& environment,
                         std::vector<std::string>& from_environment) {
  CliCommand command;
  CliOptions& o = command.options;
  CLI::App app{"", "dslaunch"};  // --help is HelpText's, not CLI11's
  OptionGroups groups;
  Declare(app, groups, o);

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

std::vector<std::vector<std::string>> OptionSpellings() {
  CLI::App app{"", "dslaunch"};
  OptionGroups groups;
  CliOptions o;
  Declare(app, groups, o);
  std::vector<std::vector<std::string>> options;
  for (const CLI::Option* opt : app.get_options()) {
    std::vector<std::string> names;
    for (const std::string& l : opt->get_lnames()) names.push_back("--" + l);
    if (names.empty()) continue;
    for (const std::string& s : opt->get_snames()) names.push_back("-" + s);
    options.push_back(std::move(names));
  }
  return options;
}

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
