// The bf16 tile GEMM of bf16_pairs.hpp, fastest first, chosen at run time (kernels/isa.hpp):
// - AMX (when the kernel grants this process the tile state): 32 x 32 blocks of c as four 16 x 16
//   f32 tiles, each step loading two 16-row tiles of `a` and two 16-pair tiles of `b`;
// - AVX512-BF16: a register tile of up to 8 rows x 48 columns (24 f32 accumulators), each step
//   broadcasting one pair of a row of `a` into a dot product with three vectors of 16 pairs of `b`;
//   on this CPU its rate is about the f32 FMA's, AMX's several times that;
// - a portable loop.
// The packing of the right operand has an AVX512-BF16 variant (whole vectors rounded at once, a
// 16 x 16 transpose for K^T) beside its one-value-at-a-time loop, chosen the same way.
#include "kernels/cpu/bf16_pairs.hpp"
#include "kernels/cpu/isa_target.hpp"

#include "kernels/cpu/amx_tiles.hpp"

#include <algorithm>
#include <array>
#include <cstring>
#include <utility>

// g++ 12 reports its own _mm512_undefined_* placeholders as maybe-uninitialised (GCC bug 105593).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include "kernels/cpu/tile_rows.hpp"

#include <immintrin.h>

namespace cpdit::kernels::bf16_pairs {

namespace {

constexpr int kRows = 8;                 // rows of the register tile
constexpr int kVectors = 3;              // 16-column vectors of the register tile
constexpr int64_t kCols = 16 * kVectors;

using tile_rows::lanes;
using tile_rows::transpose16;

template <int Rows, int Vectors>
CPDIT_TARGET_AVX512_BF16 void register_tile(int64_t cols, int64_t k_pairs, float alpha, const bf16* a, int64_t lda,
                                            const bf16* b, int64_t ldb, float beta, float* c, int64_t ldc) {
  __mmask16 mask[Vectors];
  for (int v = 0; v < Vectors; ++v) mask[v] = lanes(cols - 16 * v);
  __m512 acc[Rows][Vectors];
  for (int i = 0; i < Rows; ++i)
    for (int v = 0; v < Vectors; ++v) acc[i][v] = _mm512_setzero_ps();
  for (int64_t p = 0; p < k_pairs; ++p) {
    __m512bh bv[Vectors];
    for (int v = 0; v < Vectors; ++v)
      bv[v] = (__m512bh)_mm512_maskz_loadu_epi32(mask[v], b + 2 * (p * ldb + 16 * v));
    for (int i = 0; i < Rows; ++i) {
      int32_t pair;
      std::memcpy(&pair, a + i * lda + 2 * p, sizeof pair);
      const __m512bh av = (__m512bh)_mm512_set1_epi32(pair);
      for (int v = 0; v < Vectors; ++v) acc[i][v] = _mm512_dpbf16_ps(acc[i][v], av, bv[v]);
    }
  }
  const __m512 scale = _mm512_set1_ps(alpha);
  for (int i = 0; i < Rows; ++i)
    for (int v = 0; v < Vectors; ++v) {
      float* out = c + i * ldc + 16 * v;
      __m512 r = _mm512_mul_ps(acc[i][v], scale);
      if (beta != 0.0f) r = _mm512_add_ps(r, _mm512_maskz_loadu_ps(mask[v], out));
      _mm512_mask_storeu_ps(out, mask[v], r);
    }
}

using TileFn = void (*)(int64_t, int64_t, float, const bf16*, int64_t, const bf16*, int64_t, float, float*, int64_t);

template <int Vectors, int... Rows>
constexpr std::array<TileFn, sizeof...(Rows)> tiles_for(std::integer_sequence<int, Rows...>) {
  return {&register_tile<Rows + 1, Vectors>...};
}

// kTiles[v - 1][r - 1]: the register tile of r rows and v vectors.
const std::array<std::array<TileFn, kRows>, kVectors> kTiles = {
    tiles_for<1>(std::make_integer_sequence<int, kRows>{}), tiles_for<2>(std::make_integer_sequence<int, kRows>{}),
    tiles_for<3>(std::make_integer_sequence<int, kRows>{})};

CPDIT_TARGET_AVX512_BF16 void avx512_gemm(int64_t m, int64_t n, int64_t k_pairs, float alpha, const bf16* a,
                                          int64_t lda, const bf16* b, int64_t ldb, float beta, float* c,
                                          int64_t ldc) {
  for (int64_t j = 0; j < n; j += kCols) {
    const int64_t cols = std::min(kCols, n - j);
    const int vectors = int((cols + 15) / 16);
    for (int64_t i = 0; i < m; i += kRows) {
      const int rows = int(std::min<int64_t>(kRows, m - i));
      kTiles[vectors - 1][rows - 1](cols, k_pairs, alpha, a + i * lda, lda, b + 2 * j, ldb, beta, c + i * ldc + j, ldc);
    }
  }
}

void portable_gemm(int64_t m, int64_t n, int64_t k_pairs, float alpha, const bf16* a, int64_t lda, const bf16* b,
                   int64_t ldb, float beta, float* c, int64_t ldc) {
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      float sum = 0;  // bf16 x bf16 products are exact in f32, as in the AVX512-BF16 dot product
      for (int64_t p = 0; p < 2 * k_pairs; ++p) sum += bf16_to_f32(a[i * lda + p]) * bf16_to_f32(b[2 * ((p / 2) * ldb + j) + p % 2]);
      float& out = c[i * ldc + j];
      out = alpha * sum + (beta != 0.0f ? out : 0.0f);
    }
}

// c's block (rows x cols of a 16 x 16 tile in `tile`) = alpha * tile + beta * c.
CPDIT_TARGET_AVX512 void store_block(const float* tile, int64_t rows, int64_t cols, float alpha, float beta, float* c,
                                     int64_t ldc) {
  const __mmask16 mask = lanes(cols);
  const __m512 scale = _mm512_set1_ps(alpha);
  for (int64_t r = 0; r < rows; ++r) {
    __m512 v = _mm512_mul_ps(_mm512_loadu_ps(tile + 16 * r), scale);
    if (beta != 0.0f) v = _mm512_add_ps(v, _mm512_maskz_loadu_ps(mask, c + r * ldc));
    _mm512_mask_storeu_ps(c + r * ldc, mask, v);
  }
}

// A 32 x 32 block of c that lies wholly inside it, with alpha 1, lives in the tiles: loaded from c
// (beta 1) or zeroed, accumulated, stored back, with no pass of its own. Other blocks go through a
// buffer and store_block.
CPDIT_TARGET_AMX void amx_gemm(int64_t m, int64_t n, int64_t k_pairs, float alpha, const bf16* a, int64_t lda,
                               const bf16* b, int64_t ldb, float beta, float* c, int64_t ldc) {
  amx::configure_tiles();
  alignas(64) float tile[4][16 * 16];
  const int64_t a_stride = lda * int64_t(sizeof(bf16)), b_stride = 2 * ldb * int64_t(sizeof(bf16));  // bytes
  const int64_t c_stride = ldc * int64_t(sizeof(float));
  for (int64_t j = 0; j < n; j += 32)
    for (int64_t i = 0; i < m; i += 32) {
      float* block = c + i * ldc + j;
      const bool in_place = alpha == 1.0f && i + 32 <= m && j + 32 <= n;
      if (in_place && beta != 0.0f) {
        _tile_loadd(0, block, c_stride);
        _tile_loadd(1, block + 16, c_stride);
        _tile_loadd(2, block + 16 * ldc, c_stride);
        _tile_loadd(3, block + 16 * ldc + 16, c_stride);
      } else {
        _tile_zero(0);
        _tile_zero(1);
        _tile_zero(2);
        _tile_zero(3);
      }
      for (int64_t p = 0; p < k_pairs; p += kPairBlock) {
        _tile_loadd(4, a + i * lda + 2 * p, a_stride);
        _tile_loadd(5, a + (i + 16) * lda + 2 * p, a_stride);
        _tile_loadd(6, b + 2 * (p * ldb + j), b_stride);
        _tile_loadd(7, b + 2 * (p * ldb + j + 16), b_stride);
        _tile_dpbf16ps(0, 4, 6);
        _tile_dpbf16ps(1, 4, 7);
        _tile_dpbf16ps(2, 5, 6);
        _tile_dpbf16ps(3, 5, 7);
      }
      if (in_place) {
        _tile_stored(0, block, c_stride);
        _tile_stored(1, block + 16, c_stride);
        _tile_stored(2, block + 16 * ldc, c_stride);
        _tile_stored(3, block + 16 * ldc + 16, c_stride);
        continue;
      }
      _tile_stored(0, tile[0], 64);
      _tile_stored(1, tile[1], 64);
      _tile_stored(2, tile[2], 64);
      _tile_stored(3, tile[3], 64);
      for (int t = 0; t < 4; ++t) {
        const int64_t r0 = i + 16 * (t / 2), c0 = j + 16 * (t % 2);
        if (r0 < m && c0 < n)
          store_block(tile[t], std::min<int64_t>(16, m - r0), std::min<int64_t>(16, n - c0), alpha, beta,
                      c + r0 * ldc + c0, ldc);
      }
    }
  amx::release_tiles();
}

CPDIT_TARGET_AVX512_BF16 void round_row_avx512(const float* s, int64_t k, bf16* d) {
  int64_t j = 0;
  for (; j + 16 <= k; j += 16)
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(d + j), (__m256i)_mm512_cvtneps_pbh(_mm512_loadu_ps(s + j)));
  for (; j < k; ++j) d[j] = f32_to_bf16(s[j]);
}

