// The `native` backend: the readable reference. Per (batch, head) it materialises the whole
// S_q x S_k score matrix with one GEMM, applies any mask kind and position rule, takes a plain
// softmax, and multiplies by V. Memory is O(S_q x S_k) per thread; use `flash` for long sequences.
#include "attention/detail.hpp"

#include <cpdit/core/error.hpp>
#include <cpdit/core/team_errors.hpp>
#include <cpdit/core/threads.hpp>
#include <cpdit/kernels/cpu.hpp>

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <limits>

namespace cpdit::attention::detail {
namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

// Adds the mask of (b, h) to the S_q x S_k scores: -inf where a key may not be attended, by the
// position rule (element by element on global positions) and by the mask tensor.
void apply_mask(const Mask& mask, const Tensor& m, const Dims& d, int64_t b, int64_t h, float* s) {
  for (int64_t i = 0; i < d.Sq && mask.has_rule(); ++i)
    for (int64_t j = 0; j < d.Sk; ++j)
      if (!mask.rule_allows(i, j)) s[i * d.Sk + j] = kNegInf;
  if (mask.kind == MaskKind::none) return;
  if (mask.kind == MaskKind::key_padding) {
    const bool* keep = m.data<bool>() + b * d.Sk;
    for (int64_t i = 0; i < d.Sq; ++i)
      for (int64_t j = 0; j < d.Sk; ++j)
        if (!keep[j]) s[i * d.Sk + j] = kNegInf;
    return;
  }
  const int64_t at = ((m.size(0) == 1 ? 0 : b) * m.size(1) + (m.size(1) == 1 ? 0 : h)) * d.Sq * d.Sk;
  if (mask.kind == MaskKind::boolean) {
    const bool* keep = m.data<bool>() + at;
    for (int64_t e = 0; e < d.Sq * d.Sk; ++e)
      if (!keep[e]) s[e] = kNegInf;
  } else {
    const float* bias = m.data<float>() + at;
    for (int64_t e = 0; e < d.Sq * d.Sk; ++e) s[e] += bias[e];
  }
}

class NativeBackend final : public Backend {
 public:
  std::string name() const override { return "native"; }

  Capabilities capabilities() const override {
    Capabilities c;
    c.returns_lse = c.backward = c.key_padding_mask = c.full_mask = c.additive_mask = c.gqa = true;
    c.causal_mask = c.block_causal_mask = true;
    c.ring = c.ulysses = c.unified = true;
    c.dtypes = {DType::f32, DType::bf16, DType::f16};
    return c;
  }

  Result forward(const Tensor& q_in, const Tensor& k_in, const Tensor& v_in, const Mask& mask,
                 float scale) const override {
    const Dims d = check_forward_args("native attention", q_in, k_in, v_in, mask, scale);
    const Tensor q = q_in.to(DType::f32), k = k_in.to(DType::f32), v = v_in.to(DType::f32);
    const Tensor m = mask.kind == MaskKind::none ? Tensor() : mask.tensor.contiguous();
    Tensor out = Tensor::zeros({d.B, d.Sq, d.H, d.D});  // stays 0 when there are no keys
    Tensor lse = Tensor::empty({d.B, d.H, d.Sq});
    const int threads = int(std::clamp<int64_t>(d.B * d.H, 1, compute_threads()));
    Tensor scores = Tensor::empty({threads, d.Sq, d.Sk});  // one score block per thread
    const float *qp = q.data<float>(), *kp = k.data<float>(), *vp = v.data<float>();
    float *op = out.data<float>(), *lp = lse.data<float>(), *sp = scores.data<float>();
    const int64_t qs = d.H * d.D, ks = d.Hkv * d.D;  // row strides

    TeamErrors errors;  // gemm may throw, and an exception must not leave an OpenMP region
#pragma omp parallel for collapse(2) schedule(dynamic) num_threads(threads)
    for (int64_t b = 0; b < d.B; ++b)
      for (int64_t h = 0; h < d.H; ++h) errors.run([&] {
        float* s = sp + omp_get_thread_num() * d.Sq * d.Sk;
        const int64_t hk = h / d.group();
        const float* qbh = qp + b * d.Sq * qs + h * d.D;
        const float* kbh = kp + b * d.Sk * ks + hk * d.D;
        const float* vbh = vp + b * d.Sk * ks + hk * d.D;
        kernels::gemm(false, true, d.Sq, d.Sk, d.D, scale, qbh, qs, kbh, ks, 0, s, d.Sk);
        apply_mask(mask, m, d, b, h, s);
        for (int64_t i = 0; i < d.Sq; ++i) {
          float* row = s + i * d.Sk;
          float mx = kNegInf;
          for (int64_t j = 0; j < d.Sk; ++j) mx = std::fmax(mx, row[j]);
          float sum = 0;
          if (mx != kNegInf)
            for (int64_t j = 0; j < d.Sk; ++j) sum += (row[j] = std::exp(row[j] - mx));
          // A fully masked row: out = 0 and lse = -inf.
          const float inv = sum > 0 ? 1.0f / sum : 0.0f;
          for (int64_t j = 0; j < d.Sk; ++j) row[j] = sum > 0 ? row[j] * inv : 0.0f;
          lp[(b * d.H + h) * d.Sq + i] = sum > 0 ? mx + std::log(sum) : kNegInf;
        }
        if (d.Sk > 0)
          kernels::gemm(false, false, d.Sq, d.D, d.Sk, 1, s, d.Sk, vbh, ks, 0, op + b * d.Sq * qs + h * d.D, qs);
      });
    errors.rethrow();
    return {out.to(q_in.dtype()), lse};
  }

