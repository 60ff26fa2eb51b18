#pragma once
// Adaptive LayerNorm: the timestep conditioning of every DiT block, y = LN(x)(1 + scale) + shift with
// the LayerNorm without affine. The variants differ only in where (shift, scale, gate) come from and
// in which order (the usual porting bug). Modulation vectors are (B, D) (one per
// batch item), (B, 1, D), or (B, S, D) (one per token).
#include <cpdit/core/weight.hpp>
#include <cpdit/models/common/embeddings.hpp>
#include <cpdit/nn/layers.hpp>

#include <string>
#include <vector>

namespace cpdit::models::common {

// AdaLayerNormZero (chunks 6: shift_msa, scale_msa, gate_msa, shift_mlp, scale_mlp, gate_mlp) and
// AdaLayerNormZeroSingle (chunks 3: shift, scale, gate): `linear` (D -> chunks·D) of SiLU(emb).
// forward(emb (B, D)) returns the chunks, each (B, D), in that order. Qwen-Image holds the same
// projection as `img_mod` = Sequential(SiLU, Linear), so its linear is named "1" there.
class AdaLayerNormZero : public nn::Module {
 public:
  AdaLayerNormZero(int64_t dim, int chunks, const std::string& linear_name = "linear");
  std::vector<Tensor> forward(const Tensor& emb) const;

 private:
  nn::Linear& linear_;
  int chunks_;
};

// AdaLayerNormContinuous (the output head of FLUX.1 and Qwen-Image): (scale, shift) = chunk2(linear(SiLU(c)))
// — scale first — then LN(x)(1 + scale) + shift.
class AdaLayerNormContinuous : public nn::Module {
 public:
  AdaLayerNormContinuous(int64_t dim, int64_t conditioning_dim, float eps);
  Tensor forward(const Tensor& x, const Tensor& conditioning_embedding) const;

 private:
  nn::Linear& linear_;
  float eps_;
};

// AdaLayerNormSingle (PixArt-α, LTX-Video): one timestep MLP for the whole model,
// emb.timestep_embedder(sinusoid256(t)), then `linear` (D -> 6D) of its SiLU. forward(timestep (B,))
// returns (the 6D modulation (B, 6D), the embedded timestep (B, D)); each block adds its own
// scale_shift_table to the first (scale_shift_modulation), the output head to the second.
class AdaLayerNormSingle : public nn::Module {
 public:
  explicit AdaLayerNormSingle(int64_t dim);
  std::vector<Tensor> forward(const Tensor& timestep) const;

 private:
  MlpEmbedder& timestep_embedder_;
  nn::Linear& linear_;
};

// The scale-shift-table modulation (Wan, LTX, PixArt): `table` [n, D] or [1, n, D] (a block's
// parameter) + `emb` (B, n, D) or per token (B, S, n, D) — or one row for all n, (B, 1, D) / (B, S, 1, D),
// as the output heads pass the embedded timestep — cut into the n vectors, each (B, 1, D) or (B, S, D),
// in the table's row order. The table is widened to f32 per call (it is small), so a half-precision
// checkpoint's table stays as stored.
std::vector<Tensor> scale_shift_modulation(const Weight& table, const Tensor& emb);

// LN(x)(1 + scale) + shift, LayerNorm without affine.
Tensor norm_modulate(const Tensor& x, const Tensor& scale, const Tensor& shift, float eps);

// x += y · gate (the gated residual). x must be the caller's own tensor, not one a hook may hold.
void add_gated_(Tensor& x, const Tensor& y, const Tensor& gate);
// x + y · gate as a new tensor (gate undefined: x + y).
Tensor gated_residual(const Tensor& x, const Tensor& y, const Tensor& gate);
// x + proj(o) · gate as a new tensor (gate undefined: x + proj(o)), the gated residual of a branch
// whose last layer is `proj`: its product runs without the bias, and bias, gate and residual finish
// in one pass over it. o is proj's input, or its parts along the last dim (proj over their
// concatenation, which is never built: kernels::linear_cat). A proj with hooks runs as a module (its
// hooks see it), then the residual.
Tensor projected_residual(const Tensor& x, const nn::Linear& proj, const std::vector<Tensor>& o, const Tensor& gate);

}  // namespace cpdit::models::common