// 16 pairs from two rows: pair j is (even[j], odd[j]), the even row's value in the low half.
CPDIT_TARGET_AVX512_BF16 __m512i pairs_of(__m512 even, __m512 odd) {
  const __m512i lo = _mm512_cvtepu16_epi32((__m256i)_mm512_cvtneps_pbh(even));
  const __m512i hi = _mm512_cvtepu16_epi32((__m256i)_mm512_cvtneps_pbh(odd));
  return _mm512_or_si512(lo, _mm512_slli_epi32(hi, 16));
}

// Blocks of 16 rows x 16 pairs: each row's 32 values rounded in order are its 16 pairs (32-bit
// lanes), and a 16 x 16 transpose of those lanes makes them 16 rows of pairs. Rows past n and
// values past k read as zeros.
CPDIT_TARGET_AVX512_BF16 void pack_transposed_avx512(const float* src, int64_t ld_src, int64_t n, int64_t k,
                                                     bf16* dst, int64_t ld_dst) {
  const int64_t k_pairs = (k + 1) / 2;
  for (int64_t j0 = 0; j0 < n; j0 += 16) {
    const int64_t rows = std::min<int64_t>(16, n - j0);
    for (int64_t p0 = 0; p0 < k_pairs; p0 += 16) {
      const __mmask16 first = lanes(k - 2 * p0), second = lanes(k - 2 * p0 - 16);
      __m512i r[16];
      for (int64_t i = 0; i < 16; ++i) r[i] = _mm512_setzero_si512();
      for (int64_t i = 0; i < rows; ++i) {
        const float* row = src + (j0 + i) * ld_src + 2 * p0;
        r[i] = (__m512i)_mm512_cvtne2ps_pbh(_mm512_maskz_loadu_ps(second, row + 16), _mm512_maskz_loadu_ps(first, row));
      }
      transpose16(r);
      for (int64_t p = 0; p < std::min<int64_t>(16, k_pairs - p0); ++p)
        _mm512_mask_storeu_epi32(dst + 2 * ((p0 + p) * ld_dst + j0), lanes(rows), r[p]);
    }
  }
}

