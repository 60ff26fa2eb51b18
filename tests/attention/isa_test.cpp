// The flash kernel on every instruction set the kernels can be told to use (kernels/isa.hpp): its
// AVX-512 softmax rows and bf16 tile products, and the portable loops that replace them on a CPU
// without AVX-512, each against the float64 reference with the tolerances of forward_test.cpp and
// backward_test.cpp.
#include "cases.hpp"

#include <cpdit/attention/attention.hpp>
#include <cpdit/core/precision.hpp>
#include <cpdit/kernels/isa.hpp>

#include <gtest/gtest.h>

#include <cmath>

namespace cpdit::attention::testing {
namespace {

using kernels::Isa;

TEST(FlashKernelIsa, EveryIsaMatchesTheFloat64Reference) {
  // Several key tiles and a ragged edge (rows % 16 != 0, keys % 16 != 0), GQA and key padding.
  const Case c = make_case({2, 37, 530, 4, 2, 32}, MaskKind::key_padding, 41);
  const std::vector<double> dout = random_values(c.ref.q.size(), 42);
  const RefOutputs want = ref_forward(c.ref);
  const RefGrads want_grads = ref_backward(c.ref, dout);
  for (Isa isa : {Isa::portable, Isa::avx512, Isa::avx512_bf16, Isa::amx}) {
    const kernels::ScopedKernelIsa scoped(isa);
    SCOPED_TRACE(kernels::isa_name(kernels::kernel_isa()));
    EXPECT_EQ(kernels::kernel_isa(), std::min(isa, kernels::detected_isa()));
    const Backend& flash = backend("flash");
    const Result r = flash.forward(c.q, c.k, c.v, c.mask, c.scale);
    EXPECT_LE(max_abs_diff(values(r.out), want.out), 2e-5);
    EXPECT_LE(max_abs_diff(values(r.lse), want.lse), 2e-5);
    const Grads g = flash.backward(to_tensor(dout, c.q.shape()), c.q, c.k, c.v, r.out, r.lse, c.mask, c.scale);
    EXPECT_LE(max_abs_diff(values(g.dq), want_grads.dq), 2e-5 * std::max(1.0, max_abs(want_grads.dq)));
    EXPECT_LE(max_abs_diff(values(g.dk), want_grads.dk), 2e-5 * std::max(1.0, max_abs(want_grads.dk)));
    EXPECT_LE(max_abs_diff(values(g.dv), want_grads.dv), 2e-5 * std::max(1.0, max_abs(want_grads.dv)));
  }
}

// The largest |score| of a one-batch case with as many KV heads as heads.
double max_abs_score(const Case& c) {
  const RefDims& d = c.ref.d;
  double max_score = 0;
  for (int64_t i = 0; i < d.Sq; ++i)
    for (int64_t j = 0; j < d.Sk; ++j)
      for (int64_t h = 0; h < d.H; ++h) {
        double s = 0;
        for (int64_t e = 0; e < d.D; ++e)
          s += c.ref.q[size_t((i * d.H + h) * d.D + e)] * c.ref.k[size_t((j * d.H + h) * d.D + e)];
        max_score = std::max(max_score, std::abs(s * c.ref.scale));
      }
  return max_score;
}

// The flash forward of `c` at the current kernel level: out and lse within tol of the float64 ones.
Result expect_forward_within(const Case& c, const RefOutputs& want, double tol) {
  Result r = backend("flash").forward(c.q, c.k, c.v, c.mask, c.scale);
  EXPECT_LE(max_abs_diff(values(r.out), want.out), tol);
  EXPECT_LE(max_abs_diff(values(r.lse), want.lse), tol);
  return r;
}

// Scores far apart (scale 20: |s| up to ~500), so the online softmax's exp runs deep into underflow:
// keys far below the running max give denormals or exactly 0, and a max that grows by more than 88
// rescales the accumulator by 0. Both passes must still match the float64 reference. f32 scores
// carry a rounding error of a few ulp of |s| (about sqrt(D) eps |s| for a D-term dot product), which
// exp turns into that relative error of P: hence 8 eps max|s| on top of the 2e-5 of the test above.
TEST(FlashKernelIsa, ScoresFarBelowTheMaxUnderflowCleanlyOnEveryIsa) {
  Case c = make_case({1, 40, 300, 2, 2, 32}, MaskKind::none, 45);
  c.scale = 20.0f, c.ref.scale = 20.0;
  const double max_score = max_abs_score(c);
  ASSERT_GT(max_score, 240.0);  // deep enough that exp(s - max) is exactly 0 for some keys
  const std::vector<double> dout = random_values(c.ref.q.size(), 46);
  const RefOutputs want = ref_forward(c.ref);
  const RefGrads want_grads = ref_backward(c.ref, dout);
  const double tol = 2e-5 + 8 * std::ldexp(1.0, -24) * max_score;
  for (Isa isa : {Isa::portable, Isa::avx512}) {
    const kernels::ScopedKernelIsa scoped(isa);
    SCOPED_TRACE(kernels::isa_name(kernels::kernel_isa()));
    const Result r = expect_forward_within(c, want, tol);
    const Grads g =
        backend("flash").backward(to_tensor(dout, c.q.shape()), c.q, c.k, c.v, r.out, r.lse, c.mask, c.scale);
    EXPECT_LE(max_abs_diff(values(g.dq), want_grads.dq), tol * std::max(1.0, max_abs(want_grads.dq)));
    EXPECT_LE(max_abs_diff(values(g.dk), want_grads.dk), tol * std::max(1.0, max_abs(want_grads.dk)));
    EXPECT_LE(max_abs_diff(values(g.dv), want_grads.dv), tol * std::max(1.0, max_abs(want_grads.dv)));
  }
}

// The same scores with 30% of the keys hidden by padding: hidden keys often score far above every
// visible one, and a softmax shifted by their max would underflow all of a query's weights to 0. The
// f32 forward takes each tile's max from its score product, which sees the hidden scores too, so a
// tile with hidden keys must find its max again after masking. Tolerance as above.
TEST(FlashKernelIsa, HiddenKeysFarAboveTheVisibleOnesChangeNothingOnEveryIsa) {
  Case c = make_case({1, 40, 300, 2, 2, 32}, MaskKind::key_padding, 45);
  c.scale = 20.0f, c.ref.scale = 20.0;
  const double tol = 2e-5 + 8 * std::ldexp(1.0, -24) * max_abs_score(c);
  const RefOutputs want = ref_forward(c.ref);
  for (Isa isa : {Isa::portable, Isa::avx512}) {
    const kernels::ScopedKernelIsa scoped(isa);
    SCOPED_TRACE(kernels::isa_name(kernels::kernel_isa()));
    expect_forward_within(c, want, tol);
  }
}

// Under MatmulPrecision::bf16 the tile products are bf16 (AMX, AVX512-BF16 or the portable loop, one
// level each):
// on bf16-rounded q, k, v every product is exact in f32, so each path is within P's rounding
// (2^-9 max|v|) and the f32 kernel's 2e-5 of the float64 reference, as forward_test.cpp argues.
TEST(FlashKernelIsa, Bf16TileProductsMatchOnEveryIsa) {
  Case c = make_case({1, 70, 200, 2, 1, 40}, MaskKind::none, 43);
  c.q = c.q.to(DType::bf16).to(DType::f32), c.k = c.k.to(DType::bf16).to(DType::f32);
  c.v = c.v.to(DType::bf16).to(DType::f32);
  c.ref.q = values(c.q), c.ref.k = values(c.k), c.ref.v = values(c.v);
  const RefOutputs want = ref_forward(c.ref);
  const double bound = std::ldexp(max_abs(c.ref.v), -9) + 2e-5;
  const ScopedMatmulPrecision precision(MatmulPrecision::bf16);
  for (Isa isa : {Isa::portable, Isa::avx512_bf16, Isa::amx}) {
    const kernels::ScopedKernelIsa scoped(isa);
    SCOPED_TRACE(kernels::isa_name(kernels::kernel_isa()));
    const Result r = backend("flash").forward(c.q, c.k, c.v, c.mask, c.scale);
    EXPECT_LE(max_abs_diff(values(r.lse), want.lse), 2e-5);
    EXPECT_LE(max_abs_diff(values(r.out), want.out), bound);
  }
}

}  // namespace
}  // namespace cpdit::attention::testing
