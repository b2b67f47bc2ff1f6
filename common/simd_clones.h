// DSLAUNCH_SIMD_CLONES: marks a function with elementwise loops (`#pragma omp simd`) to be compiled
// three times, for x86-64-v4 (AVX-512), x86-64-v3 (AVX2) and the baseline the project is built
// for, the widest the CPU supports being chosen once when the program loads (GCC's
// target_clones, resolved through an ifunc). The library stays portable and runs 16 floats at a
// time where the CPU can (docs/engine.md, "Elementwise kernels").
//
// The same bits on every CPU: a target using it is built with dslaunch_simd_kernels()
// (cmake/DslaunchTargets.cmake), whose -ffp-contract=off keeps the wider clones from fusing
// multiplies and adds that the baseline (no FMA) computes separately. So a clone's result equals
// the baseline's for loops without a reduction. A sum across lanes would add in another order per
// width: the marked functions sum through LaneSum (runtime/ops/cpu/lane_sum.h), whose order is
// the same at every width. A maximum is exact in any order.
//
// Elsewhere (another compiler, another architecture) the macro is empty: one plain function.
#pragma once

#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) && !defined(__SANITIZE_ADDRESS__)
#define DSLAUNCH_SIMD_CLONES __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define DSLAUNCH_SIMD_CLONES
#endif
