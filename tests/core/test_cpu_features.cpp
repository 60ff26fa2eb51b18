// The start-up CPU check (core/cpu_features.hpp, run by apps/cpdit/cpu_check.cpp): the sets the
// build needs, and the one-line message naming the first one a CPU lacks.
#include <cpdit/core/cpu_features.hpp>

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace cpdit {
namespace {

std::vector<CpuFeature> build_features() {
  std::vector<CpuFeature> features(64);
  features.resize(size_t(build_cpu_features(features.data(), int(features.size()))));
  return features;
}

bool lists(const std::vector<CpuFeature>& features, const std::string& name) {
  for (const CpuFeature& f : features)
    if (name == f.name) return true;
  return false;
}

// Both builds need x86-64-v3; only a native build on an AVX-512 machine needs AVX-512 everywhere.
TEST(CpuFeatures, TheBuildNeedsWhatItWasCompiledFor) {
  const std::vector<CpuFeature> features = build_features();
  EXPECT_TRUE(lists(features, "avx2"));
  EXPECT_TRUE(lists(features, "fma"));
#if defined(__AVX512F__)
  EXPECT_TRUE(lists(features, "avx512f"));
#else
  EXPECT_FALSE(lists(features, "avx512f"));
#endif
  // The machine that built this test runs it: it has all of them.
  char message[512] = "";
  EXPECT_FALSE(missing_cpu_feature(features.data(), int(features.size()), message, sizeof message)) << message;
}

TEST(CpuFeatures, AMissingFeatureIsNamedInOneLineWithTheFix) {
  const CpuFeature features[] = {{"avx2", true}, {"avx512f", false}, {"avx512bf16", false}};
  char message[512] = "";
  ASSERT_TRUE(missing_cpu_feature(features, 3, message, sizeof message));
  const std::string text = message;
#if defined(CPDIT_PORTABLE_BUILD)
  EXPECT_EQ(text, "cpdit: error: this portable build (x86-64-v3) uses avx512f instructions, which this CPU "
                  "lacks; rebuild on this machine (-DCPDIT_NATIVE=ON, the default)\n");
#else
  EXPECT_EQ(text, "cpdit: error: this build uses avx512f instructions, which this CPU lacks; rebuild on this "
                  "machine, or with -DCPDIT_NATIVE=OFF for a portable build (x86-64-v3, AVX-512 kernels chosen "
                  "at run time)\n");
#endif
  char small[16] = "";
  EXPECT_TRUE(missing_cpu_feature(features, 3, small, sizeof small));  // cut, still terminated
  EXPECT_EQ(std::string(small), text.substr(0, 15));
}

}  // namespace
}  // namespace cpdit
