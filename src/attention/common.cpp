// The GEMM and the softmax-backward row term both backends use.
#include "attention/detail.hpp"

#include <cpdit/core/error.hpp>
#include <cpdit/core/threads.hpp>

#include <oneapi/dnnl/dnnl.h>

namespace cpdit::attention::detail {

void gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const float* a,
          int64_t lda, const float* b, int64_t ldb, float beta, float* c, int64_t ldc) {
  if (m == 0 || n == 0) return;
  dnnl_status_t status = dnnl_sgemm(trans_a ? 'T' : 'N', trans_b ? 'T' : 'N', m, n, k, alpha, a, lda,
                                    b, ldb, beta, c, ldc);
  CPDIT_CHECK(status == dnnl_success, internal, "attention: oneDNN sgemm failed (status ",
              int(status), ") for ", m, "x", n, "x", k);
}

Tensor rowsum_dout_out(const Tensor& dout, const Tensor& out) {
  Tensor g = dout.to(DType::f32), o = out.to(DType::f32);
  const int64_t B = g.size(0), S = g.size(1), H = g.size(2), D = g.size(3);
  Tensor dv = Tensor::empty({B, H, S});
  const float* gp = g.data<float>();
  const float* op = o.data<float>();
  float* dvp = dv.data<float>();
#pragma omp parallel for collapse(2) num_threads(compute_threads())
  for (int64_t b = 0; b < B; ++b)
    for (int64_t i = 0; i < S; ++i)
      for (int64_t h = 0; h < H; ++h) {
        const int64_t at = ((b * S + i) * H + h) * D;
        float sum = 0;
        for (int64_t d = 0; d < D; ++d) sum += gp[at + d] * op[at + d];
        dvp[(b * H + h) * S + i] = sum;
      }
  return dv;
}

}  // namespace cpdit::attention::detail
