#pragma once
// bf16 products with f32 accumulation for small tiles (the flash kernel's Q K^T and P V under
// MatmulPrecision::bf16). The right operand is "pair-packed": element (p, j) of a (k/2, n) grid
// holds the two bf16 values B[2p][j], B[2p+1][j] side by side, the layout both AMX's tile product
// and AVX512-BF16's dot product read.
//
// Padding, so that the AMX tile product (16 rows x 16 columns x 16 pairs per instruction) needs no
// edge cases: the shared dimension is padded with zeros to a multiple of kPairBlock pairs in both
// operands, and the rows of `a` and the columns of `b` must be readable (any values) up to the next
// multiple of kEdge. Where AMX is not available the AVX512-BF16 kernel, or a portable loop, computes
// the same products (each exact in f32) from the same layouts.
#include <cpdit/core/dtype.hpp>

#include <cstdint>

namespace cpdit::kernels::bf16_pairs {

constexpr int64_t kPairBlock = 16;
constexpr int64_t kEdge = 32;

inline int64_t round_up(int64_t x, int64_t to) { return (x + to - 1) / to * to; }
// Pairs along a shared dimension of k values, padded: what `gemm` is given as k_pairs.
inline int64_t padded_pairs(int64_t k) { return round_up((k + 1) / 2, kPairBlock); }

// dst (rows, ld_dst) = bf16(src (rows, k)), zeros in columns [k, ld_dst): the left operand, row
// strides in elements.
void round_rows(const float* src, int64_t ld_src, int64_t rows, int64_t k, bf16* dst, int64_t ld_dst);

// Packs the transpose of src (n rows of k values, row stride ld_src) as the right operand
// B = src^T (k x n): dst is (k/2, n) pairs with row stride ld_dst pairs; an odd k's last pair gets a
// zero. dst must hold zeros where padding goes (only the pairs of the k values are written).
void pack_transposed(const float* src, int64_t ld_src, int64_t n, int64_t k, bf16* dst, int64_t ld_dst);

// Packs src (k rows of n values, row stride ld_src) as the right operand B = src: dst is (k/2, n)
// pairs with row stride ld_dst pairs; an odd k's last pair gets a zero. Padding as pack_transposed.
void pack_rows(const float* src, int64_t ld_src, int64_t k, int64_t n, bf16* dst, int64_t ld_dst);

// c (m x n, row stride ldc) = alpha * a b + beta * c, beta 0 or 1 (with 0, c is not read). a is
// (m, 2 * k_pairs) bf16 with row stride lda; b is packed, (k_pairs, n) pairs with row stride ldb;
// k_pairs a multiple of kPairBlock, both padded as above.
void gemm(int64_t m, int64_t n, int64_t k_pairs, float alpha, const bf16* a, int64_t lda, const bf16* b,
          int64_t ldb, float beta, float* c, int64_t ldc);

}  // namespace cpdit::kernels::bf16_pairs
