# The CUDA and NCCL path (docs/gpu.md): found here, switched on by default when nvcc is on this
# machine, so that CI compiles the CUDA sources even though it has no GPU to run them on.
#
# Sets, before the options are declared:
#   DSLAUNCH_CUDA_FOUND   nvcc works (check_language(CUDA))
#   DSLAUNCH_NCCL_FOUND   nccl.h and libnccl beside the CUDA toolkit
# After the options: enables the CUDA language, finds CUDAToolkit and makes the imported target
# dslaunch::nccl.
include(CheckLanguage)

function(dslaunch_detect_cuda)
  check_language(CUDA)
  set(found OFF)
  if(CMAKE_CUDA_COMPILER)
    set(found ON)
  endif()
  set(DSLAUNCH_CUDA_FOUND ${found} PARENT_SCOPE)
  set(nccl OFF)
  if(found)
    get_filename_component(bin_dir "${CMAKE_CUDA_COMPILER}" DIRECTORY)
    get_filename_component(root "${bin_dir}" DIRECTORY)
    find_path(DSLAUNCH_NCCL_INCLUDE_DIR nccl.h HINTS "${root}/include" ENV NCCL_HOME PATH_SUFFIXES include)
    find_library(DSLAUNCH_NCCL_LIBRARY nccl HINTS "${root}/lib64" "${root}/lib" ENV NCCL_HOME PATH_SUFFIXES lib lib64)
    if(DSLAUNCH_NCCL_INCLUDE_DIR AND DSLAUNCH_NCCL_LIBRARY)
      set(nccl ON)
    endif()
  endif()
  set(DSLAUNCH_NCCL_FOUND ${nccl} PARENT_SCOPE)
endfunction()

# Architectures compiled for unless the user sets CMAKE_CUDA_ARCHITECTURES: A100 (sm_80) and
# H100/H200 (sm_90), the machines the issue names.
set(DSLAUNCH_DEFAULT_CUDA_ARCHITECTURES "80;90")

macro(dslaunch_enable_cuda)
  if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES)
    set(CMAKE_CUDA_ARCHITECTURES "${DSLAUNCH_DEFAULT_CUDA_ARCHITECTURES}")
  endif()
  if(CCACHE_PROGRAM)
    set(CMAKE_CUDA_COMPILER_LAUNCHER "${CCACHE_PROGRAM}")
  endif()
  enable_language(CUDA)
  # CUDA sources are C++20 like the rest. CMake 3.25 predates nvcc's C++20 support (CUDA 12) and
  # knows no flag for the CUDA20 dialect, so it is named here, after the compiler checks (asking
  # for it before enable_language fails CMake's own test compile).
  if(NOT CMAKE_CUDA20_STANDARD_COMPILE_OPTION)
    set(CMAKE_CUDA20_STANDARD_COMPILE_OPTION "-std=c++20")
    set(CMAKE_CUDA20_EXTENSION_COMPILE_OPTION "-std=c++20")
  endif()
  set(CMAKE_CUDA_STANDARD 20)
  set(CMAKE_CUDA_STANDARD_REQUIRED ON)
  set(CMAKE_CUDA_EXTENSIONS OFF)
  # Debian 12's stock FindCUDAToolkit (CMake 3.25.1) marks CUDA::nvToolsExt deprecated without
  # checking that the target exists whenever the project requires CMake 3.25 or later; CUDA 13
  # ships no libnvToolsExt, so the module stops the configure with "set_property could not find
  # TARGET CUDA::nvToolsExt". (The machine image these sessions run on carries a patched module,
  # a fresh Debian 12 does not.) The module is therefore read as a project requiring 3.24 would.
  set(_dslaunch_minimum_version "${CMAKE_MINIMUM_REQUIRED_VERSION}")
  set(CMAKE_MINIMUM_REQUIRED_VERSION 3.24)
  find_package(CUDAToolkit REQUIRED)
  set(CMAKE_MINIMUM_REQUIRED_VERSION "${_dslaunch_minimum_version}")
  if(DSLAUNCH_WITH_NCCL)
    add_library(dslaunch::nccl UNKNOWN IMPORTED)
    set_target_properties(dslaunch::nccl PROPERTIES
      IMPORTED_LOCATION "${DSLAUNCH_NCCL_LIBRARY}"
      INTERFACE_INCLUDE_DIRECTORIES "${DSLAUNCH_NCCL_INCLUDE_DIR}")
  endif()
endmacro()
