// dslaunch-worker's device: none of its own. Where train.json asks for the GPU ("cuda"), or leaves
// it open ("auto", the default) on a machine with the NVIDIA driver, it re-executes the CUDA worker
// with the same arguments and environment (runtime/worker_device.h).
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

#include "runtime/worker_device.h"

namespace dslaunch::runtime {
namespace {

// Present wherever the NVIDIA driver is loaded (and in a container a GPU was passed to).
constexpr char kNvidiaControlDevice[] = "/dev/nvidiactl";

std::string CudaWorkerPath(const std::map<std::string, std::string>& env) {
  if (auto it = env.find(kCudaWorkerEnv); it != env.end() && !it->second.empty()) return it->second;
  std::error_code ec;
  const std::filesystem::path self = std::filesystem::read_symlink("/proc/self/exe", ec);
  return (self.parent_path() / kCudaWorkerName).string();
}

}  // namespace

Status PrepareDevice(const TrainConfig& config, const WorkerIdentity& id, const std::map<std::string, std::string>& env,
                     const std::vector<std::string>& command, std::vector<std::string>& lines) {
  if (config.device == TrainDevice::kCpu) return Status::Ok();
  const std::string worker = CudaWorkerPath(env);
  const bool have_worker = access(worker.c_str(), X_OK) == 0;
  if (config.device == TrainDevice::kAuto) {
    if (!std::filesystem::exists(kNvidiaControlDevice)) return Status::Ok();
    if (!have_worker) {
      if (id.local_rank == 0) {
        lines.push_back("device: auto: this machine has the NVIDIA driver but no " + worker +
                        " (dslaunch was built without CUDA); training on the CPU (\"device\": \"cpu\" says so "
                        "and silences this line)");
      }
      return Status::Ok();
    }
  } else if (!have_worker) {
    return FailedPreconditionError(
        "device \"cuda\": no CUDA worker at " + worker +
        " (dslaunch was built without CUDA: configure it where nvcc and NCCL are found, or point " +
        kCudaWorkerEnv + " at one); \"device\": \"cpu\" trains on the CPU");
  }
  // The same arguments, argv[0] naming the program that runs them.
  std::vector<char*> argv;
  for (const std::string& arg : command) argv.push_back(const_cast<char*>(arg.c_str()));
  if (argv.empty()) argv.push_back(nullptr);
  argv.front() = const_cast<char*>(worker.c_str());
  argv.push_back(nullptr);
  execv(worker.c_str(), argv.data());
  return InternalError("device: could not execute the CUDA worker " + worker + ": " + std::strerror(errno));
}

Result<std::unique_ptr<DeviceTraining>> StartDevice(const TrainConfig&, const WorkerIdentity&,
                                                    const std::map<std::string, std::string>&, StoreClient&,
                                                    Communicator&, std::vector<std::string>&) {
  return std::unique_ptr<DeviceTraining>();
}

}  // namespace dslaunch::runtime
