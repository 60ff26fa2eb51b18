// The flash tiles' f32 products (tile_gemm.hpp): an AVX-512 kernel compiled for it in every build,
// picked per call by kernel_isa(), else oneDNN's sgemm.
#include "kernels/cpu/tile_gemm.hpp"

#include "kernels/cpu/isa_target.hpp"

#include <cpdit/core/error.hpp>
#include <cpdit/kernels/cpu.hpp>

#include <algorithm>
#include <limits>

// g++ 12 reports its own _mm512_undefined_* placeholders as (maybe-)uninitialised (GCC bug 105593).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#include <immintrin.h>

namespace cpdit::kernels::tile_gemm {
namespace {

constexpr int kBlockRows = 6;     // rows of C per block: 6 x 4 accumulators + 4 B vectors + 1 A broadcast
constexpr int kBlockVectors = 4;  // 16-float vectors of C per block row
// Inner-dimension chunk: a 128 x 64 panel of B (32 KiB) stays in L1 while every row block uses it;
// a longer panel (P V's 256 keys) would stream from L2 once per row block.
constexpr int64_t kChunk = 128;

// C block (MR x 16 NV, the last vector masked by `last`) over the whole inner dimension k.
template <int MR, int NV>
CPDIT_TARGET_AVX512 void register_block(int64_t k, float alpha, const float* a, int64_t a_row, int64_t a_col, const float* b, int64_t ldb,
           __mmask16 last, bool accumulate, const float* c_scale, float* col_max, float* c, int64_t ldc) {
  __m512 acc[MR][NV];
#pragma GCC unroll 8
  for (int i = 0; i < MR; ++i)
#pragma GCC unroll 4
    for (int j = 0; j < NV; ++j) acc[i][j] = _mm512_setzero_ps();
  for (int64_t p = 0; p < k; ++p) {
    const float* bp = b + p * ldb;
    const float* ap = a + p * a_col;
    __m512 bv[NV];
#pragma GCC unroll 4
    for (int j = 0; j < NV; ++j)
      bv[j] = j + 1 < NV ? _mm512_loadu_ps(bp + 16 * j) : _mm512_maskz_loadu_ps(last, bp + 16 * j);
#pragma GCC unroll 8
    for (int i = 0; i < MR; ++i) {
      const __m512 x = _mm512_set1_ps(ap[i * a_row]);
#pragma GCC unroll 4
      for (int j = 0; j < NV; ++j) acc[i][j] = _mm512_fmadd_ps(x, bv[j], acc[i][j]);
    }
  }
  const __m512 s = _mm512_set1_ps(alpha);
  __m512 scale[NV];
#pragma GCC unroll 4
  for (int j = 0; j < NV; ++j)
    scale[j] = !c_scale ? _mm512_set1_ps(1.0f)  // C + v exactly: fma rounds once
                        : _mm512_maskz_loadu_ps(j + 1 < NV ? __mmask16(0xffff) : last, c_scale + 16 * j);
  __m512 top[NV];
#pragma GCC unroll 4
  for (int j = 0; j < NV; ++j) top[j] = _mm512_set1_ps(-std::numeric_limits<float>::infinity());
#pragma GCC unroll 8
  for (int i = 0; i < MR; ++i)
#pragma GCC unroll 4
    for (int j = 0; j < NV; ++j) {
      float* cp = c + i * ldc + 16 * j;
      const __mmask16 mask = j + 1 < NV ? __mmask16(0xffff) : last;
      __m512 v = _mm512_mul_ps(acc[i][j], s);
      if (accumulate) v = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(mask, cp), scale[j], v);
      _mm512_mask_storeu_ps(cp, mask, v);
      if (col_max) top[j] = _mm512_max_ps(top[j], v);
    }
  if (!col_max) return;
#pragma GCC unroll 4
  for (int j = 0; j < NV; ++j) {
    const __mmask16 mask = j + 1 < NV ? __mmask16(0xffff) : last;
    float* mp = col_max + 16 * j;
    _mm512_mask_storeu_ps(mp, mask, _mm512_max_ps(_mm512_maskz_loadu_ps(mask, mp), top[j]));
  }
}

template <int NV>
CPDIT_TARGET_AVX512 void register_blocks(int64_t rows, int64_t k, float alpha, const float* a, int64_t a_row, int64_t a_col, const float* b,
                int64_t ldb, __mmask16 last, bool accumulate, const float* c_scale, float* col_max, float* c,
                int64_t ldc) {
  switch (rows) {
    case 6: return register_block<6, NV>(k, alpha, a, a_row, a_col, b, ldb, last, accumulate, c_scale, col_max, c, ldc);
    case 5: return register_block<5, NV>(k, alpha, a, a_row, a_col, b, ldb, last, accumulate, c_scale, col_max, c, ldc);
    case 4: return register_block<4, NV>(k, alpha, a, a_row, a_col, b, ldb, last, accumulate, c_scale, col_max, c, ldc);
    case 3: return register_block<3, NV>(k, alpha, a, a_row, a_col, b, ldb, last, accumulate, c_scale, col_max, c, ldc);
    case 2: return register_block<2, NV>(k, alpha, a, a_row, a_col, b, ldb, last, accumulate, c_scale, col_max, c, ldc);
    default: return register_block<1, NV>(k, alpha, a, a_row, a_col, b, ldb, last, accumulate, c_scale, col_max, c, ldc);
  }
}

CPDIT_TARGET_AVX512 void multiply_avx512(int64_t m, int64_t n, int64_t k, float alpha, Strided a, const float* b,
                                        int64_t ldb, bool accumulate, float* c, int64_t ldc, Ahead ahead,
                                        const float* c_scale, float* col_max) {
  const int64_t blocks = ((m + kBlockRows - 1) / kBlockRows) * ((n + 16 * kBlockVectors - 1) / (16 * kBlockVectors)) *
                        ((k + kChunk - 1) / kChunk);
  const int64_t ahead_per_block = blocks > 0 ? (ahead.rows + blocks - 1) / blocks : 0;
  int64_t ahead_row = 0;
  // Column blocks outside: one chunk x 64 panel of B is reused by every row block while it sits in L1.
  for (int64_t p0 = 0; p0 < k; p0 += kChunk)
  for (int64_t j0 = 0; j0 < n; j0 += 16 * kBlockVectors) {
    const int64_t width = std::min<int64_t>(16 * kBlockVectors, n - j0);
    const int vectors = int((width + 15) / 16);
    const int64_t tail = width - 16 * (vectors - 1);
    const __mmask16 last = tail == 16 ? __mmask16(0xffff) : __mmask16((1u << tail) - 1);
    for (int64_t i0 = 0; i0 < m; i0 += kBlockRows) {
      const int64_t rows = std::min<int64_t>(kBlockRows, m - i0);
      for (const int64_t end = std::min(ahead.rows, ahead_row + ahead_per_block); ahead_row < end; ++ahead_row)
        for (int64_t e = 0; e < ahead.width; e += 16) _mm_prefetch(ahead.data + ahead_row * ahead.ld + e, _MM_HINT_T1);
      const int64_t depth = std::min(kChunk, k - p0);
      const float* ai = a.data + i0 * a.row + p0 * a.col;
      const float* bj = b + p0 * ldb + j0;
      float* ci = c + i0 * ldc + j0;
      const bool add = accumulate || p0 > 0;  // later chunks add to what the earlier ones wrote
      const float* cs = c_scale && p0 == 0 ? c_scale + j0 : nullptr;  // C as the caller gave it, scaled once
      float* top = col_max && p0 + kChunk >= k ? col_max + j0 : nullptr;  // C's final values
      switch (vectors) {
        case 4: register_blocks<4>(rows, depth, alpha, ai, a.row, a.col, bj, ldb, last, add, cs, top, ci, ldc); break;
        case 3: register_blocks<3>(rows, depth, alpha, ai, a.row, a.col, bj, ldb, last, add, cs, top, ci, ldc); break;
        case 2: register_blocks<2>(rows, depth, alpha, ai, a.row, a.col, bj, ldb, last, add, cs, top, ci, ldc); break;
        default: register_blocks<1>(rows, depth, alpha, ai, a.row, a.col, bj, ldb, last, add, cs, top, ci, ldc); break;
      }
    }
  }
}

// One 16 x 16 block (rows x cols of it valid) through registers: rows in, three rounds of
// interleaving (pairs of floats, of doubles, then 128-bit lanes twice), columns out.
CPDIT_TARGET_AVX512 void transpose_block(const float* src, int64_t ld_src, int rows, int cols, float* dst,
                                         int64_t ld_dst) {
  const __mmask16 col_mask = cols == 16 ? __mmask16(0xffff) : __mmask16((1u << cols) - 1);
  const __mmask16 row_mask = rows == 16 ? __mmask16(0xffff) : __mmask16((1u << rows) - 1);
  __m512 r[16], t[16];
  for (int i = 0; i < 16; ++i) r[i] = i < rows ? _mm512_maskz_loadu_ps(col_mask, src + i * ld_src) : _mm512_setzero_ps();
  for (int i = 0; i < 16; i += 2) {  // t[i]: r[i], r[i+1] interleaved by float within each 128-bit lane
    t[i] = _mm512_unpacklo_ps(r[i], r[i + 1]);
    t[i + 1] = _mm512_unpackhi_ps(r[i], r[i + 1]);
  }
  for (int i = 0; i < 16; i += 4)  // 4 rows' floats j of each lane together, as doubles
    for (int j = 0; j < 2; ++j) {
      const __m512d a = _mm512_castps_pd(t[i + j]), b = _mm512_castps_pd(t[i + j + 2]);
      r[i + 2 * j] = _mm512_castpd_ps(_mm512_unpacklo_pd(a, b));
      r[i + 2 * j + 1] = _mm512_castpd_ps(_mm512_unpackhi_pd(a, b));
    }
  // r[4g + j] now holds, per 128-bit lane L, column 4L + j of rows 4g..4g+3. Gather the four lanes of
  // one column from the four groups.
  for (int j = 0; j < 4; ++j) {
    const __m512 lo01 = _mm512_shuffle_f32x4(r[j], r[4 + j], 0x44), hi01 = _mm512_shuffle_f32x4(r[j], r[4 + j], 0xee);
    const __m512 lo23 = _mm512_shuffle_f32x4(r[8 + j], r[12 + j], 0x44),
                 hi23 = _mm512_shuffle_f32x4(r[8 + j], r[12 + j], 0xee);
    t[j] = _mm512_shuffle_f32x4(lo01, lo23, 0x88);       // column j (lane 0 of each group)
    t[4 + j] = _mm512_shuffle_f32x4(lo01, lo23, 0xdd);   // column 4 + j
    t[8 + j] = _mm512_shuffle_f32x4(hi01, hi23, 0x88);   // column 8 + j
    t[12 + j] = _mm512_shuffle_f32x4(hi01, hi23, 0xdd);  // column 12 + j
  }
  for (int c = 0; c < cols; ++c) _mm512_mask_storeu_ps(dst + c * ld_dst, row_mask, t[c]);
}

CPDIT_TARGET_AVX512 void transpose_avx512(const float* src, int64_t ld_src, int64_t rows, int64_t cols, float* dst,
                                          int64_t ld_dst) {
  for (int64_t r0 = 0; r0 < rows; r0 += 16)
    for (int64_t c0 = 0; c0 < cols; c0 += 16)
      transpose_block(src + r0 * ld_src + c0, ld_src, int(std::min<int64_t>(16, rows - r0)),
                      int(std::min<int64_t>(16, cols - c0)), dst + c0 * ld_dst + r0, ld_dst);
}

}  // namespace

