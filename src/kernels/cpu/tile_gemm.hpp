#pragma once
// The f32 products of flash attention's tiles (scores, P V, and the backward's five), as one
// register-blocked AVX-512 kernel: a 6 x 64 block of C lives in 24 registers while up to 128 steps of
// the inner dimension stream through, with no packing of A (read through two strides, so A^T costs
// nothing). Measured against oneDNN's sgemm called per tile (bench attention, S 1024, H 24, one
// thread): the backward about 1.2x faster, the forward about even before the allocator's huge pages.
// The kernel is compiled for AVX-512 in every build and runs where kernel_isa() (kernels/isa.hpp)
// allows it; otherwise (no AVX-512, or CPDIT_KERNEL_ISA=portable) multiply calls kernels::gemm.
#include <cstdint>

namespace cpdit::kernels::tile_gemm {

// A is read with two strides: element (i, p) at a[i * a_row + p * a_col]. So A row-major is
// (lda, 1) and A^T of a row-major matrix is (1, lda); one of the two strides must be 1.
struct Strided {
  const float* data;
  int64_t row, col;
};

// Rows of `width` floats (row stride ld) that the next product will read, to be brought into L2
// while this one runs. A tile's rows in a (B, S, H, D) tensor lie H D floats apart, often a page or
// more, where the hardware prefetcher does not follow; asked for all at once they stall on the
// fill buffers, so multiply spreads them over its blocks.
struct Ahead {
  const float* data = nullptr;
  int64_t ld = 0, rows = 0, width = 0;
};

// C (m x n, row stride ldc) = alpha A B (+ C when accumulate), with A m x k (strided) and B k x n
// row-major (row stride ldb); prefetches `ahead` on the way. With `c_scale` (n floats) an accumulated
// C's column j is scaled by c_scale[j] first, as it is loaded (the flash forward's rescaling of its
// output accumulator), and `col_max` (n floats) is raised to the largest value written to each column
// of C (the flash forward's row max of the scores): each would otherwise be a pass of its own.
void multiply(int64_t m, int64_t n, int64_t k, float alpha, Strided a, const float* b, int64_t ldb,
              bool accumulate, float* c, int64_t ldc, Ahead ahead = {}, const float* c_scale = nullptr,
              float* col_max = nullptr);

// The row stride for a scratch tile of `width` floats per row: one vector more, so that rows a
// power of two of bytes apart do not all fall in the same few L1 sets (up to 15% on a tile product).
constexpr int64_t padded_ld(int64_t width) { return width + 16; }

// dst (cols x rows, row stride ld_dst) = src^T, src rows x cols with row stride ld_src.
void transpose(const float* src, int64_t ld_src, int64_t rows, int64_t cols, float* dst, int64_t ld_dst);

}  // namespace cpdit::kernels::tile_gemm
