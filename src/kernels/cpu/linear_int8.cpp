// Linear over Q8_0 / Q4_0 weights by AVX512-VNNI int8 dot products, used under MatmulPrecision::bf16
// (where a Linear may round its activations) on CPUs without AMX. Each activation row is quantised per 32-block as int8_blocks.hpp says,
// so a block of y = x W^T is dx * dw * (integer dot product of 32 codes), accumulated in f32.
//
// vpdpbusd multiplies unsigned by signed bytes. The weights are repacked as unsigned, code + 128
// (exact: codes are in [-128, 127]); the extra 128 * sum(activation codes) of each block is taken off
// by starting that block's int32 sum at -128 * sum, computed once per activation block.
//
// Layout: a panel of 32 weight rows (output columns) is repacked, per 32-block, as 8 groups of 4
// consecutive values for each of the 32 rows (the operand order of vpdpbusd: one 32-bit lane holds 4
// values of one row), with the rows' 32 scales beside; the kernel multiplies up to 6 activation rows
// by a panel at a time, 12 int32 and 12 f32 accumulators in registers.
#include "kernels/cpu/int8_blocks.hpp"
#include "kernels/cpu/linear_args.hpp"
#include "kernels/cpu/tile_rows.hpp"

#include <cpdit/core/block_format.hpp>
#include <cpdit/core/threads.hpp>

#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

