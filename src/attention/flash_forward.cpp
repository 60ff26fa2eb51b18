// FlashAttention-2 forward, as its pseudocode: for each query tile, stream the key tiles, keep the
// running row max m, denominator l and unnormalised output O, and rescale O when m grows.
//   S = scale Q K^T;  m' = max(m, rowmax S);  P = exp(S - m');
//   l = l e^(m-m') + rowsum P;  O = O e^(m-m') + P V;  finally out = O / l, lse = m + ln l.
// The two products run in f32 (run_forward_f32, on kernels/cpu/tile_gemm), or under
// MatmulPrecision::bf16 with bf16 operands and f32 accumulation (run_forward over flash_tiles.hpp);
// m, l and O are f32 either way.
// The bf16 pass lets m lag behind the max: any shift gives the same out and lse, as long as the weights
// stay finite. After a row's first tile it keeps m while a tile's weights sum to at most kMaxWeightSum,
// so most tiles take one pass over their scores (no max pass) and leave O unscaled.
#include "attention/flash.hpp"
#include "attention/flash_tiles.hpp"
#include "kernels/cpu/flash_rows.hpp"
#include "kernels/cpu/tile_gemm.hpp"

#include <cpdit/core/precision.hpp>
#include <cpdit/core/team_errors.hpp>
#include <cpdit/core/threads.hpp>

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <limits>

