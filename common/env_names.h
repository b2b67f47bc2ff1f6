// Names of the environment variables of the worker contract (docs/launch-plan.md), in one place
// for the launcher that sets them, the agent that completes them and the workers that read them.
#pragma once

namespace dslaunch::env {

inline constexpr char kRank[] = "RANK";
inline constexpr char kWorldSize[] = "WORLD_SIZE";
inline constexpr char kLocalRank[] = "LOCAL_RANK";
inline constexpr char kLocalWorldSize[] = "LOCAL_WORLD_SIZE";
inline constexpr char kLocalSize[] = "LOCAL_SIZE";  // alias of LOCAL_WORLD_SIZE
inline constexpr char kNodeRank[] = "NODE_RANK";
inline constexpr char kGroupRank[] = "GROUP_RANK";  // alias of NODE_RANK (torchrun)
inline constexpr char kCrossRank[] = "CROSS_RANK";  // alias of NODE_RANK (Horovod)
inline constexpr char kNumNodes[] = "NNODES";
inline constexpr char kGroupWorldSize[] = "GROUP_WORLD_SIZE";  // alias of NNODES (torchrun)
inline constexpr char kCrossSize[] = "CROSS_SIZE";             // alias of NNODES (Horovod)
inline constexpr char kMasterAddr[] = "MASTER_ADDR";
inline constexpr char kMasterPort[] = "MASTER_PORT";
inline constexpr char kCudaVisibleDevices[] = "CUDA_VISIBLE_DEVICES";
inline constexpr char kStore[] = "DSLAUNCH_STORE";  // host:port, or unix:PATH (the node's store proxy)
// The launcher's host:port as the worker's node reaches it, also when DSLAUNCH_STORE is the proxy.
inline constexpr char kLauncherAddress[] = "DSLAUNCH_LAUNCHER_ADDRESS";
inline constexpr char kJobId[] = "DSLAUNCH_JOB_ID";
inline constexpr char kRestartCount[] = "DSLAUNCH_RESTART_COUNT";
inline constexpr char kTorchElasticRestartCount[] = "TORCHELASTIC_RESTART_COUNT";
// torchrun's names, so that torch's is_torchelastic_launched() is true and elastic-aware scripts
// find what they expect (docs/elastic.md).
inline constexpr char kTorchElasticMaxRestarts[] = "TORCHELASTIC_MAX_RESTARTS";
inline constexpr char kTorchElasticRunId[] = "TORCHELASTIC_RUN_ID";  // the job id
inline constexpr char kRoleRank[] = "ROLE_RANK";
inline constexpr char kRoleWorldSize[] = "ROLE_WORLD_SIZE";
inline constexpr char kRoleName[] = "ROLE_NAME";  // always "default"
// Generation > 0: why the previous generation ended (one line), and when (Unix time in ms, the
// launcher's clock) the fault that ended it was detected: the bundled runtime records both in
// metrics.jsonl.
inline constexpr char kRestartReason[] = "DSLAUNCH_RESTART_REASON";
inline constexpr char kFaultTime[] = "DSLAUNCH_FAULT_TIME_MS";
// Where a worker reports progress (docs/elastic.md, "Hang detection"): a file the agent creates
// per rank; each write is a report "STEP [timeout=SECONDS]".
inline constexpr char kProgressFile[] = "DSLAUNCH_PROGRESS_FILE";
// "1": the worker gets memory from its agent for in-memory snapshots (the launcher sets it for the
// bundled runtime; a user's program may ask with --export); the agent then passes the descriptors
// of that memory, "7,8", in DSLAUNCH_SNAPSHOT_FDS (agent/workers/snapshot_memory.h).
inline constexpr char kSnapshotMemory[] = "DSLAUNCH_SNAPSHOT_MEMORY";
inline constexpr char kSnapshotFds[] = "DSLAUNCH_SNAPSHOT_FDS";
// Local rank 0's read-only copies of peer nodes' snapshots its agent holds, "9,10,11"
// (agent/replica/replica_store.h), for a restart to read; absent or empty: none.
inline constexpr char kSnapshotReplicaFds[] = "DSLAUNCH_SNAPSHOT_REPLICA_FDS";
// --watchdog_timeout in seconds, when given: the bundled runtime then uses it rather than its own.
inline constexpr char kWatchdogTimeout[] = "DSLAUNCH_WATCHDOG_TIMEOUT";
inline constexpr char kOmpNumThreads[] = "OMP_NUM_THREADS";
// Defaults the agent gives workers, unless the user set them: the interface of the route to
// MASTER_ADDR for NCCL, Gloo and TensorPipe (PyTorch's RPC), each read on its own (NCCL's value
// may be a pattern such as ^lo,docker that the others do not read), and torch's asynchronous
// NCCL error handling under both of its names (torchrun sets it too; PyTorch before 2.2 reads
// NCCL_ASYNC_ERROR_HANDLING only).
inline constexpr char kNcclSocketIfname[] = "NCCL_SOCKET_IFNAME";
inline constexpr char kGlooSocketIfname[] = "GLOO_SOCKET_IFNAME";
inline constexpr char kTensorPipeSocketIfname[] = "TP_SOCKET_IFNAME";
inline constexpr char kTorchNcclAsyncErrorHandling[] = "TORCH_NCCL_ASYNC_ERROR_HANDLING";
inline constexpr char kNcclAsyncErrorHandling[] = "NCCL_ASYNC_ERROR_HANDLING";
// Where a worker writes its error record when it fails (common/error_record.h); torchrun's name.
inline constexpr char kErrorFile[] = "TORCHELASTIC_ERROR_FILE";
// The job secret given by hand to every node's launcher with --no_ssh. Read by the launcher only;
// the agent removes it from every worker's environment (workers get kStoreSecretFile instead).
inline constexpr char kJobSecret[] = "DSLAUNCH_JOB_SECRET";
// Path of a 0600 file holding the job's store secret; set by the agent, never the secret itself.
// The job's directory on this node: per-rank logs, and the runtime's metrics.jsonl (rank 0).
inline constexpr char kJobDir[] = "DSLAUNCH_JOB_DIR";
// "1" when the launcher's console is a terminal: the bundled runtime then draws a progress bar.
inline constexpr char kProgress[] = "DSLAUNCH_PROGRESS";
inline constexpr char kStoreSecretFile[] = "DSLAUNCH_STORE_SECRET_FILE";

}  // namespace dslaunch::env
