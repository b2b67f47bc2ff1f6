#include "launcher/cli/foreign_flags.h"

#include "launcher/cli/option_spelling.h"

namespace dslaunch::launcher {
namespace {

struct RefusedFlag {
  const char* name;  // with underscores
  const char* refusal;
};

// One line each: whose flag it is, why dslaunch has no such thing, what to do instead.
constexpr RefusedFlag kRefused[] = {
    {"--autotuning",
     "not supported: dslaunch does not run DeepSpeed's autotuner. Find a configuration with 'deepspeed "
     "--autotuning tune ...' (or by hand), then start the job with it, without --autotuning"},
    {"--launcher_args",
     "not supported: dslaunch starts its agents itself and has no pdsh, MPI or srun command line to extend. Use the --ssh_* "
     "options (port, user, identity, known_hosts) for SSH, and salloc/sbatch options for Slurm (srun steps run "
     "inside the allocation)"},
    {"--venv_script",
     "not supported: dslaunch sources no script on the nodes. Give the environment's interpreter instead: --python "
     "/path/to/venv/bin/python (the same path on every node), and --export NAME=VALUE for its variables"},
    {"--logs_specs",
     "not supported: torchrun's LogsSpecs plugins (Python entry points) cannot load in dslaunch. Every rank's stdout and stderr "
     "are written to LOG_DIR/JOB_ID/rankN.stdout.log and rankN.stderr.log; choose the directory with --log_dir and "
     "the console's share with --redirects, --tee and --local_ranks_filter"},
};

}  // namespace

std::optional<std::string> RefusalOf(std::string_view name) {
  const std::string wanted = Underscored(name);
  for (const RefusedFlag& f : kRefused) {
    if (wanted == f.name) return std::string(name) + ": " + f.refusal;
  }
  return std::nullopt;
}

std::vector<std::string> RefusedFlagNames() {
  std::vector<std::string> names;
  for (const RefusedFlag& f : kRefused) names.emplace_back(f.name);
  return names;
}

std::optional<std::string> RefusalOfLauncher(std::string_view value) {
  for (const char* mpi : {"openmpi", "mvapich", "mpich", "impi"}) {
    if (value == mpi) {
      return "--launcher " + std::string(value) +
             ": dslaunch does not start jobs through MPI; its agents start the workers and give them the rank "
             "environment themselves. Use --launcher ssh (the default with a hostfile) or slurm (inside an "
             "allocation)";
    }
  }
  return std::nullopt;
}

}  // namespace dslaunch::launcher
