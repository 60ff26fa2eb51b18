// Row-major f32 GEMM through oneDNN's sgemm (row-major natively, so no transposition trick).
#include "kernels/cpu/signals_held.hpp"

#include <cpdit/core/error.hpp>
#include <cpdit/kernels/cpu.hpp>

#include <oneapi/dnnl/dnnl.h>

namespace cpdit::kernels {

void gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const float* a,
          int64_t lda, const float* b, int64_t ldb, float beta, float* c, int64_t ldc) {
  CPDIT_CHECK(m >= 0 && n >= 0 && k >= 0, invalid_argument, "gemm: negative size m=", m, " n=", n, " k=", k);
  if (m == 0 || n == 0) return;
  const detail::SignalsHeld held;  // signals_held.hpp: these are the kernels that need it
  dnnl_status_t status = dnnl_sgemm(trans_a ? 'T' : 'N', trans_b ? 'T' : 'N', m, n, k, alpha, a, lda, b, ldb,
                                    beta, c, ldc);
  CPDIT_CHECK(status == dnnl_success, invalid_argument, "gemm: oneDNN sgemm refused m=", m, " n=", n, " k=", k,
              " lda=", lda, " ldb=", ldb, " ldc=", ldc, " (status ", int(status),
              "); leading dimensions must cover the rows");
}

}  // namespace cpdit::kernels
