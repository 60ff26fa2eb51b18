// The bf16 flash forward's softmax weights (kernels/cpu/flash_rows.hpp, exp_to_bf16_sum) on the
// portable loop and on this CPU's vector path, against exp in float64. Each weight is within one bf16
// rounding (2^-8 relative for 8 significant bits) and the error of the f32 exponential before it (a few
// 1e-6: the degree-4 2^f and the f32 constants, flash_rows.cpp), masked (-inf) scores give exactly 0,
// the padding up to n_padded is zeros and nothing past it is written.
#include "kernels/cpu/flash_rows.hpp"

#include <cpdit/kernels/isa.hpp>

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>
#include <vector>

namespace cpdit::kernels::flash {
namespace {

constexpr uint16_t kMarker = 0x7e7e;

TEST(FlashRows, ExpToBf16SumMatchesFloat64) {
  const float scale = 0.7f;
  for (Isa isa : {Isa::portable, detected_isa()})
    for (int64_t n : {1, 15, 16, 17, 31, 32, 33, 100, 512}) {
      const ScopedKernelIsa scoped(isa);
      SCOPED_TRACE(::testing::Message() << isa_name(kernel_isa()) << " n " << n);
      std::mt19937 gen(static_cast<uint32_t>(n));
      std::uniform_real_distribution<float> score(-8.0f, 4.0f);
      std::vector<float> x(static_cast<size_t>(n));
      for (int64_t j = 0; j < n; ++j) x[size_t(j)] = j % 7 == 3 ? -std::numeric_limits<float>::infinity() : score(gen);
      // A shift 1 below the largest scaled score: weights up to e, as where the forward keeps an older shift.
      float shift = -1.0f;
      for (float v : x) shift = std::max(shift, scale * v - 1.0f);
      const int64_t n_padded = (n + 31) / 32 * 32;
      std::vector<bf16> p(size_t(n_padded + 32), bf16{kMarker});
      const float sum = exp_to_bf16_sum(x.data(), n, scale, shift, p.data(), n_padded);
      double want_sum = 0;
      for (int64_t j = 0; j < n; ++j) {
        const double want = std::exp(double(scale) * x[size_t(j)] - shift);
        want_sum += want;
        EXPECT_LE(std::abs(bf16_to_f32(p[size_t(j)]) - want), want * (std::ldexp(1.0, -8) + 1e-5)) << "j " << j;
      }
      // The f32 weights' own error, and an f32 sum of n of them.
      EXPECT_LE(std::abs(sum - want_sum), want_sum * (1e-5 + double(n) * std::ldexp(1.0, -24)));
      for (int64_t j = n; j < n_padded; ++j) EXPECT_EQ(p[size_t(j)].bits, 0) << "j " << j;
      for (int64_t j = n_padded; j < n_padded + 32; ++j) EXPECT_EQ(p[size_t(j)].bits, kMarker) << "j " << j;
    }
}

// Weights far below the shift: above 2^-126 (the least normal f32) within the tolerance above; below
// it 0 or the tiny true value (the vector path sets them to 0 rather than underflow, flash_rows.cpp),
// never more; -inf exactly 0; a NaN score gives a NaN weight and a NaN sum, not a silent 0.
TEST(FlashRows, WeightsBelowTheNormalRangeAreAtMostTinyAndNaNPropagates) {
  const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
  const std::vector<float> x{-80.0f, -87.0f, -88.0f, -95.0f, -100.0f, -104.0f, -200.0f, -inf, 0.5f, -1.0f};
  for (Isa isa : {Isa::portable, detected_isa()}) {
    const ScopedKernelIsa scoped(isa);
    SCOPED_TRACE(isa_name(kernel_isa()));
    std::vector<bf16> p(32, bf16{kMarker});
    const float sum = exp_to_bf16_sum(x.data(), int64_t(x.size()), 1.0f, 0.0f, p.data(), 32);
    const double least_normal = std::ldexp(1.0, -126);
    for (size_t j = 0; j < x.size(); ++j) {
      const double want = std::exp(double(x[j])), got = bf16_to_f32(p[j]);
      if (want >= least_normal) EXPECT_LE(std::abs(got - want), want * (std::ldexp(1.0, -8) + 1e-5)) << "x " << x[j];
      else EXPECT_TRUE(got >= 0 && got <= least_normal) << "x " << x[j] << " got " << got;
    }
    EXPECT_EQ(p[7].bits, 0);  // -inf
    EXPECT_NEAR(sum, std::exp(0.5) + std::exp(-1.0), 1e-5);

    std::vector<float> with_nan = x;
    with_nan[2] = nan;
    EXPECT_TRUE(std::isnan(exp_to_bf16_sum(with_nan.data(), int64_t(x.size()), 1.0f, 0.0f, p.data(), 32)));
    EXPECT_TRUE(std::isnan(bf16_to_f32(p[2])));
  }
}

}  // namespace
}  // namespace cpdit::kernels::flash