void multiply(int64_t m, int64_t n, int64_t k, float alpha, Strided a, const float* b, int64_t ldb,
              bool accumulate, float* c, int64_t ldc, Ahead ahead, const float* c_scale, float* col_max) {
  if (kernel_isa() >= Isa::avx512)
    return multiply_avx512(m, n, k, alpha, a, b, ldb, accumulate, c, ldc, ahead, c_scale, col_max);
  CPDIT_CHECK(a.row == 1 || a.col == 1, internal, "tile_gemm: A needs a unit stride");
  if (accumulate && c_scale)
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) c[i * ldc + j] *= c_scale[j];
  const bool trans_a = a.col != 1;
  gemm(trans_a, false, m, n, k, alpha, a.data, trans_a ? a.col : a.row, b, ldb, accumulate ? 1.0f : 0.0f, c, ldc);
  if (col_max)
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) col_max[j] = std::max(col_max[j], c[i * ldc + j]);
}

void transpose(const float* src, int64_t ld_src, int64_t rows, int64_t cols, float* dst, int64_t ld_dst) {
  if (kernel_isa() >= Isa::avx512) return transpose_avx512(src, ld_src, rows, cols, dst, ld_dst);
  // 16 x 16 blocks keep both the reads and the writes within a few cache lines at a time.
  for (int64_t r0 = 0; r0 < rows; r0 += 16)
    for (int64_t c0 = 0; c0 < cols; c0 += 16)
      for (int64_t c = c0; c < std::min(c0 + 16, cols); ++c)
        for (int64_t r = r0; r < std::min(r0 + 16, rows); ++r) dst[c * ld_dst + r] = src[r * ld_src + c];
}

}  // namespace cpdit::kernels::tile_gemm

#pragma GCC diagnostic pop