namespace cpdit::kernels::detail {

namespace {

using int8_blocks::kValues;
constexpr int64_t kPanel = 32;      // weight rows per repacked panel (two 16-lane vectors)
constexpr int64_t kKernelRows = 6;  // activation rows per kernel call

// The activations, quantised: codes (m, k) int8, and per (row, block) the scale and the int32 start
// of the block's sum (-128 times the sum of its codes).
struct QuantisedRows {
  std::vector<int8_t> codes;
  std::vector<float> scale;
  std::vector<int32_t> start;
};

void quantise_row(const float* x, int64_t k, int8_t* codes, float* scale, int32_t* start) {
  for (int64_t b = 0; b < k / kValues; ++b) {
    scale[b] = int8_blocks::quantise(x + b * kValues, codes + b * kValues);
    int32_t sum = 0;
    for (int j = 0; j < kValues; ++j) sum += codes[b * kValues + j];
    start[b] = -128 * sum;
  }
}

// Rows [n0, n0 + kPanel) of the weight (zeros past n), repacked as the file comment says: per block,
// 8 x 32 x 4 bytes of codes, then nothing else; scales (blocks, 32) apart. Each half of the panel (16
// rows) is read two blocks at a time, one 64-byte register a row, and transposed in registers: row i's
// 4-byte group j becomes lane i of register j, the operand vpdpbusd takes.
template <class Codes>
CPDIT_TARGET_AVX512_VNNI void repack_panel(const LinearArgs& a, int64_t block_bytes, int64_t n0, uint8_t* packed,
                                           float* scales) {
  const auto* blocks = static_cast<const uint8_t*>(a.blocks.codes().raw());
  const int64_t row_stride = a.blocks.codes().strides()[0];
  const int64_t n_blocks = a.k / kValues, rows = std::min(kPanel, a.n - n0);
  const __m512i plus_128 = _mm512_set1_epi8(char(0x80));  // code + 128 (code ^ 0x80), exact in [-128, 127]
  for (int64_t half = 0; half < 2; ++half)
    for (int64_t b = 0; b < n_blocks; b += 2) {
      const bool pair = b + 1 < n_blocks;
      __m512i r[16];
      for (int64_t i = 0; i < 16; ++i) {
        const int64_t c = half * 16 + i;
        if (c >= rows) {
          r[i] = _mm512_setzero_si512();
          continue;
        }
        const uint8_t* block = blocks + (n0 + c) * row_stride + b * block_bytes;
        const __m256i next = pair ? Codes::of(block + block_bytes) : _mm256_setzero_si256();
        r[i] = _mm512_inserti64x4(_mm512_castsi256_si512(Codes::of(block)), next, 1);
      }
      tile_rows::transpose16(r);
      for (int64_t j = 0; j < 8; ++j) {
        const int64_t at = j * kPanel * 4 + half * 64;
        _mm512_storeu_si512(packed + b * kValues * kPanel + at, _mm512_xor_si512(r[j], plus_128));
        if (pair) _mm512_storeu_si512(packed + (b + 1) * kValues * kPanel + at, _mm512_xor_si512(r[8 + j], plus_128));
      }
    }
  for (int64_t c = 0; c < kPanel; ++c)
    for (int64_t b = 0; b < n_blocks; ++b)
      scales[b * kPanel + c] = c < rows ? int8_blocks::half_at(blocks + (n0 + c) * row_stride + b * block_bytes) : 0.0f;
}

// y[r, n0 .. n0 + 32) (masked to `columns`) = the rows' products with the panel, + beta * y.
template <int R>
CPDIT_TARGET_AVX512_VNNI void panel_kernel(const QuantisedRows& q, int64_t row0, int64_t k, const uint8_t* packed,
                             const float* scales, float beta, float* y, int64_t ldy, __mmask16 mask0,
                             __mmask16 mask1) {
  const int64_t n_blocks = k / kValues;
  __m512 acc[R][2];
  for (int r = 0; r < R; ++r) acc[r][0] = acc[r][1] = _mm512_setzero_ps();
  for (int64_t b = 0; b < n_blocks; ++b) {
    __m512i sum[R][2];
    for (int r = 0; r < R; ++r)
      sum[r][0] = sum[r][1] = _mm512_set1_epi32(q.start[size_t((row0 + r) * n_blocks + b)]);
    const uint8_t* w = packed + b * kValues * kPanel;
    for (int g = 0; g < kValues / 4; ++g) {
      const __m512i w0 = _mm512_loadu_si512(w + g * kPanel * 4), w1 = _mm512_loadu_si512(w + g * kPanel * 4 + 64);
      for (int r = 0; r < R; ++r) {
        int32_t four;
        std::memcpy(&four, q.codes.data() + (row0 + r) * k + b * kValues + g * 4, 4);
        const __m512i x = _mm512_set1_epi32(four);
        sum[r][0] = _mm512_dpbusd_epi32(sum[r][0], w0, x);
        sum[r][1] = _mm512_dpbusd_epi32(sum[r][1], w1, x);
      }
    }
    const __m512 d0 = _mm512_loadu_ps(scales + b * kPanel), d1 = _mm512_loadu_ps(scales + b * kPanel + 16);
    for (int r = 0; r < R; ++r) {
      const __m512 dx = _mm512_set1_ps(q.scale[size_t((row0 + r) * n_blocks + b)]);
      acc[r][0] = _mm512_fmadd_ps(_mm512_mul_ps(_mm512_cvtepi32_ps(sum[r][0]), d0), dx, acc[r][0]);
      acc[r][1] = _mm512_fmadd_ps(_mm512_mul_ps(_mm512_cvtepi32_ps(sum[r][1]), d1), dx, acc[r][1]);
    }
  }
  const __m512 keep = _mm512_set1_ps(beta);
  for (int r = 0; r < R; ++r) {
    float* out = y + (row0 + r) * ldy;
    if (beta != 0) {
      acc[r][0] = _mm512_fmadd_ps(keep, _mm512_maskz_loadu_ps(mask0, out), acc[r][0]);
      acc[r][1] = _mm512_fmadd_ps(keep, _mm512_maskz_loadu_ps(mask1, out + 16), acc[r][1]);
    }
    _mm512_mask_storeu_ps(out, mask0, acc[r][0]);
    _mm512_mask_storeu_ps(out + 16, mask1, acc[r][1]);
  }
}

using PanelKernel = void (*)(const QuantisedRows&, int64_t, int64_t, const uint8_t*, const float*, float, float*,
                             int64_t, __mmask16, __mmask16);
constexpr PanelKernel kKernels[kKernelRows + 1] = {nullptr,          panel_kernel<1>, panel_kernel<2>, panel_kernel<3>,
                                            panel_kernel<4>, panel_kernel<5>, panel_kernel<6>};

__mmask16 panel_lanes(int64_t count) { return count >= 16 ? __mmask16(0xFFFF) : __mmask16((1u << std::max<int64_t>(count, 0)) - 1); }

template <class Codes>
void run_vnni(const LinearArgs& a, int64_t block_bytes, float beta, float* y) {
  const int64_t n_blocks = a.k / kValues;
  // The calling thread's buffers, kept between calls (fresh pages are slow here).
  thread_local QuantisedRows mine;
  QuantisedRows& q = mine;  // the team reads the caller's buffers, not their own thread_local ones
  q.codes.resize(size_t(a.m * a.k));
  q.scale.resize(size_t(a.m * n_blocks));
  q.start.resize(size_t(a.m * n_blocks));
  const float* x = a.x.data<float>();
#pragma omp parallel for num_threads(compute_threads()) if (a.m * a.k >= kParallelMin)
  for (int64_t r = 0; r < a.m; ++r)
    quantise_row(x + r * a.k, a.k, q.codes.data() + r * a.k, q.scale.data() + r * n_blocks,
                 q.start.data() + r * n_blocks);

  const int64_t panels = (a.n + kPanel - 1) / kPanel;
#pragma omp parallel for schedule(dynamic) num_threads(compute_threads())
  for (int64_t p = 0; p < panels; ++p) {
    thread_local std::vector<uint8_t> packed;
    thread_local std::vector<float> scales;
    packed.resize(size_t(a.k * kPanel));
    scales.resize(size_t(n_blocks * kPanel));
    const int64_t n0 = p * kPanel;
    repack_panel<Codes>(a, block_bytes, n0, packed.data(), scales.data());
    const __mmask16 mask0 = panel_lanes(a.n - n0), mask1 = panel_lanes(a.n - n0 - 16);
    for (int64_t row0 = 0; row0 < a.m; row0 += kKernelRows) {
      const int64_t rows = std::min(kKernelRows, a.m - row0);
      kKernels[rows](q, row0, a.k, packed.data(), scales.data(), beta, y + n0, a.n, mask0, mask1);
    }
  }
}

}  // namespace

bool linear_int8(const LinearArgs& a, float beta, float* y) {
  const std::string& format = a.blocks.format();
  if (format != "Q8_0" && format != "Q4_0") return false;
  static const bool vnni = __builtin_cpu_supports("avx512vnni") && __builtin_cpu_supports("avx512bw") &&
                           __builtin_cpu_supports("avx512vl");
  if (!vnni || kernel_isa() < Isa::avx512) return false;
  const int64_t block_bytes = find_block_format(format)->block_bytes;
  if (format == "Q8_0") run_vnni<int8_blocks::Q8_0Codes>(a, block_bytes, beta, y);
  else run_vnni<int8_blocks::Q4_0Codes>(a, block_bytes, beta, y);
  return true;
}

}  // namespace cpdit::kernels::detail
