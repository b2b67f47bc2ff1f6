// Node mode's part of the command line (docs/node-mode.md): which options make this process one
// node of a rendezvous, and their values. Pure; ParseCommandLine (cli.cc) calls it once CLI11 has
// read the options.
#pragma once

#include <string>

#include "common/status.h"
#include "launcher/cli/cli.h"

namespace dslaunch::launcher {

// --nproc_per_node: a number of workers (o.num_gpus), or one of torchrun's keywords
// (o.nproc_keyword). kInvalidArgument for anything else.
Status ParseNproc(const std::string& text, CliOptions& o);

// This node's workers: --nproc_per_node N, or torchrun's keyword (auto: the GPUs when there are
// any, else the cores; gpu: the GPUs; cpu: the cores); without either, 1 (torchrun's default).
// kInvalidArgument for gpu on a node without GPUs.
Result<int> NprocPerNode(const CliOptions& options, int cores, int gpus);

// The node-mode options as given.
struct NodeModeArgs {
  std::string endpoint;  // --rdzv_endpoint
  std::string backend;   // --rdzv_backend
  std::string conf;      // --rdzv_conf
  bool standalone = false;
  bool rendezvous_given = false;  // --rdzv_endpoint, --rdzv_id or --rdzv_conf
};

// "HOST[:PORT]" or "[V6]:PORT" / "[V6]" into r.host and r.port (`default_port` without one); PORT
// is 0 to 65535.
Status ParseEndpoint(const std::string& text, int default_port, RendezvousOptions& r);

// --rdzv_conf: torchrun's comma-separated KEY=VALUE list, with the keys dslaunch's rendezvous has
// (join_timeout, last_call_timeout: whole seconds, 1 to kMaxRendezvousTimeoutSeconds).
Status ParseRendezvousConf(const std::string& text, RendezvousOptions& r);

// Decides whether this is node mode and fills o.rendezvous (and a default o.job_id): without a
// hostfile and --no_ssh, any of --rdzv_endpoint, --rdzv_id, --rdzv_conf or --node_rank asks for it
// (torchrun's c10d and static rendezvous command lines both have one); --nnodes alone keeps its
// hostfile meaning. Reads o.num_nodes, o.elastic_nodes, o.node_rank, o.master_addr, o.rdzv_port,
// which ParseCommandLine has filled. An endpoint port of 0 (torchrun's "localhost:0", any free
// port) on a one-node job is a job on this machine, as --standalone: no rendezvous is set.
// kInvalidArgument naming the options for what cannot work (port 0 with more than one node).
Status ResolveNodeMode(const NodeModeArgs& args, CliOptions& o);

}  // namespace dslaunch::launcher
