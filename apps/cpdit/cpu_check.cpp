// A binary built for one CPU (-march=native by default) dies with SIGILL on an older one, often far
// from the cause. Before anything else runs, check that this CPU has the instruction sets the
// compiler was allowed to use, and say which is missing.
#include <cstdio>
#include <cstdlib>

namespace {

struct Feature {
  const char* name;
  bool present;
};

__attribute__((constructor(101))) void check_cpu_features() {
  __builtin_cpu_init();
  const Feature needed[] = {
#if defined(__AVX__)
      {"avx", __builtin_cpu_supports("avx") != 0},
#endif
#if defined(__AVX2__)
      {"avx2", __builtin_cpu_supports("avx2") != 0},
#endif
#if defined(__FMA__)
      {"fma", __builtin_cpu_supports("fma") != 0},
#endif
#if defined(__AVX512F__)
      {"avx512f", __builtin_cpu_supports("avx512f") != 0},
#endif
#if defined(__AVX512BW__)
      {"avx512bw", __builtin_cpu_supports("avx512bw") != 0},
#endif
#if defined(__AVX512VL__)
      {"avx512vl", __builtin_cpu_supports("avx512vl") != 0},
#endif
      {"sse2", __builtin_cpu_supports("sse2") != 0},
  };
  for (const Feature& f : needed)
    if (!f.present) {
      std::fprintf(stderr,
                   "cpdit: error: this build uses %s instructions, which this CPU lacks; rebuild on this "
                   "machine, or with -DCPDIT_NATIVE=OFF for a portable build (x86-64-v3)\n",
                   f.name);
      std::_Exit(2);
    }
}

}  // namespace
