// The real launcher of the simulation: `dslaunch` in node mode as node 0, started by the
// simulator, its stdout and stderr read on the simulator's loop into a log file (and counted:
// the launcher's log volume at scale is one of the figures).
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <deque>
#include <fstream>
#include <memory>
#include <string>

#include "benchmarks/sim_scale/sim_net.h"
#include "common/status.h"

namespace dslaunch::sim {

struct LauncherSpec {
  std::string launcher;   // the dslaunch binary
  std::string worker;     // node 0's program (sim_scale_worker)
  std::string work_dir;   // the secret file, the launcher's log and the job's log directory go here
  std::string job_id;
  std::string secret;
  uint16_t port = 0;
  int nodes = 0;
  int ranks_per_node = 8;
  bool alltoall = false;  // node 0's workers take part in the all-to-all
  bool store_proxy = true;  // false: --store_proxy off (the direct path, node 0's workers too)
};

class LauncherProcess : public Watched {
 public:
  // Writes the secret file (0600), starts `dslaunch --nnodes M --node_rank 0 --rdzv_endpoint
  // 127.0.0.1:PORT --nproc_per_node R --rdzv_id JOB --secret_file F --log_dir D --no_python WORKER`
  // and watches its output.
  static Result<std::unique_ptr<LauncherProcess>> Start(SimLoop& loop, const LauncherSpec& spec);
  ~LauncherProcess() override;

  pid_t pid() const { return pid_; }
  // It printed that it waits for the other nodes: its endpoint is listening.
  bool waiting() const { return waiting_; }
  // It has exited (still a zombie until Reap, so /proc still has its CPU times).
  bool exited();
  // Waits for it and returns its exit code (128 + N for signal N).
  int Reap();
  int64_t lines() const { return lines_; }
  // Its last lines of output.
  std::string tail() const;
  void OnEvents(uint32_t events) override;

 private:
  LauncherProcess(SimLoop& loop, pid_t pid, int out_fd, std::string log_path);

  // Wakes the loop when the launcher exits (a pidfd is readable then): its output pipe is no
  // signal, since the agents it started may hold it open longer.
  struct ExitWatch : Watched {
    SimLoop* loop = nullptr;
    int fd = -1;
    void OnEvents(uint32_t) override { loop->Forget(fd); }  // once: it stays readable
  };

  SimLoop& loop_;
  pid_t pid_;
  int out_fd_;
  int pid_fd_ = -1;
  ExitWatch exit_watch_;
  bool reaped_ = false;
  int code_ = -1;
  bool waiting_ = false;
  int64_t lines_ = 0;
  std::string partial_;
  std::deque<std::string> tail_;
  std::ofstream log_;
};

}  // namespace dslaunch::sim
