#pragma once
// bf16 products with f32 accumulation for small tiles (the flash kernel's Q K^T and P V under
// MatmulPrecision::bf16). The right operand is "pair-packed": element (p, j) of a (k/2, n) grid
// holds the two bf16 values B[2p][j], B[2p+1][j] side by side, the layout AVX512-BF16's dot
// product reads (16 columns x 2 values per instruction); an odd k is padded with a zero row.
// A portable loop computes the same products (exact in f32) where the CPU lacks AVX512-BF16.
#include <cpdit/core/dtype.hpp>

#include <cstdint>

namespace cpdit::kernels::bf16_pairs {

// Pairs along the shared dimension: ceil(k / 2).
inline int64_t pairs(int64_t k) { return (k + 1) / 2; }

// dst (rows, 2 * pairs(k)) = bf16(src (rows, k)), row strides ld_src / ld_dst in elements; the pad
// column of an odd k is zero. The left operand's layout.
void round_rows(const float* src, int64_t ld_src, int64_t rows, int64_t k, bf16* dst, int64_t ld_dst);

// Packs the transpose of src (n rows of k values, row stride ld_src): dst is (pairs(k), n) pairs
// with row stride ld_dst pairs, so that dst is the right operand B = src^T (k x n).
void pack_transposed(const float* src, int64_t ld_src, int64_t n, int64_t k, bf16* dst, int64_t ld_dst);

// Packs src (k rows of n values, row stride ld_src) as the right operand B = src: dst is
// (pairs(k), n) pairs with row stride ld_dst pairs.
void pack_rows(const float* src, int64_t ld_src, int64_t k, int64_t n, bf16* dst, int64_t ld_dst);

// c (m x n, row stride ldc) = alpha * a b + beta * c, beta 0 or 1 (with 0, c is not read). a is
// (m, 2 * k_pairs) bf16 with row stride lda; b is packed, (k_pairs, n) pairs with row stride ldb.
void gemm(int64_t m, int64_t n, int64_t k_pairs, float alpha, const bf16* a, int64_t lda, const bf16* b,
          int64_t ldb, float beta, float* c, int64_t ldc);

}  // namespace cpdit::kernels::bf16_pairs
