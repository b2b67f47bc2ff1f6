// A stand-in for the NVIDIA driver's libnvidia-ml.so.1, for the launcher's GPU count
// (launcher/machine/gpu_discovery.h): a real shared library that the launcher loads with dlopen, as it
// would the driver's. FAKE_NVML_GPUS=N: the device count (default 0); FAKE_NVML_INIT_ERROR=CODE:
// nvmlInit_v2 fails with CODE (9 is NVML_ERROR_DRIVER_NOT_LOADED).
#include <cstdlib>

namespace {

constexpr int kSuccess = 0;
constexpr int kDriverNotLoaded = 9;

int EnvInt(const char* name) {
  const char* value = std::getenv(name);
  return value != nullptr ? std::atoi(value) : 0;
}

}  // namespace

extern "C" {

__attribute__((visibility("default"))) int nvmlInit_v2() { return EnvInt("FAKE_NVML_INIT_ERROR"); }

__attribute__((visibility("default"))) int nvmlDeviceGetCount_v2(unsigned int* count) {
  *count = static_cast<unsigned int>(EnvInt("FAKE_NVML_GPUS"));
  return kSuccess;
}

__attribute__((visibility("default"))) int nvmlShutdown() { return kSuccess; }

__attribute__((visibility("default"))) const char* nvmlErrorString(int code) {
  return code == kDriverNotLoaded ? "Driver Not Loaded" : "Unknown Error";
}

}  // extern "C"
