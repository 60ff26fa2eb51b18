// FlashAttention-2 backward: key tiles outside, query tiles inside, P recomputed from the GLOBAL lse
// (so each KV chunk of a ring is exact on its own):
//   P = exp(scale Q K^T - lse);  dV += P^T dO;  dP = dO V^T;  dS = P o (dP - Dv);
//   dQ += scale dS K;  dK += scale dS^T Q;          with Dv = rowsum(dO o O).
// Work is split over (batch, KV head, range of key tiles). The query heads sharing a KV head run in
// the same task, so dK and dV have one writer; when there are more threads than (batch, KV head)
// pairs, the key tiles are split into parts whose dQ contributions go to separate buffers, summed
// at the end.
#include "attention/flash.hpp"
#include "kernels/cpu/flash_rows.hpp"

#include <cpdit/core/team_errors.hpp>
#include <cpdit/core/threads.hpp>
#include <cpdit/kernels/cpu.hpp>

#include <omp.h>

#include <algorithm>
#include <limits>

namespace cpdit::attention::detail::flash {

namespace rows_ops = cpdit::kernels::flash;

Grads backward(const Tensor& dout, const Tensor& q, const Tensor& k, const Tensor& v,
               const Tensor& out, const Tensor& lse, const Dims& d, const Mask& mask, float scale) {
  constexpr float kNegInf = -std::numeric_limits<float>::infinity();
  const Tensor dv_row = rowsum_dout_out(dout, out);
  const Tiling tiling = make_tiling(backward_blocking(d.D), mask, d);
  const int64_t br = tiling.br, bc = tiling.bc, q_tiles = tiling.q_tiles, k_tiles = tiling.k_tiles;

  const int64_t tasks = std::max<int64_t>(d.B * d.Hkv, 1);
  const int64_t parts = std::clamp<int64_t>((compute_threads() + tasks - 1) / tasks, 1, std::max<int64_t>(k_tiles, 1));
  const int threads = int(std::min<int64_t>(compute_threads(), tasks * parts));
  Grads g{Tensor::zeros(q.shape()), Tensor::zeros(k.shape()), Tensor::zeros(v.shape())};
  // dQ of part 0 goes straight to g.dq; parts 1.. each get a buffer.
  Tensor dq_parts = parts > 1 ? Tensor::zeros({parts - 1, q.numel()}) : Tensor();
  // Per thread: the P and dP tiles, and one query head's rows of q, dout and its dQ contribution
  // copied apart from the other heads (with many heads the (B, S, H, D) row stride made the query
  // tiles' rows collide in the cache).
  const int64_t head_rows = d.Sq * d.D, per_thread = 2 * br * bc + 3 * head_rows;
  Tensor scratch = Tensor::empty({threads, per_thread});
  const float *qp = q.data<float>(), *kp = k.data<float>(), *vp = v.data<float>();
  const float *gp = dout.data<float>(), *lp = lse.data<float>(), *rp = dv_row.data<float>();
  float *dkp = g.dk.data<float>(), *dvp = g.dv.data<float>();
  const int64_t qs = d.H * d.D, ks = d.Hkv * d.D;

  TeamErrors errors;  // gemm may throw, and an exception must not leave an OpenMP region
#pragma omp parallel for collapse(3) schedule(dynamic) num_threads(threads)
  for (int64_t b = 0; b < d.B; ++b)
    for (int64_t hk = 0; hk < d.Hkv; ++hk)
      for (int64_t part = 0; part < parts; ++part) errors.run([&] {
        float* p = scratch.data<float>() + omp_get_thread_num() * per_thread;
        float* dp = p + br * bc;
        float *qh = dp + br * bc, *gh = qh + head_rows, *dqh = gh + head_rows;
        float* dqp = part == 0 ? g.dq.data<float>() : dq_parts.data<float>() + (part - 1) * q.numel();
        for (int64_t h = hk * d.group(); h < (hk + 1) * d.group(); ++h) {
          for (int64_t r = 0; r < d.Sq; ++r) {
            std::copy_n(qp + (b * d.Sq + r) * qs + h * d.D, d.D, qh + r * d.D);
            std::copy_n(gp + (b * d.Sq + r) * qs + h * d.D, d.D, gh + r * d.D);
          }
          std::fill(dqh, dqh + head_rows, 0.0f);
          for (int64_t kt = part * k_tiles / parts; kt < (part + 1) * k_tiles / parts; ++kt) {
            const int64_t c0 = kt * bc, cols = std::min(bc, d.Sk - c0);
            const int64_t kv_at = (b * d.Sk + c0) * ks + hk * d.D;
            for (int64_t qt = 0; qt < q_tiles; ++qt) {
              const TileKeys state = tiling.state(b, qt, kt);
              if (state == TileKeys::none) continue;
              const int64_t r0 = qt * br, rows = std::min(br, d.Sq - r0);
              const int64_t q_at = r0 * d.D;  // in qh, gh and dqh
              const int64_t row_at = (b * d.H + h) * d.Sq + r0;
              kernels::gemm(false, true, rows, cols, d.D, scale, qh + q_at, d.D, kp + kv_at, ks, 0, p, bc);
              if (state == TileKeys::some) tiling.mask_scores(b, qt, kt, p, bc);
              for (int64_t r = 0; r < rows; ++r) {
                float* row = p + r * bc;
                if (lp[row_at + r] == kNegInf)  // fully masked row: no gradient flows through it
                  std::fill(row, row + cols, 0.0f);
                else
                  rows_ops::exp_shift_sum(row, cols, lp[row_at + r]);
              }
              kernels::gemm(true, false, cols, d.D, rows, 1, p, bc, gh + q_at, d.D, 1, dvp + kv_at, ks);
              kernels::gemm(false, true, rows, cols, d.D, 1, gh + q_at, d.D, vp + kv_at, ks, 0, dp, bc);
              for (int64_t r = 0; r < rows; ++r)
                rows_ops::softmax_grad(dp + r * bc, p + r * bc, cols, rp[row_at + r]);
              kernels::gemm(false, false, rows, d.D, cols, scale, dp, bc, kp + kv_at, ks, 1, dqh + q_at, d.D);
              kernels::gemm(true, false, cols, d.D, rows, scale, dp, bc, qh + q_at, d.D, 1, dkp + kv_at, ks);
            }
          }
          for (int64_t r = 0; r < d.Sq; ++r) {  // this part's dQ of head h, back into (B, S, H, D)
            float* dst = dqp + (b * d.Sq + r) * qs + h * d.D;
            for (int64_t e = 0; e < d.D; ++e) dst[e] += dqh[r * d.D + e];
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