  Grads backward(const Tensor& dout_in, const Tensor& q_in, const Tensor& k_in, const Tensor& v_in,
                 const Tensor& out, const Tensor& lse_in, const Mask& mask,
                 float scale) const override {
    const Dims d = check_backward_args("native attention backward", dout_in, q_in, k_in, v_in, out,
                                       lse_in, mask, scale);
    const Tensor q = q_in.to(DType::f32), k = k_in.to(DType::f32), v = v_in.to(DType::f32);
    const Tensor dout = dout_in.to(DType::f32), lse = lse_in.contiguous();
    const Tensor dv_row = rowsum_dout_out(dout, out);
    const Tensor m = mask.kind == MaskKind::none ? Tensor() : mask.tensor.contiguous();
    Grads g{Tensor::zeros(q.shape()), Tensor::zeros(k.shape()), Tensor::zeros(v.shape())};
    if (d.Sk == 0) return g;  // no keys: every gradient is 0
    const int threads = int(std::clamp<int64_t>(d.B * d.Hkv, 1, compute_threads()));
    Tensor scratch = Tensor::empty({threads, 2, d.Sq, d.Sk});  // P and dP per thread
    const float *qp = q.data<float>(), *kp = k.data<float>(), *vp = v.data<float>();
    const float *gp = dout.data<float>(), *lp = lse.data<float>(), *rp = dv_row.data<float>();
    float *dqp = g.dq.data<float>(), *dkp = g.dk.data<float>(), *dvp = g.dv.data<float>();
    const int64_t qs = d.H * d.D, ks = d.Hkv * d.D;

    // One task per (batch, KV head): the query heads sharing that KV head add into the same dk, dv.
    TeamErrors errors;  // gemm may throw, and an exception must not leave an OpenMP region
#pragma omp parallel for collapse(2) schedule(dynamic) num_threads(threads)
    for (int64_t b = 0; b < d.B; ++b)
      for (int64_t hk = 0; hk < d.Hkv; ++hk) errors.run([&] {
        float* p = scratch.data<float>() + omp_get_thread_num() * 2 * d.Sq * d.Sk;
        float* dp = p + d.Sq * d.Sk;
        const int64_t kv_at = b * d.Sk * ks + hk * d.D;
        for (int64_t h = hk * d.group(); h < (hk + 1) * d.group(); ++h) {
          const int64_t q_at = b * d.Sq * qs + h * d.D;
          const float* lse_row = lp + (b * d.H + h) * d.Sq;
          const float* dv_r = rp + (b * d.H + h) * d.Sq;
          // P = exp(scale q.k + mask - lse) with the global lse (exact per KV chunk).
          kernels::gemm(false, true, d.Sq, d.Sk, d.D, scale, qp + q_at, qs, kp + kv_at, ks, 0, p, d.Sk);
          apply_mask(mask, m, d, b, h, p);
          for (int64_t i = 0; i < d.Sq; ++i)
            for (int64_t j = 0; j < d.Sk; ++j) {
              float& x = p[i * d.Sk + j];
              x = lse_row[i] == kNegInf ? 0.0f : std::exp(x - lse_row[i]);
            }
          kernels::gemm(true, false, d.Sk, d.D, d.Sq, 1, p, d.Sk, gp + q_at, qs, 1, dvp + kv_at, ks);
          kernels::gemm(false, true, d.Sq, d.Sk, d.D, 1, gp + q_at, qs, vp + kv_at, ks, 0, dp, d.Sk);
          for (int64_t i = 0; i < d.Sq; ++i)
            for (int64_t j = 0; j < d.Sk; ++j)
              dp[i * d.Sk + j] = p[i * d.Sk + j] * (dp[i * d.Sk + j] - dv_r[i]);
          kernels::gemm(false, false, d.Sq, d.D, d.Sk, scale, dp, d.Sk, kp + kv_at, ks, 0, dqp + q_at, qs);
          kernels::gemm(true, false, d.Sk, d.D, d.Sq, scale, dp, d.Sk, qp + q_at, qs, 1, dkp + kv_at, ks);
        }
      });
    errors.rethrow();
    return g;
  }
};

}  // namespace

std::shared_ptr<const Backend> make_native_backend() { return std::make_shared<NativeBackend>(); }

}  // namespace cpdit::attention::detail
