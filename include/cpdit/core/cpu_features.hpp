#pragma once
// The instruction sets this build may use everywhere (its -march), and whether this CPU has them: a
// binary built for a newer CPU than the one it runs on would die with SIGILL far from the cause, so
// the command line checks them before anything else runs (apps/cpdit/cpu_check.cpp).
//
// The check itself must run on any x86-64 CPU: its code is compiled for the baseline x86-64, and
// the interface is plain arrays (no inline library templates, whose one linked copy could come from
// a file compiled for the newer CPU).
#include <cstddef>

namespace cpdit {

struct CpuFeature {
  const char* name;  // as GCC's __builtin_cpu_supports names it: "avx2", "avx512f", ...
  bool present;      // on this CPU
};

// Writes the sets the compiler was allowed to use (at most `capacity`) and returns how many.
int build_cpu_features(CpuFeature* out, int capacity);

// The one-line error, newline included, for the first missing feature of `features` (written to
// `message`, cut to `size`); false when every feature is present.
bool missing_cpu_feature(const CpuFeature* features, int count, char* message, size_t size);

}  // namespace cpdit
