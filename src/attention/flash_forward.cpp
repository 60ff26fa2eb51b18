// FlashAttention-2 forward, as its pseudocode: for each query tile, stream the key tiles, keep the
// running row max m, denominator l and unnormalised output O, and rescale O when m grows.
//   S = scale Q K^T;  m' = max(m, rowmax S);  P = exp(S - m');
//   l = l e^(m-m') + rowsum P;  O = O e^(m-m') + P V;  finally out = O / l, lse = m + ln l.
// The two products run in f32, or under MatmulPrecision::bf16 with bf16 operands and f32
// accumulation (flash_tiles.hpp); m, l and O are f32 either way.
#include "attention/flash.hpp"
#include "attention/flash_tiles.hpp"
#include "kernels/cpu/flash_rows.hpp"

#include <cpdit/core/precision.hpp>
#include <cpdit/core/team_errors.hpp>
#include <cpdit/core/threads.hpp>

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <limits>

namespace cpdit::attention::detail::flash {

namespace rows_ops = cpdit::kernels::flash;

namespace {

template <class Tiles>
Result run_forward(const Tensor& q, const Tensor& k, const Tensor& v, const Dims& d, const Tiling& tiling,
                   float scale) {
  constexpr float kNegInf = -std::numeric_limits<float>::infinity();
  const int64_t br = tiling.br, bc = tiling.bc, q_tiles = tiling.q_tiles, k_tiles = tiling.k_tiles;

  Tensor out = Tensor::empty({d.B, d.Sq, d.H, d.D});
  Tensor lse = Tensor::empty({d.B, d.H, d.Sq});
  const int threads = int(std::clamp<int64_t>(d.B * d.H * q_tiles, 1, compute_threads()));
  // Per thread: scores (br x bc), output accumulator (br x D), running max and denominator (br),
  // and what the tile products need (bf16 copies of the query and P tiles).
  const int64_t per_thread = br * bc + br * d.D + 2 * br + Tiles::scratch_floats(d, tiling);
  Tensor scratch = Tensor::empty({threads, per_thread});
  float* op = out.data<float>();
  float* lp = lse.data<float>();
  const int64_t qs = d.H * d.D;  // row stride of (B, S, H, D)

  // The (batch, KV head) pairs whose keys and values the tiles copy at a time: as few as give every
  // thread query tiles to work on.
  const int64_t kv_heads = d.B * d.Hkv, group = d.group();
  const int64_t per_chunk = std::clamp<int64_t>((threads + group * q_tiles - 1) / (group * q_tiles), 1, kv_heads);
  TeamErrors errors;  // gemm may throw, and an exception must not leave an OpenMP region
  for (int64_t first = 0; first < kv_heads; first += per_chunk) {
    const KvHeads chunk{first, std::min(per_chunk, kv_heads - first)};
    const Tiles tiles(q, k, v, d, tiling, chunk);
#pragma omp parallel for collapse(3) schedule(dynamic) num_threads(threads)
    for (int64_t i = 0; i < chunk.count; ++i)
      for (int64_t g = 0; g < group; ++g)
        for (int64_t qt = 0; qt < q_tiles; ++qt) errors.run([&] {
          const int64_t b = (first + i) / d.Hkv, h = (first + i) % d.Hkv * group + g;
          float* s = scratch.data<float>() + omp_get_thread_num() * per_thread;
          float* acc = s + br * bc;
          float* m = acc + br * d.D;
          float* l = m + br;
          float* products = l + br;
          const int64_t r0 = qt * br, rows = std::min(br, d.Sq - r0);
          const typename Tiles::Queries qi = tiles.queries(products, b, h, r0, rows);
          std::fill(acc, acc + rows * d.D, 0.0f);
          std::fill(m, m + rows, kNegInf);
          std::fill(l, l + rows, 0.0f);

          for (int64_t kt = 0; kt < k_tiles; ++kt) {
            const TileKeys state = tiling.state(b, qt, kt);
            if (state == TileKeys::none) continue;
            const KeyTile tile{b, h / d.group(), kt, kt * bc, std::min(bc, d.Sk - kt * bc)};
            tiles.scores(qi, rows, tile, scale, s, bc);
            if (state == TileKeys::some) tiling.mask_scores(b, qt, kt, s, bc);
            for (int64_t r = 0; r < rows; ++r) {
              float* row = s + r * bc;
              const float m_new = std::max(m[r], rows_ops::row_max(row, tile.cols));
              if (m_new == kNegInf) {  // every key so far masked: this row contributes nothing yet
                std::fill(row, row + tile.cols, 0.0f);
                continue;
              }
              const float alpha = std::exp(m[r] - m_new);  // 0 on the first tile (m = -inf)
              l[r] = l[r] * alpha + rows_ops::exp_shift_sum(row, tile.cols, m_new);
              if (alpha != 1.0f) rows_ops::scale_row(acc + r * d.D, d.D, alpha);
              m[r] = m_new;
            }
            tiles.accumulate(products, s, bc, rows, tile, acc);
          }

          for (int64_t r = 0; r < rows; ++r) {
            float* o = op + (b * d.Sq + r0 + r) * qs + h * d.D;
            // A fully masked row keeps l = 0: out = 0, lse = -inf (spec §2).
            const float inv = l[r] > 0 ? 1.0f / l[r] : 0.0f;
            for (int64_t e = 0; e < d.D; ++e) o[e] = acc[r * d.D + e] * inv;
            lp[(b * d.H + h) * d.Sq + r0 + r] = l[r] > 0 ? m[r] + std::log(l[r]) : kNegInf;
          }
        });
  }
  errors.rethrow();
  return {out, lse};
}

}  // namespace

Result forward(const Tensor& q, const Tensor& k, const Tensor& v, const Dims& d, const Mask& mask,
               float scale) {
  const Tiling tiling = make_tiling(forward_blocking(d.D), mask, d);
  if (matmul_precision() == MatmulPrecision::bf16) return run_forward<Bf16Tiles>(q, k, v, d, tiling, scale);
  return run_forward<F32Tiles>(q, k, v, d, tiling, scale);
}

}  // namespace cpdit::attention::detail::flash
