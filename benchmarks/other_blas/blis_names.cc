// The OpenBLAS-only calls of gemm_bench.cc and runtime/ops/cpu/sgemm_probe.cc, answered by BLIS, so that scripts/bench-blas.sh can
// build the same benchmark against Debian's BLIS (libblis-dev: its CBLAS has the same
// cblas_sgemm). Not part of the CMake build: BLIS is not a dependency of dslaunch.
#include <string>

extern "C" {
const char* bli_info_get_version_str();
int bli_arch_query_id();
const char* bli_arch_string(int id);
long bli_thread_get_num_threads();

char* openblas_get_config() {
  static std::string text = std::string("BLIS ") + bli_info_get_version_str() + " " + bli_arch_string(bli_arch_query_id());
  return text.data();
}
char* openblas_get_corename() {
  static std::string name = bli_arch_string(bli_arch_query_id());
  return name.data();
}
int openblas_get_num_threads() { return static_cast<int>(bli_thread_get_num_threads()); }
}
