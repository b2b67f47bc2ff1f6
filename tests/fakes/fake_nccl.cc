#include "tests/fakes/fake_nccl.h"

#include <cuda_runtime.h>

#include <cstdlib>
#include <cstring>
#include <iterator>
#include <map>

namespace dslaunch::testing {
namespace {

FakeNcclScript script;
// The blocks this fake's cudaMalloc handed out (start, bytes): "device memory" for
// cudaPointerGetAttributes.
std::map<const void*, size_t> device_blocks;
// The one communicator's state: polls of ncclCommGetAsyncError since the initialisation began.
int init_polls = 0;
bool formed = false;
char comm_token;  // what a ncclComm_t points to

}  // namespace

FakeNcclScript& FakeNccl() { return script; }

void ResetFakeNccl() {
  script = FakeNcclScript();
  init_polls = 0;
  formed = false;
}

std::vector<FakeNcclCall> FakeNcclCalls(const std::string& function) {
  std::vector<FakeNcclCall> out;
  for (const auto& call : script.calls) {
    if (call.function == function) out.push_back(call);
  }
  return out;
}

}  // namespace dslaunch::testing

using dslaunch::testing::FakeNcclCall;
using dslaunch::testing::script;

namespace {

void Record(const char* function, const void* send = nullptr, const void* receive = nullptr, size_t count = 0,
            int root = -1) {
  script.calls.push_back(FakeNcclCall{function, send, receive, count, root});
}

}  // namespace

extern "C" {

// ---- CUDA runtime ----
cudaError_t cudaGetDeviceCount(int* count) {
  *count = script.device_count;
  return script.device_count > 0 ? cudaSuccess : cudaErrorNoDevice;
}
cudaError_t cudaSetDevice(int) { return cudaSuccess; }
cudaError_t cudaStreamCreateWithFlags(cudaStream_t* stream, unsigned int) {
  *stream = reinterpret_cast<cudaStream_t>(&dslaunch::testing::comm_token);
  return cudaSuccess;
}
cudaError_t cudaStreamDestroy(cudaStream_t) { return cudaSuccess; }
cudaError_t cudaEventCreateWithFlags(cudaEvent_t* event, unsigned int) {
  *event = reinterpret_cast<cudaEvent_t>(&dslaunch::testing::comm_token);
  return cudaSuccess;
}
cudaError_t cudaEventDestroy(cudaEvent_t) { return cudaSuccess; }
cudaError_t cudaEventRecord(cudaEvent_t, cudaStream_t) {
  Record("cudaEventRecord");
  return cudaSuccess;
}
cudaError_t cudaStreamWaitEvent(cudaStream_t, cudaEvent_t, unsigned int) {
  Record("cudaStreamWaitEvent");
  return cudaSuccess;
}
cudaError_t cudaStreamQuery(cudaStream_t) { return script.stream_never_done ? cudaErrorNotReady : cudaSuccess; }
cudaError_t cudaMalloc(void** p, size_t bytes) {
  *p = std::malloc(bytes > 0 ? bytes : 1);
  dslaunch::testing::device_blocks[*p] = bytes;
  return cudaSuccess;
}
cudaError_t cudaFree(void* p) {
  dslaunch::testing::device_blocks.erase(p);
  std::free(p);
  return cudaSuccess;
}
cudaError_t cudaPointerGetAttributes(cudaPointerAttributes* attributes, const void* p) {
  std::memset(attributes, 0, sizeof(*attributes));
  // A pointer into a block (its start included, its end not) is that block's device memory.
  auto it = dslaunch::testing::device_blocks.upper_bound(p);
  bool device = false;
  if (it != dslaunch::testing::device_blocks.begin()) {
    const auto& [start, bytes] = *std::prev(it);
    device = static_cast<const char*>(p) < static_cast<const char*>(start) + bytes;
  }
  attributes->type = device ? cudaMemoryTypeDevice : cudaMemoryTypeUnregistered;
  attributes->device = 0;
  return cudaSuccess;
}
cudaError_t cudaGetLastError() { return cudaSuccess; }
const char* cudaGetErrorName(cudaError_t) { return "cudaErrorFake"; }
const char* cudaGetErrorString(cudaError_t) { return "fake CUDA error"; }

// ---- NCCL ----
ncclResult_t ncclGetUniqueId(ncclUniqueId* id) {
  for (int i = 0; i < NCCL_UNIQUE_ID_BYTES; ++i) id->internal[i] = static_cast<char>(i);
  return ncclSuccess;
}
ncclResult_t ncclCommInitRankConfig(ncclComm_t* comm, int, ncclUniqueId, int, ncclConfig_t* config) {
  Record("ncclCommInitRankConfig");
  *comm = reinterpret_cast<ncclComm_t>(&dslaunch::testing::comm_token);
  dslaunch::testing::init_polls = 0;
  dslaunch::testing::formed = false;
  return config->blocking == 0 ? ncclInProgress : ncclInvalidUsage;
}
ncclResult_t ncclCommGetAsyncError(ncclComm_t, ncclResult_t* state) {
  if (!dslaunch::testing::formed) {
    const int polls = ++dslaunch::testing::init_polls;
    if (script.init_polls_in_progress < 0 || polls <= script.init_polls_in_progress) {
      *state = ncclInProgress;
      return ncclSuccess;
    }
    *state = script.init_result;
    dslaunch::testing::formed = script.init_result == ncclSuccess;
    return ncclSuccess;
  }
  *state = script.async_error;
  return ncclSuccess;
}
ncclResult_t ncclCommAbort(ncclComm_t) {
  ++script.aborts;
  return ncclSuccess;
}
ncclResult_t ncclCommFinalize(ncclComm_t) {
  ++script.finalizes;
  return ncclSuccess;
}
ncclResult_t ncclCommDestroy(ncclComm_t) {
  ++script.destroys;
  return ncclSuccess;
}
const char* ncclGetErrorString(ncclResult_t rc) {
  return rc == ncclRemoteError ? "remote process exited or there was a network error" : "fake NCCL error";
}
const char* ncclGetLastError(ncclComm_t) { return ""; }
ncclResult_t ncclGroupStart() {
  Record("ncclGroupStart");
  return ncclSuccess;
}
ncclResult_t ncclGroupEnd() {
  Record("ncclGroupEnd");
  return ncclSuccess;
}
ncclResult_t ncclAllReduce(const void* send, void* receive, size_t count, ncclDataType_t, ncclRedOp_t, ncclComm_t,
                           cudaStream_t) {
  Record("ncclAllReduce", send, receive, count);
  return ncclSuccess;
}
ncclResult_t ncclReduceScatter(const void* send, void* receive, size_t count, ncclDataType_t, ncclRedOp_t, ncclComm_t,
                               cudaStream_t) {
  Record("ncclReduceScatter", send, receive, count);
  return ncclSuccess;
}
ncclResult_t ncclAllGather(const void* send, void* receive, size_t count, ncclDataType_t, ncclComm_t, cudaStream_t) {
  Record("ncclAllGather", send, receive, count);
  return ncclSuccess;
}
ncclResult_t ncclReduce(const void* send, void* receive, size_t count, ncclDataType_t, ncclRedOp_t, int root,
                        ncclComm_t, cudaStream_t) {
  Record("ncclReduce", send, receive, count, root);
  return ncclSuccess;
}
ncclResult_t ncclBroadcast(const void* send, void* receive, size_t count, ncclDataType_t, int root, ncclComm_t,
                           cudaStream_t) {
  Record("ncclBroadcast", send, receive, count, root);
  return ncclSuccess;
}

}  // extern "C"
