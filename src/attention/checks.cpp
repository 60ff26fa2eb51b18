// Argument validation shared by every backend: one place that knows the layouts (attention.hpp).
#include "attention/detail.hpp"

#include <cpdit/core/error.hpp>

#include <cmath>

namespace cpdit::attention::detail {
namespace {

bool is_float_input(DType t) { return t == DType::f32 || t == DType::bf16 || t == DType::f16; }

void check_rule(const char* who, const Mask& mask) {
  if (!mask.has_rule()) return;
  CPDIT_CHECK(mask.block >= 1 && (mask.rule != MaskRule::causal || mask.block == 1), invalid_argument,
              who, ": ", mask_rule_name(mask.rule), " mask has ", mask.block,
              " tokens per block; use Mask::causal() or Mask::block_causal(n >= 1)");
  CPDIT_CHECK(mask.q_offset >= 0 && mask.k_offset >= 0, invalid_argument, who, ": ",
              mask_rule_name(mask.rule), " mask positions must be non-negative, got query offset ",
              mask.q_offset, " and key offset ", mask.k_offset);
}

void check_mask(const char* who, const Mask& mask, const Dims& d) {
  const Tensor& m = mask.tensor;
  check_rule(who, mask);
  if (mask.kind == MaskKind::none) return;
  CPDIT_CHECK(m.defined(), invalid_argument, who, ": ", mask_kind_name(mask.kind),
              " mask has no tensor; pass Mask::none() for no mask");
  if (mask.kind == MaskKind::key_padding) {
    const Shape want{d.B, d.Sk};
    CPDIT_CHECK(m.dtype() == DType::boolean && m.shape() == want, invalid_argument, who,
                ": key_padding mask must be bool (B, S_k) = ", shape_string(want), ", got ",
                m.describe());
    return;
  }
  DType want = mask.kind == MaskKind::boolean ? DType::boolean : DType::f32;
  bool ok = m.dtype() == want && m.dim() == 4 && (m.size(0) == 1 || m.size(0) == d.B) &&
            (m.size(1) == 1 || m.size(1) == d.H) && m.size(2) == d.Sq && m.size(3) == d.Sk;
  CPDIT_CHECK(ok, invalid_argument, who, ": ", mask_kind_name(mask.kind), " mask must be ",
              dtype_name(want), " (B|1, H|1, S_q, S_k) with B=", d.B, " H=", d.H, " S_q=", d.Sq,
              " S_k=", d.Sk, ", got ", m.describe());
}

}  // namespace

Dims check_forward_args(const char* who, const Tensor& q, const Tensor& k, const Tensor& v,
                        const Mask& mask, float scale) {
  CPDIT_CHECK(q.defined() && k.defined() && v.defined(), invalid_argument, who,
              ": q, k and v must all be given");
  CPDIT_CHECK(q.dim() == 4 && k.dim() == 4, invalid_argument, who,
              ": q and k must be 4-D (B, S, H, D), got q ", q.describe(), " k ", k.describe());
  CPDIT_CHECK(k.shape() == v.shape(), invalid_argument, who, ": k ", k.describe(), " and v ",
              v.describe(), " must have the same shape");
  Dims d{q.size(0), q.size(1), k.size(1), q.size(2), k.size(2), q.size(3)};
  CPDIT_CHECK(k.size(0) == d.B && k.size(3) == d.D, invalid_argument, who, ": q ", q.describe(),
              " and k ", k.describe(), " must agree on batch and head dim");
  CPDIT_CHECK(d.Hkv > 0 && d.H % d.Hkv == 0, invalid_argument, who, ": query heads ", d.H,
              " must be a multiple of key/value heads ", d.Hkv);
  CPDIT_CHECK(d.D > 0, invalid_argument, who, ": head dim must be positive");
  CPDIT_CHECK(q.dtype() == k.dtype() && q.dtype() == v.dtype() && is_float_input(q.dtype()),
              invalid_argument, who, ": q, k, v must share one of f32/bf16/f16, got ",
              dtype_name(q.dtype()), "/", dtype_name(k.dtype()), "/", dtype_name(v.dtype()));
  CPDIT_CHECK(scale > 0 && std::isfinite(scale), invalid_argument, who,
              ": softmax scale must be positive and finite, got ", scale);
  check_mask(who, mask, d);
  return d;
}

Dims check_backward_args(const char* who, const Tensor& dout, const Tensor& q, const Tensor& k,
                         const Tensor& v, const Tensor& out, const Tensor& lse, const Mask& mask,
                         float scale) {
  Dims d = check_forward_args(who, q, k, v, mask, scale);
  CPDIT_CHECK(dout.defined() && dout.shape() == q.shape() && is_float_input(dout.dtype()),
              invalid_argument, who, ": dout must be a float tensor shaped like q ", q.describe(),
              ", got ", dout.describe());
  CPDIT_CHECK(out.defined() && out.shape() == q.shape() && is_float_input(out.dtype()),
              invalid_argument, who, ": out must be the forward output shaped like q ",
              q.describe(), ", got ", out.describe());
  const Shape lse_shape{d.B, d.H, d.Sq};
  CPDIT_CHECK(lse.defined() && lse.dtype() == DType::f32 && lse.shape() == lse_shape,
              invalid_argument, who, ": lse must be f32 (B, H, S_q) = ", shape_string(lse_shape),
              ", got ", lse.describe());
  return d;
}

}  // namespace cpdit::attention::detail
