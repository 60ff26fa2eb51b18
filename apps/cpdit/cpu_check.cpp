// A binary built for one CPU (-march=native by default) dies with SIGILL on an older one, often far
// from the cause. Before anything else runs, check that this CPU has the instruction sets the
// compiler was allowed to use, and say which is missing. Compiled for the baseline x86-64, like
// core/cpu_features.cpp, so that the check itself runs on any x86-64 CPU.
#include <cpdit/core/cpu_features.hpp>

#include <cstdio>
#include <cstdlib>

#if !defined(__clang__)
#pragma GCC push_options
#pragma GCC target("arch=x86-64")
#endif

namespace {

__attribute__((constructor(101))) void check_cpu_features() {
  cpdit::CpuFeature features[64];
  const int count = cpdit::build_cpu_features(features, 64);
  char message[512];
  if (!cpdit::missing_cpu_feature(features, count, message, sizeof message)) return;
  std::fputs(message, stderr);
  std::_Exit(2);
}

}  // namespace

#if !defined(__clang__)
#pragma GCC pop_options
#endif
