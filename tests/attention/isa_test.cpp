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
  for (Isa isa : {Isa::portable, Isa::avx512, Isa::avx512_bf16}) {
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

// Under MatmulPrecision::bf16 the tile products are bf16 (AMX, AVX512-BF16 or the portable loop):
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
  for (Isa isa : {Isa::portable, Isa::avx512_bf16}) {
    const kernels::ScopedKernelIsa scoped(isa);
    SCOPED_TRACE(kernels::isa_name(kernels::kernel_isa()));
    const Result r = backend("flash").forward(c.q, c.k, c.v, c.mask, c.scale);
    EXPECT_LE(max_abs_diff(values(r.lse), want.lse), 2e-5);
    EXPECT_LE(max_abs_diff(values(r.out), want.out), bound);
  }
}

}  // namespace
}  // namespace cpdit::attention::testing
