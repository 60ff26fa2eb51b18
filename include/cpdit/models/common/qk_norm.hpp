#pragma once
// The query/key projection of an attention layer, with its RMSNorm where the family puts it.
#include <cpdit/models/common/rope.hpp>
#include <cpdit/nn/layers.hpp>

namespace cpdit::models::common {

enum class QkNorm {
  per_head,      // "rms_norm": one weight of head_dim, after the head split (FLUX.1, Qwen-Image)
  across_heads,  // "rms_norm_across_heads": one weight of heads·head_dim, before it (Wan, LTX)
};

// The width of the RMSNorm weight.
int64_t qk_norm_width(QkNorm where, int64_t heads, int64_t head_dim);

// proj(x) (B, S, heads·head_dim) -> (B, S, heads, head_dim), normed by `norm` (when given) at `where`,
// then rotated by `rope` (when given; tables of a head's width or of all heads'). With a norm the
// projection runs without its bias, and bias, norm and rotation finish in one pass over its output
// (kernels::bias_rms_norm_rope_), unless a hook is installed on proj or norm, which then run as modules.
Tensor project_heads(const nn::Linear& proj, const nn::RMSNorm* norm, QkNorm where, int64_t heads, const Tensor& x,
                     const RopeTables* rope = nullptr);
// The same written into `out` (B, S, heads·head_dim), contiguous f32: e.g. one stream's rows of a
// joint attention's buffer, which then needs no concatenation.
void project_heads_into(const nn::Linear& proj, const nn::RMSNorm* norm, QkNorm where, int64_t heads, const Tensor& x,
                        const RopeTables* rope, Tensor& out);

}  // namespace cpdit::models::common
