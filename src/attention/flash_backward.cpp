// FlashAttention-2 backward: key tiles outside, query tiles inside, P recomputed from the GLOBAL lse
// (so each KV chunk of a ring is exact on its own):
//   P = exp(scale Q K^T - lse);  dV += P^T dO;  dP = dO V^T;  dS = P o (dP - Dv);
//   dQ += scale dS K;  dK += scale dS^T Q;          with Dv = rowsum(dO o O).
// Work is split over (batch, KV head, range of key tiles). The query heads sharing a KV head run in
// the same task, so dK and dV have one writer; when there are more threads than (batch, KV head)
// pairs, the key tiles are split into parts whose dQ contributions go to separate buffers, summed
// at the end.
// The five products run on the register-blocked tile kernel (kernels/cpu/tile_gemm), whose B operand
// must be contiguous rows: rows of q, k, v and dout lie H D floats apart (a multiple of 4 KiB at
// usual widths), which read in place compete for the same few L1 sets. So each key tile's K, K^T and
// V^T are packed once per task, each query tile's Q and dO copied once per key tile, and dK, dV are
// accumulated in the task's own contiguous tiles.
#include "attention/flash.hpp"
#include "kernels/cpu/flash_rows.hpp"
#include "kernels/cpu/tile_gemm.hpp"

#include <cpdit/core/team_errors.hpp>
#include <cpdit/core/threads.hpp>

#include <omp.h>

#include <algorithm>
#include <limits>

