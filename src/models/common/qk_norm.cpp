#include <cpdit/kernels/cpu.hpp>
#include <cpdit/models/common/qk_norm.hpp>

namespace cpdit::models::common {

int64_t qk_norm_width(QkNorm where, int64_t heads, int64_t head_dim) {
  return where == QkNorm::per_head ? head_dim : heads * head_dim;
}

namespace {
Tensor split_heads(const Tensor& y, int64_t heads) { return y.reshape({y.size(0), y.size(1), heads, y.size(2) / heads}); }

// The layers one after another as modules, for the hooks to see each one's output.
Tensor project_as_modules(const nn::Linear& proj, const nn::RMSNorm* norm, QkNorm where, int64_t heads,
                          const Tensor& x, const RopeTables* rope) {
  Tensor y = proj.forward(x);
  if (norm && where == QkNorm::across_heads) y = norm->forward(y);
  y = split_heads(y, heads);
  if (norm && where == QkNorm::per_head) y = norm->forward(y);
  return rope ? apply_rope(y, *rope) : y;
}
}  // namespace

void project_heads_into(const nn::Linear& proj, const nn::RMSNorm* norm, QkNorm where, int64_t heads, const Tensor& x,
                        const RopeTables* rope, Tensor& out) {
  if (proj.has_hooks() || (norm && norm->has_hooks()) || (rope && !norm)) {
    out.copy_(project_as_modules(proj, norm, where, heads, x, rope).reshape(out.shape()));
    return;
  }
  if (!norm) {
    kernels::linear_into(x, proj.weight(), proj.bias(), out);
    return proj.add_delta_({x}, out);
  }
  // The norm's weight is a head's (per head) or the row's (across heads): the kernel norms groups of
  // its width, and rotates each head by tables of a head's width or the row by tables of the row's.
  kernels::linear_into(x, proj.weight(), Tensor(), out);
  proj.add_delta_({x}, out);
  kernels::bias_rms_norm_rope_(out, proj.bias(), norm->weight(), norm->eps(), rope ? rope->cos : Tensor(),
                               rope ? rope->sin : Tensor());
}

Tensor project_heads(const nn::Linear& proj, const nn::RMSNorm* norm, QkNorm where, int64_t heads, const Tensor& x,
                     const RopeTables* rope) {
  Tensor y = Tensor::empty({x.size(0), x.size(1), proj.out_features()});
  project_heads_into(proj, norm, where, heads, x, rope, y);
  return split_heads(y, heads);
}

}  // namespace cpdit::models::common