CPDIT_TARGET_AVX512_BF16 void pack_rows_avx512(const float* src, int64_t ld_src, int64_t k, int64_t n, bf16* dst,
                                               int64_t ld_dst) {
  for (int64_t p = 0; p < (k + 1) / 2; ++p) {
    const float* even = src + 2 * p * ld_src;
    const bool has_odd = 2 * p + 1 < k;
    for (int64_t j = 0; j < n; j += 16) {
      const __mmask16 mask = lanes(n - j);
      const __m512 odd = has_odd ? _mm512_maskz_loadu_ps(mask, even + ld_src + j) : _mm512_setzero_ps();
      _mm512_mask_storeu_epi32(dst + 2 * (p * ld_dst + j), mask, pairs_of(_mm512_maskz_loadu_ps(mask, even + j), odd));
    }
  }
}

}  // namespace

void round_rows(const float* src, int64_t ld_src, int64_t rows, int64_t k, bf16* dst, int64_t ld_dst) {
  const bool bf16_dots = kernel_isa() >= Isa::avx512_bf16;
  for (int64_t r = 0; r < rows; ++r) {
    const float* s = src + r * ld_src;
    bf16* d = dst + r * ld_dst;
    if (bf16_dots)
      round_row_avx512(s, k, d);
    else
      for (int64_t j = 0; j < k; ++j) d[j] = f32_to_bf16(s[j]);
    std::fill(d + k, d + ld_dst, bf16{0});
  }
}

void pack_transposed(const float* src, int64_t ld_src, int64_t n, int64_t k, bf16* dst, int64_t ld_dst) {
  if (kernel_isa() >= Isa::avx512_bf16) return pack_transposed_avx512(src, ld_src, n, k, dst, ld_dst);
  for (int64_t j = 0; j < n; ++j) {
    const float* row = src + j * ld_src;
    for (int64_t e = 0; e < 2 * ((k + 1) / 2); ++e)
      dst[2 * ((e / 2) * ld_dst + j) + e % 2] = e < k ? f32_to_bf16(row[e]) : bf16{0};
  }
}

void pack_rows(const float* src, int64_t ld_src, int64_t k, int64_t n, bf16* dst, int64_t ld_dst) {
  if (kernel_isa() >= Isa::avx512_bf16) return pack_rows_avx512(src, ld_src, k, n, dst, ld_dst);
  for (int64_t p = 0; p < (k + 1) / 2; ++p) {
    const float* even = src + 2 * p * ld_src;
    const float* odd = 2 * p + 1 < k ? even + ld_src : nullptr;
    bf16* d = dst + 2 * p * ld_dst;
    for (int64_t j = 0; j < n; ++j) {
      d[2 * j] = f32_to_bf16(even[j]);
      d[2 * j + 1] = odd ? f32_to_bf16(odd[j]) : bf16{0};
    }
  }
}

void gemm(int64_t m, int64_t n, int64_t k_pairs, float alpha, const bf16* a, int64_t lda, const bf16* b,
          int64_t ldb, float beta, float* c, int64_t ldc) {
  if (kernel_isa() < Isa::avx512_bf16) return portable_gemm(m, n, k_pairs, alpha, a, lda, b, ldb, beta, c, ldc);
  if (amx::granted()) return amx_gemm(m, n, k_pairs, alpha, a, lda, b, ldb, beta, c, ldc);
  avx512_gemm(m, n, k_pairs, alpha, a, lda, b, ldb, beta, c, ldc);
}

}  // namespace cpdit::kernels::bf16_pairs

#pragma GCC diagnostic pop
