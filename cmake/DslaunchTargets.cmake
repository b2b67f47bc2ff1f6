# Helpers that give every dslaunch target the same flags, so tests build exactly like the binaries.

# Flags shared by every target of the project.
function(dslaunch_apply_flags target)
  # nvcc takes host-compiler warnings through -Xcompiler; its own device warnings are on.
  target_compile_options(${target} PRIVATE
    $<$<COMPILE_LANGUAGE:CXX>:-Wall -Wextra -Wno-unused-parameter>
    $<$<COMPILE_LANGUAGE:CUDA>:-Xcompiler=-Wall,-Wextra,-Wno-unused-parameter>)
  target_include_directories(${target} PUBLIC
    "${PROJECT_SOURCE_DIR}" "${PROJECT_BINARY_DIR}/generated")
  if(DSLAUNCH_SANITIZE)
    target_compile_options(${target} PRIVATE
      $<$<COMPILE_LANGUAGE:CXX>:-fsanitize=${DSLAUNCH_SANITIZE} -fno-omit-frame-pointer>)
    target_link_options(${target} PRIVATE -fsanitize=${DSLAUNCH_SANITIZE})
  endif()
endfunction()

# dslaunch_simd_kernels(TARGET): the target's `#pragma omp simd` loops are vectorized, and its
# functions marked DSLAUNCH_SIMD_CLONES (common/simd_clones.h) give the same bits in their AVX-512
# and AVX2 clones as in the baseline: no multiply-add contraction (the baseline has no FMA to
# contract into), no errno check around sqrt (which keeps it out of vector code), and comparisons
# that may not trap (so that clamps become vector blends).
function(dslaunch_simd_kernels target)
  if(CMAKE_CXX_COMPILER_ID STREQUAL "GNU")
    target_compile_options(${target} PRIVATE
      $<$<COMPILE_LANGUAGE:CXX>:-fopenmp-simd -ffp-contract=off -fno-math-errno -fno-trapping-math>)
  endif()
endfunction()

# DSLAUNCH_UNITY_BUILD (CMakeLists.txt): the files of a library or program compiled in batches of
# 16 (the three programs of the demo compiled in 158 s with 16, 188 s with 8, 178 s with whole
# libraries: fewer, longer units leave a core idle at the end).
# Files in one batch share one translation unit, so their file-local names (anonymous namespaces,
# statics) must differ: a name two files need is declared once in a header.
function(dslaunch_apply_unity target)
  set_target_properties(${target} PROPERTIES UNITY_BUILD ${DSLAUNCH_UNITY_BUILD} UNITY_BUILD_BATCH_SIZE 16)
endfunction()

# dslaunch_library(NAME SOURCES ... [DEPS ...]): a static library aliased as dslaunch::NAME.
function(dslaunch_library name)
  cmake_parse_arguments(ARG "" "" "SOURCES;DEPS" ${ARGN})
  add_library(dslaunch_${name} STATIC ${ARG_SOURCES})
  add_library(dslaunch::${name} ALIAS dslaunch_${name})
  dslaunch_apply_flags(dslaunch_${name})
  dslaunch_apply_unity(dslaunch_${name})
  target_link_libraries(dslaunch_${name} PUBLIC ${ARG_DEPS})
endfunction()

# dslaunch_executable(NAME SOURCES ... [DEPS ...]): a program placed in <build>/bin.
function(dslaunch_executable name)
  cmake_parse_arguments(ARG "" "" "SOURCES;DEPS" ${ARGN})
  add_executable(${name} ${ARG_SOURCES})
  dslaunch_apply_flags(${name})
  dslaunch_apply_unity(${name})
  target_link_libraries(${name} PRIVATE ${ARG_DEPS})
  set_target_properties(${name} PROPERTIES RUNTIME_OUTPUT_DIRECTORY "${PROJECT_BINARY_DIR}/bin")
endfunction()