namespace cpdit::attention::detail::flash {

namespace rows_ops = cpdit::kernels::flash;
namespace tile_gemm = cpdit::kernels::tile_gemm;

namespace {

// dst (rows x D, row stride ld_dst) = rows of a (B, S, heads, D) tensor starting at src, row stride ld.
void copy_rows(const float* src, int64_t ld, int64_t rows, int64_t D, float* dst, int64_t ld_dst) {
  for (int64_t r = 0; r < rows; ++r) std::copy_n(src + r * ld, D, dst + r * ld_dst);
}

}  // namespace

Grads backward(const Tensor& dout, const Tensor& q, const Tensor& k, const Tensor& v,
               const Tensor& out, const Tensor& lse, const Dims& d, const Mask& mask, float scale) {
  constexpr float kNegInf = -std::numeric_limits<float>::infinity();
  const Tensor dv_row = rowsum_dout_out(dout, out);
  const Tiling tiling = make_tiling(backward_blocking(d.D), mask, d);
  const int64_t br = tiling.br, bc = tiling.bc, q_tiles = tiling.q_tiles, k_tiles = tiling.k_tiles, D = d.D;

  const int64_t tasks = std::max<int64_t>(d.B * d.Hkv, 1);
  const int64_t parts = std::clamp<int64_t>((compute_threads() + tasks - 1) / tasks, 1, std::max<int64_t>(k_tiles, 1));
  const int threads = int(std::min<int64_t>(compute_threads(), tasks * parts));
  Grads g{Tensor::zeros(q.shape()), Tensor::zeros(k.shape()), Tensor::zeros(v.shape())};
  // dQ of part 0 goes straight to g.dq; parts 1.. each get a buffer.
  Tensor dq_parts = parts > 1 ? Tensor::zeros({parts - 1, q.numel()}) : Tensor();
  // Per thread: P and dP (br x bc); K, K^T, V^T, dK and dV of the key tile (bc x D each); the query
  // tile's Q and dO (br x D each). Rows padded (ld_c: bc wide, ld_d: D wide).
  const int64_t ld_c = tile_gemm::padded_ld(bc), ld_d = tile_gemm::padded_ld(D);
  const int64_t per_thread = 2 * br * ld_c + 2 * D * ld_c + 3 * bc * ld_d + 2 * br * ld_d;
  Tensor scratch = Tensor::empty({threads, per_thread});
  const float *qp = q.data<float>(), *kp = k.data<float>(), *vp = v.data<float>();
  const float *gp = dout.data<float>(), *lp = lse.data<float>(), *rp = dv_row.data<float>();
  float *dkp = g.dk.data<float>(), *dvp = g.dv.data<float>();
  const int64_t qs = d.H * D, ks = d.Hkv * D;

  TeamErrors errors;  // without AVX-512 the tile products are oneDNN's sgemm, which may throw
#pragma omp parallel for collapse(3) schedule(dynamic) num_threads(threads)
  for (int64_t b = 0; b < d.B; ++b)
    for (int64_t hk = 0; hk < d.Hkv; ++hk)
      for (int64_t part = 0; part < parts; ++part) errors.run([&] {
        float* p = scratch.data<float>() + omp_get_thread_num() * per_thread;
        float* dp = p + br * ld_c;
        float* kt_tile = dp + br * ld_c;
        float* vt_tile = kt_tile + D * ld_c;
        float* k_tile = vt_tile + D * ld_c;
        float* dk_tile = k_tile + bc * ld_d;
        float* dv_tile = dk_tile + bc * ld_d;
        float* q_tile = dv_tile + bc * ld_d;
        float* do_tile = q_tile + br * ld_d;
        float* dqp = part == 0 ? g.dq.data<float>() : dq_parts.data<float>() + (part - 1) * q.numel();
        const int64_t kt_end = (part + 1) * k_tiles / parts;
        for (int64_t kt = part * k_tiles / parts; kt < kt_end; ++kt) {
          const int64_t c0 = kt * bc, cols = std::min(bc, d.Sk - c0);
          const int64_t kv_at = (b * d.Sk + c0) * ks + hk * D;
          copy_rows(kp + kv_at, ks, cols, D, k_tile, ld_d);
          tile_gemm::transpose(kp + kv_at, ks, cols, D, kt_tile, ld_c);
          tile_gemm::transpose(vp + kv_at, ks, cols, D, vt_tile, ld_c);
          std::fill(dk_tile, dk_tile + 2 * bc * ld_d, 0.0f);  // dK and dV tiles, adjacent
          for (int64_t h = hk * d.group(); h < (hk + 1) * d.group(); ++h)
            for (int64_t qt = 0; qt < q_tiles; ++qt) {
              const TileKeys state = tiling.state(b, qt, kt);
              if (state == TileKeys::none) continue;
              const int64_t r0 = qt * br, rows = std::min(br, d.Sq - r0);
              const int64_t q_at = (b * d.Sq + r0) * qs + h * D;
              const int64_t row_at = (b * d.H + h) * d.Sq + r0;
              copy_rows(qp + q_at, qs, rows, D, q_tile, ld_d);
              copy_rows(gp + q_at, qs, rows, D, do_tile, ld_d);
              // What the next iteration reads, prefetched during this one's products: the next query
              // tile's Q, dO and dQ rows (of this head, else the next head of the group, else the
              // group's first, for the next key tile), and after the last query tile the next K and V.
              const bool last = qt + 1 == q_tiles && h + 1 == (hk + 1) * d.group();
              const int64_t next_r0 = qt + 1 < q_tiles ? r0 + br : 0;
              const int64_t next_h = qt + 1 < q_tiles ? h : last ? hk * d.group() : h + 1;
              const int64_t next_q = (b * d.Sq + next_r0) * qs + next_h * D, next_rows = std::min(br, d.Sq - next_r0);
              tile_gemm::Ahead next_k, next_v;
              if (last && kt + 1 < kt_end) {
                next_k = {kp + kv_at + bc * ks, ks, std::min(bc, d.Sk - c0 - bc), D};
                next_v = {vp + kv_at + bc * ks, ks, next_k.rows, D};
              }
              tile_gemm::multiply(rows, cols, D, scale, {q_tile, ld_d, 1}, kt_tile, ld_c, false, p, ld_c,
                                  {qp + next_q, qs, next_rows, D});
              if (state == TileKeys::some) tiling.mask_scores(b, qt, kt, p, ld_c);
              for (int64_t r = 0; r < rows; ++r) {
                float* row = p + r * ld_c;
                if (lp[row_at + r] == kNegInf)  // fully masked row: no gradient flows through it
                  std::fill(row, row + cols, 0.0f);
                else
                  rows_ops::exp_shift_sum(row, cols, lp[row_at + r]);
              }
              tile_gemm::multiply(cols, D, rows, 1.0f, {p, 1, ld_c}, do_tile, ld_d, true, dv_tile, ld_d,
                                  {gp + next_q, qs, next_rows, D});
              tile_gemm::multiply(rows, cols, D, 1.0f, {do_tile, ld_d, 1}, vt_tile, ld_c, false, dp, ld_c, next_k);
              for (int64_t r = 0; r < rows; ++r)
                rows_ops::softmax_grad(dp + r * ld_c, p + r * ld_c, cols, rp[row_at + r]);
              tile_gemm::multiply(rows, D, cols, scale, {dp, ld_c, 1}, k_tile, ld_d, true, dqp + q_at, qs,
                                  {dqp + next_q, qs, next_rows, D});
              tile_gemm::multiply(cols, D, rows, scale, {dp, 1, ld_c}, q_tile, ld_d, true, dk_tile, ld_d, next_v);
            }
          // This task is the only writer of the key tile's dK and dV rows.
          for (int64_t c = 0; c < cols; ++c) {
            std::copy_n(dk_tile + c * ld_d, D, dkp + kv_at + c * ks);
            std::copy_n(dv_tile + c * ld_d, D, dvp + kv_at + c * ks);
          }
        }
      });
  errors.rethrow();

  if (parts > 1) {
    float* dq = g.dq.data<float>();
    const float* extra = dq_parts.data<float>();
    const int64_t n = q.numel();
#pragma omp parallel for num_threads(threads)
    for (int64_t e = 0; e < n; ++e)
      for (int64_t part = 1; part < parts; ++part) dq[e] += extra[(part - 1) * n + e];
  }
  return g;
}

}  // namespace cpdit::attention::detail::flash