namespace cpdit::attention::detail::flash {

namespace rows_ops = cpdit::kernels::flash;
namespace tile_gemm = cpdit::kernels::tile_gemm;

namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();
// With m at most ln 2^32 = 22 below a tile's max, l and O grow by at most 2^32 a tile: far from f32's
// 2^128 for any count of key tiles and |v| there could be.
constexpr float kMaxWeightSum = 4294967296.0f;

// A task is one (batch, head) and a share (one of `parts`) of its query tiles: whole heads when there
// are enough, else about four tasks per thread so that dynamic scheduling evens out the ends. Each
// task prepares its KV head's keys and values once for all its query tiles.
struct Tasks {
  int64_t parts = 1;
  int threads = 1;
};

Tasks split_tasks(const Dims& d, const Tiling& tiling) {
  const int64_t heads = d.B * d.H;
  Tasks t;
  // No batch, head or query leaves nothing to split (the loops below run zero times).
  if (compute_threads() > 1 && heads > 0 && tiling.q_tiles > 0)
    t.parts = std::clamp<int64_t>((4 * compute_threads() + heads - 1) / heads, 1, tiling.q_tiles);
  t.threads = int(std::clamp<int64_t>(heads * t.parts, 1, compute_threads()));
  return t;
}

// The end of one query tile: out = O / l and lse = m + ln l for its rows of (b, h), where O is rows x D
// row-major (acc).
void write_rows(const float* acc, const float* m, const float* l, const Dims& d, int64_t b, int64_t h, int64_t r0,
                int64_t rows, Tensor& out, Tensor& lse) {
  for (int64_t r = 0; r < rows; ++r) {
    float* o = out.data<float>() + ((b * d.Sq + r0 + r) * d.H + h) * d.D;
    const float* a = acc + r * d.D;
    // A fully masked row keeps l = 0: out = 0, lse = -inf, the attention contract for a row with no visible key.
    const float inv = l[r] > 0 ? 1.0f / l[r] : 0.0f;
#pragma omp simd
    for (int64_t e = 0; e < d.D; ++e) o[e] = a[e] * inv;
    lse.data<float>()[(b * d.H + h) * d.Sq + r0 + r] = l[r] > 0 ? m[r] + std::log(l[r]) : kNegInf;
  }
}

// The f32 pass. Both products run on the register-blocked tile kernel with queries along C's rows,
// so the online softmax runs down columns, 16 queries per vector:
//   St (key tile x queries) = scale K Q^T   and   O^T (D x queries) += V^T St.
// The kernel streams its A operand (K, V^T) row by row and wants its B operand (Q^T, St) in L1. Rows
// of k and v lie H_kv D floats apart (a multiple of 4 KiB at usual widths), so read in place they
// compete for the same few L1 sets and defeat the prefetcher; each task therefore first copies its KV
// head's keys into contiguous rows and its values transposed, key tile by key tile, once for all
// its query tiles (2 S_k D floats per thread).
Result run_forward_f32(const Tensor& q, const Tensor& k, const Tensor& v, const Dims& d, const Tiling& tiling,
                       float scale) {
  const int64_t br = tiling.br, bc = tiling.bc, D = d.D, q_tiles = tiling.q_tiles;
  Tensor out = Tensor::empty({d.B, d.Sq, d.H, D});
  Tensor lse = Tensor::empty({d.B, d.H, d.Sq});
  const Tasks tasks = split_tasks(d, tiling);
  // Per thread: the KV head's keys (S_k x D) and values transposed per key tile (D x bc each); Q^T,
  // O^T (D x br) and St (bc x br); m, l, alpha and the tile's max (br). Tile rows are padded (tile_gemm.hpp).
  const int64_t ld_r = tile_gemm::padded_ld(br), ld_c = tile_gemm::padded_ld(bc);
  const int64_t vt_tile = D * ld_c;
  const int64_t per_thread = d.Sk * D + tiling.k_tiles * vt_tile + 2 * D * ld_r + bc * ld_r + 4 * br;
  Tensor scratch = Tensor::empty({tasks.threads, per_thread});
  const float *qp = q.data<float>(), *kp = k.data<float>(), *vp = v.data<float>();
  const int64_t qs = d.H * D, ks = d.Hkv * D;  // row strides of (B, S, H, D) and (B, S, H_kv, D)

  TeamErrors errors;  // without AVX-512 the tile products are oneDNN's sgemm, which may throw
#pragma omp parallel for collapse(3) schedule(dynamic) num_threads(tasks.threads)
  for (int64_t b = 0; b < d.B; ++b)
    for (int64_t h = 0; h < d.H; ++h)
      for (int64_t part = 0; part < tasks.parts; ++part) errors.run([&] {
        float* k_rows = scratch.data<float>() + omp_get_thread_num() * per_thread;
        float* v_t = k_rows + d.Sk * D;
        float* q_t = v_t + tiling.k_tiles * vt_tile;
        float* acc_t = q_t + D * ld_r;
        float* st = acc_t + D * ld_r;
        float* m = st + bc * ld_r;
        float* l = m + br;
        float* alpha = l + br;
        float* tile_max = alpha + br;
        const int64_t kv_at = b * d.Sk * ks + h / d.group() * D;
        for (int64_t c = 0; c < d.Sk; ++c) std::copy_n(kp + kv_at + c * ks, D, k_rows + c * D);
        for (int64_t kt = 0; kt < tiling.k_tiles; ++kt)
          tile_gemm::transpose(vp + kv_at + kt * bc * ks, ks, std::min(bc, d.Sk - kt * bc), D, v_t + kt * vt_tile, ld_c);
        const int64_t qt_end = (part + 1) * q_tiles / tasks.parts;
        const float* q_rows = qp + b * d.Sq * qs + h * D;  // this head's queries, and its rows of out
        const float* out_rows = out.data<float>() + b * d.Sq * qs + h * D;
        for (int64_t qt = part * q_tiles / tasks.parts; qt < qt_end; ++qt) {
          const int64_t r0 = qt * br, rows = std::min(br, d.Sq - r0);
          tile_gemm::transpose(q_rows + r0 * qs, qs, rows, D, q_t, ld_r);
          for (int64_t e = 0; e < D; ++e) std::fill(acc_t + e * ld_r, acc_t + e * ld_r + rows, 0.0f);
          std::fill(m, m + rows, kNegInf);
          std::fill(l, l + rows, 0.0f);
          for (int64_t kt = 0; kt < tiling.k_tiles; ++kt) {
            const TileKeys state = tiling.state(b, qt, kt);
            if (state == TileKeys::none) continue;
            const int64_t c0 = kt * bc, cols = std::min(bc, d.Sk - c0);
            // This tile's V^T is brought into L2 during the score product and the next tile's keys
            // during P V. On the last key tile, the rows of out this query tile writes and the next
            // one's queries instead: rows H D floats apart, which otherwise wait on memory one by one.
            const bool last = kt + 1 == tiling.k_tiles;
            const tile_gemm::Ahead values = last ? tile_gemm::Ahead{out_rows + r0 * qs, qs, rows, D}
                                                 : tile_gemm::Ahead{v_t + kt * vt_tile, ld_c, D, cols};
            tile_gemm::Ahead next;
            if (!last) next = {k_rows + (c0 + bc) * D, D, std::min(bc, d.Sk - c0 - bc), D};
            else if (qt + 1 < qt_end) next = {q_rows + (r0 + br) * qs, qs, std::min(br, d.Sq - r0 - br), D};
            std::fill(tile_max, tile_max + rows, kNegInf);
            tile_gemm::multiply(cols, rows, D, scale, {k_rows + c0 * D, D, 1}, q_t, ld_r, false, st, ld_r, values,
                                nullptr, tile_max);
            // The product's max counts the scores a mask then hides: such a tile's is found afresh.
            if (state == TileKeys::some) tiling.mask_scores(b, qt, kt, st, 1, ld_r);
            rows_ops::online_softmax_columns(st, ld_r, cols, rows, state == TileKeys::all ? tile_max : nullptr, m, l,
                                             alpha);
            // O^T = O^T diag(alpha) + V^T St: the rescaling as the product loads O^T.
            tile_gemm::multiply(D, rows, cols, 1.0f, {v_t + kt * vt_tile, ld_c, 1}, st, ld_r, true, acc_t, ld_r, next,
                                alpha);
          }
          // O^T back to query rows, into Q^T's space (free until the next query tile).
          tile_gemm::transpose(acc_t, ld_r, D, rows, q_t, D);
          write_rows(q_t, m, l, d, b, h, r0, rows, out, lse);
        }
      });
  errors.rethrow();
  return {out, lse};
}

// The bf16 pass (flash_tiles.hpp). Tasks as the f32 pass's: each packs its KV head's keys and values
// into its thread's scratch, where they stay in L2 for all its query tiles; packed for every head up
// front they went out to memory and were read back.
template <class Tiles>
Result run_forward(const Tensor& q, const Tensor& k, const Tensor& v, const Dims& d, const Tiling& tiling,
                   float scale) {
  const int64_t br = tiling.br, bc = tiling.bc, q_tiles = tiling.q_tiles, k_tiles = tiling.k_tiles;
  const Tiles tiles(q, k, v, d, tiling);

  Tensor out = Tensor::empty({d.B, d.Sq, d.H, d.D});
  Tensor lse = Tensor::empty({d.B, d.H, d.Sq});
  const Tasks tasks = split_tasks(d, tiling);
  // Per thread: scores (br rows of lds), output accumulator (br x D), running max and denominator
  // (br), and what the tile products need (bf16 keys, values, query and P tiles). A score row is one
  // cache line longer than a key tile rounded up to whole lines, as the packed tiles' rows are
  // (flash_tiles.cpp): tile stores at a stride of 2 KiB would crowd a few L1 sets, and rows that do
  // not start on a line (100 kept text keys: 116 floats) make every tile load and store straddle two.
  // Each thread's share is whole lines too.
  constexpr int64_t kLine = 16;  // floats
  const int64_t lds = (bc + kLine - 1) / kLine * kLine + kLine;
  const int64_t per_thread =
      (br * lds + br * d.D + 2 * br + tiles.scratch_floats() + kLine - 1) / kLine * kLine;
  Tensor scratch = Tensor::empty({tasks.threads, per_thread});

  TeamErrors errors;  // gemm may throw, and an exception must not leave an OpenMP region
#pragma omp parallel for collapse(3) schedule(dynamic) num_threads(tasks.threads)
  for (int64_t b = 0; b < d.B; ++b)
    for (int64_t h = 0; h < d.H; ++h)
      for (int64_t part = 0; part < tasks.parts; ++part) errors.run([&] {
        float* s = scratch.data<float>() + omp_get_thread_num() * per_thread;
        float* acc = s + br * lds;
        float* m = acc + br * d.D;
        float* l = m + br;
        float* products = l + br;
        tiles.pack_keys(products, b, h / d.group());
        bf16* p = tiles.weights(products);
        for (int64_t qt = part * q_tiles / tasks.parts; qt < (part + 1) * q_tiles / tasks.parts; ++qt) {
          const int64_t r0 = qt * br, rows = std::min(br, d.Sq - r0);
          const typename Tiles::Queries qi = tiles.queries(products, b, h, r0, rows);
          std::fill(acc, acc + rows * d.D, 0.0f);
          std::fill(m, m + rows, kNegInf);
          std::fill(l, l + rows, 0.0f);

          for (int64_t kt = 0; kt < k_tiles; ++kt) {
            const TileKeys state = tiling.state(b, qt, kt);
            if (state == TileKeys::none) continue;
            const KeyTile tile{b, h / d.group(), kt, kt * bc, std::min(bc, d.Sk - kt * bc)};
            tiles.scores(products, qi, rows, tile, s, lds);
            if (state == TileKeys::some) tiling.mask_scores(b, qt, kt, s, lds);
            const int64_t width = Tiles::weights_width(tile.cols);
            for (int64_t r = 0; r < rows; ++r) {
              const float* row = s + r * lds;
              bf16* p_row = p + r * tiles.weights_ld();
              if (m[r] != kNegInf) {  // keep m unless the weights grow too large (a NaN sum fails too)
                const float sum = rows_ops::exp_to_bf16_sum(row, tile.cols, scale, m[r], p_row, width);
                if (sum <= kMaxWeightSum) {
                  l[r] += sum;
                  continue;
                }
              }
              // scale > 0, so the max of the scaled scores is the scaled max.
              const float m_new = std::max(m[r], scale * rows_ops::row_max(row, tile.cols));
              if (m_new == kNegInf) {  // every key so far masked: this row contributes nothing yet
                std::fill(p_row, p_row + width, bf16{0});
                continue;
              }
              const float alpha = std::exp(m[r] - m_new);  // 0 on the first tile (m = -inf)
              l[r] = l[r] * alpha + rows_ops::exp_to_bf16_sum(row, tile.cols, scale, m_new, p_row, width);
              if (alpha != 1.0f) rows_ops::scale_row(acc + r * d.D, d.D, alpha);
              m[r] = m_new;
            }
            tiles.accumulate(products, p, rows, tile, acc);
          }

          write_rows(acc, m, l, d, b, h, r0, rows, out, lse);
        }
      });
  errors.rethrow();
  return {out, lse};
}

}  // namespace

Result forward(const Tensor& q, const Tensor& k, const Tensor& v, const Dims& d, const Mask& mask,
               float scale) {
  if (matmul_precision() == MatmulPrecision::bf16)
    return run_forward<Bf16Tiles>(q, k, v, d, make_tiling(forward_blocking(d.D), mask, d), scale);
  return run_forward_f32(q, k, v, d, make_tiling(forward_f32_blocking(d.D), mask, d), scale);
}

}  // namespace cpdit::attention::detail::flash
