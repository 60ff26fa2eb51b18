// The build's required instruction sets against CPUID (core/cpu_features.hpp).
#include <cpdit/core/cpu_features.hpp>

#include <cstdio>
#include <cstring>

namespace cpdit {
namespace {

// The sets the compiler may use in every file, read from its macros here, before the code below
// is switched to the baseline: plain data, no code. clang 14's __builtin_cpu_supports does not know
// f16c, lzcnt, movbe, avx512fp16 or vaes; a clang build (the fuzzers) leaves them out.
constexpr const char* kRequired[] = {
    "sse2",
#if defined(__SSE4_2__)
    "sse4.2",
#endif
#if defined(__POPCNT__)
    "popcnt",
#endif
#if defined(__AVX__)
    "avx",
#endif
#if defined(__AVX2__)
    "avx2",
#endif
#if defined(__FMA__)
    "fma",
#endif
#if defined(__F16C__) && !defined(__clang__)
    "f16c",
#endif
#if defined(__BMI__)
    "bmi",
#endif
#if defined(__BMI2__)
    "bmi2",
#endif
#if defined(__LZCNT__) && !defined(__clang__)
    "lzcnt",
#endif
#if defined(__MOVBE__) && !defined(__clang__)
    "movbe",
#endif
#if defined(__AVX512F__)
    "avx512f",
#endif
#if defined(__AVX512BW__)
    "avx512bw",
#endif
#if defined(__AVX512VL__)
    "avx512vl",
#endif
#if defined(__AVX512DQ__)
    "avx512dq",
#endif
#if defined(__AVX512CD__)
    "avx512cd",
#endif
#if defined(__AVX512VNNI__)
    "avx512vnni",
#endif
#if defined(__AVX512BF16__)
    "avx512bf16",
#endif
#if defined(__AVX512FP16__) && !defined(__clang__)
    "avx512fp16",
#endif
#if defined(__AVX512VBMI__)
    "avx512vbmi",
#endif
#if defined(__AVX512VBMI2__)
    "avx512vbmi2",
#endif
#if defined(__AVX512IFMA__)
    "avx512ifma",
#endif
#if defined(__AVX512BITALG__)
    "avx512bitalg",
#endif
#if defined(__AVX512VPOPCNTDQ__)
    "avx512vpopcntdq",
#endif
#if defined(__GFNI__)
    "gfni",
#endif
#if defined(__VAES__) && !defined(__clang__)
    "vaes",
#endif
#if defined(__VPCLMULQDQ__)
    "vpclmulqdq",
#endif
};

}  // namespace

// From here on, code for the baseline x86-64, so that the check runs on any x86-64 CPU (GCC, which
// builds the command line; clang has no such pragma).
#if !defined(__clang__)
#pragma GCC push_options
#pragma GCC target("arch=x86-64")
#endif

namespace {

// __builtin_cpu_supports takes a literal only: one test per name the table above can hold.
bool cpu_has(const char* name) {
#define CPDIT_TEST(feature) \
  if (std::strcmp(name, feature) == 0) return __builtin_cpu_supports(feature) != 0;
  CPDIT_TEST("sse2")
  CPDIT_TEST("sse4.2")
  CPDIT_TEST("popcnt")
  CPDIT_TEST("avx")
  CPDIT_TEST("avx2")
  CPDIT_TEST("fma")
#if !defined(__clang__)
  CPDIT_TEST("f16c")
#endif
  CPDIT_TEST("bmi")
  CPDIT_TEST("bmi2")
#if !defined(__clang__)
  CPDIT_TEST("lzcnt")
#endif
#if !defined(__clang__)
  CPDIT_TEST("movbe")
#endif
  CPDIT_TEST("avx512f")
  CPDIT_TEST("avx512bw")
  CPDIT_TEST("avx512vl")
  CPDIT_TEST("avx512dq")
  CPDIT_TEST("avx512cd")
  CPDIT_TEST("avx512vnni")
  CPDIT_TEST("avx512bf16")
#if !defined(__clang__)
  CPDIT_TEST("avx512fp16")
#endif
  CPDIT_TEST("avx512vbmi")
  CPDIT_TEST("avx512vbmi2")
  CPDIT_TEST("avx512ifma")
  CPDIT_TEST("avx512bitalg")
  CPDIT_TEST("avx512vpopcntdq")
  CPDIT_TEST("gfni")
#if !defined(__clang__)
  CPDIT_TEST("vaes")
#endif
  CPDIT_TEST("vpclmulqdq")
#undef CPDIT_TEST
  return false;
}

}  // namespace

int build_cpu_features(CpuFeature* out, int capacity) {
  __builtin_cpu_init();
  int count = 0;
  for (const char* name : kRequired)
    if (count < capacity) out[count++] = {name, cpu_has(name)};
  return count;
}

bool missing_cpu_feature(const CpuFeature* features, int count, char* message, size_t size) {
  for (int i = 0; i < count; ++i) {
    if (features[i].present) continue;
#if defined(CPDIT_PORTABLE_BUILD)
    std::snprintf(message, size,
                  "cpdit: error: this portable build (x86-64-v3) uses %s instructions, which this CPU "
                  "lacks; rebuild on this machine (-DCPDIT_NATIVE=ON, the default)\n",
                  features[i].name);
#else
    std::snprintf(message, size,
                  "cpdit: error: this build uses %s instructions, which this CPU lacks; rebuild on this "
                  "machine, or with -DCPDIT_NATIVE=OFF for a portable build (x86-64-v3, AVX-512 kernels "
                  "chosen at run time)\n",
                  features[i].name);
#endif
    return true;
  }
  return false;
}

}  // namespace cpdit

#if !defined(__clang__)
#pragma GCC pop_options
#endif
