// Linear over Q8_0 / Q4_0 weights on AMX-INT8 tiles: y = x W^T + beta * y, x's 32-value blocks
// quantised to int8 as int8_blocks.hpp says, each block's integer dot products by TDPBSSD (signed x
// signed bytes into int32), then scaled by dx * dw into f32 accumulators.
//
// A Q8_0 weight is the left operand as it is mapped: the 32 codes of one block in 16 rows are a
// tile of 16 rows x 32 bytes, rows a weight row apart, read past the f16 scale at each block's start.
// Blocks carry their own scales, so a tile product spans one block (K = 32, not the 64 a tile row
// could hold): per block, two weight tiles and two activation tiles feed four int32 tiles (32
// features x 32 tokens), which are stored and scaled into f32 accumulators in L1 while the tile unit
// computes the next block. Q4_0 weights, and the zero-padded last run of a weight whose n is not a
// multiple of 32, are unpacked into a per-thread buffer of int8 codes first (a run of 128 rows).
// The activations, the right operand, are quantised once per call into AMX's layout (each tile row:
// four consecutive codes of 16 tokens side by side). The accumulators hold y transposed (features x
// tokens), transposed back on the way out. Runs of 128 features x 128 tokens are the threads' work
// items, as in linear_amx.cpp.
#include "kernels/cpu/amx_tiles.hpp"
#include "kernels/cpu/int8_blocks.hpp"
#include "kernels/cpu/linear_args.hpp"
#include "kernels/cpu/tile_rows.hpp"

#include <cpdit/core/block_format.hpp>
#include <cpdit/core/threads.hpp>

#include <algorithm>
#include <cstring>
#include <vector>

