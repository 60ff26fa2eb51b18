// The flash kernel's bf16 packing (kernels/cpu/bf16_pairs.hpp): the AVX512-BF16 variants against the
// portable loops, bit for bit. Both round to nearest even, so on normal f32 values (the instruction
// flushes denormals, the loop keeps them) every bf16 must be the same; the buffers start filled with
// a marker so a write outside the documented region shows too.
#include "kernels/cpu/bf16_pairs.hpp"
#include "kernels/reference.hpp"

#include <cpdit/kernels/isa.hpp>

#include <gtest/gtest.h>

#include <functional>
#include <vector>

namespace cpdit::kernels::bf16_pairs {
namespace {

constexpr uint16_t kMarker = 0x7e7e;

// dst (with `size` bf16, filled with the marker first) as `pack` leaves it, at the given level.
std::vector<uint16_t> packed(Isa isa, int64_t size, const std::function<void(bf16*)>& pack) {
  const ScopedKernelIsa scoped(isa);
  std::vector<bf16> dst(size_t(size), bf16{kMarker});
  pack(dst.data());
  std::vector<uint16_t> bits;
  for (bf16 x : dst) bits.push_back(x.bits);
  return bits;
}

// The widths hit one and several 16-wide blocks, ragged edges and odd shared dimensions.
const int64_t kWidths[] = {1, 15, 16, 17, 45, 130};
const int64_t kDepths[] = {1, 15, 32, 33, 128};

TEST(Bf16Pairs, PackTransposedMatchesThePortableLoop) {
  if (detected_isa() < Isa::avx512_bf16) GTEST_SKIP() << "no AVX512-BF16 here";
  for (int64_t n : kWidths)
    for (int64_t k : kDepths) {
      SCOPED_TRACE(::testing::Message() << "n " << n << " k " << k);
      const int64_t ld_src = k + 3, ld_dst = round_up(n, kEdge) + 5, size = 2 * ((k + 1) / 2) * ld_dst;
      const Tensor src = test::random_tensor({n, ld_src}, uint32_t(n * 1000 + k));
      const auto pack = [&](bf16* dst) { pack_transposed(src.data<float>(), ld_src, n, k, dst, ld_dst); };
      EXPECT_EQ(packed(Isa::portable, size, pack), packed(detected_isa(), size, pack));
    }
}

TEST(Bf16Pairs, PackRowsMatchesThePortableLoop) {
  if (detected_isa() < Isa::avx512_bf16) GTEST_SKIP() << "no AVX512-BF16 here";
  for (int64_t k : kDepths)
    for (int64_t n : kWidths) {
      SCOPED_TRACE(::testing::Message() << "k " << k << " n " << n);
      const int64_t ld_src = n + 3, ld_dst = round_up(n, kEdge) + 5, size = 2 * ((k + 1) / 2) * ld_dst;
      const Tensor src = test::random_tensor({k, ld_src}, uint32_t(k * 1000 + n));
      const auto pack = [&](bf16* dst) { pack_rows(src.data<float>(), ld_src, k, n, dst, ld_dst); };
      EXPECT_EQ(packed(Isa::portable, size, pack), packed(detected_isa(), size, pack));
    }
}

}  // namespace
}  // namespace cpdit::kernels::bf16_pairs
