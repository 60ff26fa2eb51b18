#include <cpdit/models/common/qk_norm.hpp>

namespace cpdit::models::common {

int64_t qk_norm_width(QkNorm where, int64_t heads, int64_t head_dim) {
  return where == QkNorm::per_head ? head_dim : heads * head_dim;
}

Tensor project_heads(const nn::Linear& proj, const nn::RMSNorm* norm, QkNorm where, int64_t heads, const Tensor& x) {
  Tensor y = proj.forward(x);
  // Across heads the norm runs on (B, S, D) before the split (and before any Ulysses exchange, which
  // the dispatcher does), so every rank normalises whole tokens.
  if (norm && where == QkNorm::across_heads) y = norm->forward(y);
  y = y.reshape({y.size(0), y.size(1), heads, y.size(2) / heads});
  if (norm && where == QkNorm::per_head) y = norm->forward(y);
  return y;
}

}  // namespace cpdit::models::common
