#pragma once
// Target attributes for the kernels' AVX-512 variants: each such function is compiled for the set
// named here whatever the build's -march, and runs only after kernel_isa() (kernels/isa.hpp) has
// said the CPU has it. Intrinsics need the set on the function that uses them, and a function with
// a wider set is not inlined into one without it, so dispatch happens at a call per row or tile.
#include <cpdit/kernels/isa.hpp>

#define CPDIT_TARGET_AVX512 __attribute__((target("avx512f")))
#define CPDIT_TARGET_AVX512_BF16 __attribute__((target("avx512f,avx512bf16")))
#define CPDIT_TARGET_AVX512_VNNI __attribute__((target("avx512f,avx512bw,avx512vl,avx512vnni")))
#define CPDIT_TARGET_AMX __attribute__((target("avx512f,avx512bf16,amx-tile,amx-bf16")))
