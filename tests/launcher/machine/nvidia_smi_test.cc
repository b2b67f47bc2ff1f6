// Reading `nvidia-smi -L` (launcher/machine/nvidia_smi.h).
#include "launcher/machine/nvidia_smi.h"

#include <doctest/doctest.h>

namespace dslaunch::launcher {
namespace {

TEST_CASE("CountNvidiaSmiGpus counts GPU lines, not their MIG devices") {
  struct Row {
    const char* name;
    int exit_code;
    const char* output;
    int gpus;
  };
  for (const Row& row : {
           Row{"one", 0, "GPU 0: NVIDIA A100-SXM4-40GB (UUID: GPU-5d0c3f7e-1b2a-4c3d-8e9f-0a1b2c3d4e5f)\n", 1},
           Row{"eight", 0,
               "GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-a)\nGPU 1: NVIDIA H100 80GB HBM3 (UUID: GPU-b)\n"
               "GPU 2: NVIDIA H100 80GB HBM3 (UUID: GPU-c)\nGPU 3: NVIDIA H100 80GB HBM3 (UUID: GPU-d)\n"
               "GPU 4: NVIDIA H100 80GB HBM3 (UUID: GPU-e)\nGPU 5: NVIDIA H100 80GB HBM3 (UUID: GPU-f)\n"
               "GPU 6: NVIDIA H100 80GB HBM3 (UUID: GPU-g)\nGPU 7: NVIDIA H100 80GB HBM3 (UUID: GPU-h)\n",
               8},
           Row{"MIG devices under their GPU", 0,
               "GPU 0: NVIDIA A100-SXM4-80GB (UUID: GPU-a)\n  MIG 3g.40gb     Device  0: (UUID: MIG-b)\n"
               "  MIG 3g.40gb     Device  1: (UUID: MIG-c)\nGPU 1: NVIDIA A100-SXM4-80GB (UUID: GPU-d)\n",
               2},
           Row{"a warning line before", 0,
               "WARNING: infoROM is corrupted at gpu 0000:3B:00.0\nGPU 0: Tesla V100 (UUID: GPU-a)\n", 1},
           Row{"no final newline", 0, "GPU 0: Tesla T4 (UUID: GPU-a)", 1},
           Row{"no devices, with nvidia-smi's exit code", 6, "No devices were found\n", 0},
           Row{"no devices, exit 0", 0, "No devices were found\n", 0},
       }) {
    CAPTURE(row.name);
    auto gpus = CountNvidiaSmiGpus(row.exit_code, row.output);
    REQUIRE_MESSAGE(gpus.ok(), gpus.status().ToString());
    CHECK(*gpus == row.gpus);
  }
}

TEST_CASE("CountNvidiaSmiGpus reports a failed or unreadable nvidia-smi with its first line") {
  struct Row {
    int exit_code;
    const char* output;
    const char* message;
  };
  for (const Row& row : {
           Row{9,
               "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. Make sure that the "
               "latest NVIDIA driver is installed and running.\n\n",
               "nvidia-smi -L exited with code 9: 'NVIDIA-SMI has failed because it couldn't communicate with the "
               "NVIDIA driver. Make sure that the latest NVIDIA driver is installed and running.'"},
           Row{255, "", "nvidia-smi -L exited with code 255: no output"},
           Row{4, "GPU 0: Tesla T4 (UUID: GPU-a)\n",
               "nvidia-smi -L exited with code 4: 'GPU 0: Tesla T4 (UUID: GPU-a)'"},
           Row{0, "usage: something else\n", "nvidia-smi -L listed no GPU: 'usage: something else'"},
           Row{0, "", "nvidia-smi -L listed no GPU: no output"},
           Row{0, "GPU 0: a\nGPU 2: b\n", "nvidia-smi -L listed GPU 2 where GPU 1 was expected: 'GPU 2: b'"},
           Row{0, "GPU 1: a\n", "nvidia-smi -L listed GPU 1 where GPU 0 was expected: 'GPU 1: a'"},
       }) {
    CAPTURE(row.output);
    auto gpus = CountNvidiaSmiGpus(row.exit_code, row.output);
    REQUIRE_FALSE(gpus.ok());
    CHECK(gpus.status().code() == StatusCode::kUnavailable);
    CHECK(gpus.status().message() == row.message);
  }
}

}  // namespace
}  // namespace dslaunch::launcher