namespace cpdit::kernels::detail {

namespace amx_int8 {  // named: linear_amx.cpp's kernel has parts of the same names (unity builds)
namespace {

using int8_blocks::kValues;
constexpr int64_t kBlock = 32;                 // features and tokens of one accumulator block (2 x 2 tiles)
constexpr int64_t kTileBytes = 16 * kValues;   // one activation tile: 8 rows x 16 tokens x 4 codes
constexpr int64_t kFeatureRun = 128;           // weight rows whose blocks stay in cache for a run of tokens
constexpr int64_t kTokenRun = 128;

using tile_rows::lanes;
using tile_rows::round_up;
using tile_rows::transpose16;

// The activations as right-operand tiles, per 16 tokens ("a half", two to a block) and per k block:
// 512 bytes of codes and 16 scales. Tokens past m are zeros with scale 0.
struct Activations {
  std::vector<int8_t> codes;
  std::vector<float> scales;
  int64_t blocks = 0;  // k blocks
  const int8_t* tile(int64_t half, int64_t b) const { return codes.data() + (half * blocks + b) * kTileBytes; }
  const float* scale(int64_t half, int64_t b) const { return scales.data() + (half * blocks + b) * 16; }
};

CPDIT_TARGET_AMX_INT8 void pack_activations(const float* x, int64_t m, int64_t k, Activations& a) {
  a.blocks = k / kValues;
  const int64_t halves = round_up(m, kBlock) / 16;
  a.codes.assign(size_t(halves * a.blocks * kTileBytes), 0);
  a.scales.assign(size_t(halves * a.blocks * 16), 0.0f);
#pragma omp parallel for num_threads(compute_threads()) if (m * k >= kParallelMin)
  for (int64_t t = 0; t < m; ++t)
    for (int64_t b = 0; b < a.blocks; ++b) {
      int8_t codes[kValues];
      const int64_t half = t / 16, lane = t % 16;
      a.scales[size_t((half * a.blocks + b) * 16 + lane)] = int8_blocks::quantise(x + t * k + b * kValues, codes);
      int8_t* tile = a.codes.data() + (half * a.blocks + b) * kTileBytes;
      for (int g = 0; g < kValues / 4; ++g) std::memcpy(tile + g * 64 + lane * 4, codes + 4 * g, 4);
    }
}

// The weight rows [first, first + kFeatureRun) as the kernel reads them: codes of block b of row r at
// codes + r * stride + b * block_step, and the scales as (blocks, kFeatureRun) floats. Rows past n
// have codes 0 and scale 0.
struct WeightRun {
  const int8_t* codes;
  int64_t stride, block_step;
  const float* scales;
};

WeightRun weight_run(const LinearArgs& a, int64_t first, int64_t rows) {
  const std::string format = a.blocks.format();
  const int8_blocks::BlockCodes decode = int8_blocks::codes_of(format);
  const int64_t block_bytes = find_block_format(format)->block_bytes, blocks = a.k / kValues;
  const auto* mapped = static_cast<const uint8_t*>(a.blocks.codes().raw());
  const int64_t row_stride = a.blocks.codes().strides()[0];  // a narrowed weight's rows keep the file's stride
  const bool in_place = format == "Q8_0" && first + rows <= a.n;
  thread_local std::vector<float> scales;
  thread_local std::vector<int8_t> unpacked;
  scales.assign(size_t(blocks * kFeatureRun), 0.0f);
  if (!in_place) unpacked.assign(size_t(rows * a.k), 0);
  for (int64_t r = 0; r < std::min(rows, a.n - first); ++r) {
    const uint8_t* row = mapped + (first + r) * row_stride;
    for (int64_t b = 0; b < blocks; ++b) {
      if (in_place) scales[size_t(b * kFeatureRun + r)] = int8_blocks::half_at(row + b * block_bytes);
      else scales[size_t(b * kFeatureRun + r)] = decode(row + b * block_bytes, unpacked.data() + r * a.k + b * kValues);
    }
  }
  if (in_place) return {reinterpret_cast<const int8_t*>(mapped + first * row_stride + 2), row_stride, block_bytes, scales.data()};
  return {unpacked.data(), a.k, kValues, scales.data()};
}

// acc (tile t: features half t / 2 x tokens half t % 2, 16 x 16) += the int32 sums of block b, each
// scaled by its weight row's and its token's scale.
CPDIT_TARGET_AMX_INT8 void scale_into(float acc[4][256], const int32_t sums[4][256], const float* dw,
                                      const float* dx0, const float* dx1) {
  for (int t = 0; t < 4; ++t) {
    const __m512 dx = _mm512_loadu_ps(t % 2 ? dx1 : dx0);
    const float* d = dw + 16 * (t / 2);
    for (int r = 0; r < 16; ++r) {
      const __m512 s = _mm512_mul_ps(_mm512_set1_ps(d[r]), dx);
      const __m512 sum = _mm512_cvtepi32_ps(_mm512_load_si512(sums[t] + 16 * r));
      _mm512_store_ps(acc[t] + 16 * r, _mm512_fmadd_ps(sum, s, _mm512_load_ps(acc[t] + 16 * r)));
    }
  }
}

// acc = 32 weight rows (from w.codes + feature * w.stride, scales from column `feature` of the run) x
// the 32 tokens of halves h, h + 1, over every k block.
CPDIT_TARGET_AMX_INT8 void multiply_block(const WeightRun& w, int64_t feature, const Activations& x, int64_t h,
                                          float acc[4][256]) {
  alignas(64) int32_t sums[2][4][256];  // two blocks' sums: one scaled while the tiles compute the next
  std::memset(acc, 0, 4 * 256 * sizeof(float));
  const int8_t* rows = w.codes + feature * w.stride;
  const float* dw = w.scales + feature;
  for (int64_t b = 0; b < x.blocks; ++b) {
    if (b + 1 < x.blocks) {  // tile loads stall on cache misses: fetch the next block while this one runs
      const char* next = reinterpret_cast<const char*>(rows + (b + 1) * w.block_step);
      for (int r = 0; r < 32; ++r) {
        _mm_prefetch(next + r * w.stride, _MM_HINT_T0);
        _mm_prefetch(next + r * w.stride + kValues - 1, _MM_HINT_T0);  // a block may straddle two lines
      }
      for (int64_t half = h; half < h + 2; ++half)
        for (int line = 0; line < kTileBytes; line += 64)
          _mm_prefetch(reinterpret_cast<const char*>(x.tile(half, b + 1)) + line, _MM_HINT_T0);
    }
    _tile_zero(0);
    _tile_zero(1);
    _tile_zero(2);
    _tile_zero(3);
    _tile_loadd(4, rows + b * w.block_step, w.stride);
    _tile_loadd(5, rows + 16 * w.stride + b * w.block_step, w.stride);
    _tile_loadd(6, x.tile(h, b), 64);
    _tile_loadd(7, x.tile(h + 1, b), 64);
    _tile_dpbssd(0, 4, 6);
    _tile_dpbssd(1, 4, 7);
    _tile_dpbssd(2, 5, 6);
    _tile_dpbssd(3, 5, 7);
    if (b > 0) scale_into(acc, sums[(b - 1) % 2], dw + (b - 1) * kFeatureRun, x.scale(h, b - 1), x.scale(h + 1, b - 1));
    int32_t(*s)[256] = sums[b % 2];
    _tile_stored(0, s[0], 64);
    _tile_stored(1, s[1], 64);
    _tile_stored(2, s[2], 64);
    _tile_stored(3, s[3], 64);
  }
  const int64_t last = x.blocks - 1;
  scale_into(acc, sums[last % 2], dw + last * kFeatureRun, x.scale(h, last), x.scale(h + 1, last));
}

// y rows [token, token + 32) x columns [feature, feature + 32) = acc transposed + beta * y.
CPDIT_TARGET_AMX_INT8 void store_block(const float acc[4][256], int64_t token, int64_t feature, int64_t m, int64_t n,
                                       float beta, float* y) {
  for (int t = 0; t < 4; ++t) {
    const int64_t f0 = feature + 16 * (t / 2), t0 = token + 16 * (t % 2);
    if (f0 >= n || t0 >= m) continue;
    __m512i rows[16];
    for (int r = 0; r < 16; ++r) rows[r] = _mm512_load_si512(acc[t] + 16 * r);
    transpose16(rows);  // rows[c]: token t0 + c, features f0 .. f0 + 15
    const __mmask16 mask = lanes(n - f0);
    for (int64_t c = 0; c < std::min<int64_t>(16, m - t0); ++c) {
      float* out = y + (t0 + c) * n + f0;
      __m512 v = _mm512_castsi512_ps(rows[c]);
      if (beta != 0) v = _mm512_fmadd_ps(_mm512_set1_ps(beta), _mm512_maskz_loadu_ps(mask, out), v);
      _mm512_mask_storeu_ps(out, mask, v);
    }
  }
}

}  // namespace
}  // namespace amx_int8

void amx_int8_linear(const LinearArgs& a, float beta, float* y) {
  using namespace amx_int8;
  if (a.m == 0 || a.n == 0) return;
  thread_local Activations mine;
  const Activations& x = mine;  // the team reads the caller's buffers, not their own thread_local ones
  pack_activations(a.x.data<float>(), a.m, a.k, mine);
  const int64_t features = round_up(a.n, kBlock), tokens = round_up(a.m, kBlock);
#pragma omp parallel num_threads(compute_threads())
  {
    amx::configure_int8_tiles();
    alignas(64) float acc[4][256];
#pragma omp for schedule(dynamic)
    for (int64_t f_run = 0; f_run < features; f_run += kFeatureRun) {
      const WeightRun w = weight_run(a, f_run, std::min(kFeatureRun, features - f_run));
      // Features innermost, as in linear_amx.cpp: consecutive blocks write neighbouring lines of y.
      for (int64_t t = 0; t < tokens; t += kBlock)
        for (int64_t f = f_run; f < std::min(features, f_run + kFeatureRun); f += kBlock) {
          multiply_block(w, f - f_run, x, t / 16, acc);
          store_block(acc, t, f, a.m, a.n, beta, y);
        }
    }
    amx::release_tiles();
  }
}

}  // namespace cpdit::kernels::detail
