#include <cpdit/kernels/cpu.hpp>
#include <cpdit/models/common/qk_norm.hpp>

namespace cpdit::models::common {

int64_t qk_norm_width(QkNorm where, int64_t heads, int64_t head_dim) {
  return where == QkNorm::per_head ? head_dim : heads * head_dim;
}

namespace {
Tensor split_heads(const Tensor& y, int64_t heads) { return y.reshape({y.size(0), y.size(1), heads, y.size(2) / heads}); }
}  // namespace

Tensor project_heads(const nn::Linear& proj, const nn::RMSNorm* norm, QkNorm where, int64_t heads, const Tensor& x,
                     const RopeTables* rope) {
  // Across heads the norm runs on (B, S, D) before the split (and before any Ulysses exchange, which
  // the dispatcher does), so every rank normalises whole tokens.
  if (norm && where == QkNorm::across_heads && !proj.has_hooks() && !norm->has_hooks()) {
    // LTX-Video's tables span the whole width and rotate in the same pass; Wan's rotate each head after.
    const bool whole_width = rope && rope->cos.size(-1) == proj.out_features();
    Tensor y = kernels::linear(x, proj.weight());
    kernels::bias_rms_norm_rope_(y, proj.bias(), norm->weight(), norm->eps(), whole_width ? rope->cos : Tensor(),
                                 whole_width ? rope->sin : Tensor());
    y = split_heads(y, heads);
    return rope && !whole_width ? apply_rope(y, *rope) : y;
  }
  Tensor y = proj.forward(x);
  if (norm && where == QkNorm::across_heads) y = norm->forward(y);
  y = split_heads(y, heads);
  if (norm && where == QkNorm::per_head) y = norm->forward(y);
  return rope ? apply_rope(y, *rope) : y;
}

}  // namespace cpdit::models::common
