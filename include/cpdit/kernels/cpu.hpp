#pragma once
// CPU kernels: the arithmetic of the models, on f32 tensors. Every kernel runs an OpenMP team of
// compute_threads() (the calling rank's budget) and throws cpdit::Error(invalid_argument) on a wrong
// shape or dtype. Inputs that are views are made contiguous internally (a copy); in-place kernels
// (name ending in _) need a contiguous destination. Results are new contiguous f32 tensors.
//
// Broadcasting (add, mul, add_, add_mul_): the second operand b is aligned to a from the right; each
// of its dims equals a's or is 1, and it may have fewer dims. So a (B, S, C) takes b of (B, S, C),
// (S, C), (C), (B, 1, C) or (1, S, 1)... ; a itself is never broadcast.
#include <cpdit/core/tensor.hpp>
#include <cpdit/core/weight.hpp>

#include <array>
#include <cstdint>
#include <vector>

namespace cpdit::kernels {

// ---- GEMM ---------------------------------------------------------------------------------------

// C = alpha * op(A) op(B) + beta * C, row-major (op = transpose when the flag is set), through
// oneDNN's sgemm. m x k times k x n; lda/ldb/ldc are row strides in elements.
void gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const float* a,
          int64_t lda, const float* b, int64_t ldb, float beta, float* c, int64_t ldc);

// y = x W^T + b. x (..., in) f32; weight (out, in), dispatched on its format: f32 runs the sgemm
// directly; bf16 and f16 are widened to f32 (exactly) for the call, except that a bf16 weight under
// MatmulPrecision::bf16 (core/precision.hpp, what --dtype bf16 sets) runs as linear_bf16_compute.
// GGUF's block formats (core/block_format.hpp) are decoded to f32 one tile of rows at a time (never
// whole) and multiplied by the sgemm.
// bias (out) f32, bf16, f16 or undefined. Returns (..., out) f32.
// `epilogue` gelu_tanh returns gelu(x W^T + b) (tanh form, as bias_gelu_): the AMX kernel applies it
// as it writes each tile of the product, the other paths in one pass after it.
enum class Epilogue { none, gelu_tanh };
Tensor linear(const Tensor& x, const Weight& weight, const Tensor& bias = {}, Epilogue epilogue = Epilogue::none);
// As linear, into a preallocated contiguous f32 `out` of shape (..., out) (reused across steps).
void linear_into(const Tensor& x, const Weight& weight, const Tensor& bias, Tensor& out);
// linear(cat(parts, -1), weight, bias) without the concatenation where the weight is f32 (or widened):
// each part multiplies its own columns of the weight, read in place, into the one output. The parts
// share every dim but the last. A layer over two wide activations side by side (FLUX.1's single
// block: attention output and MLP hidden, 15360 features) so never copies them into one tensor.
// bf16-compute and block-quantised weights run on the concatenation.
Tensor linear_cat(const std::vector<Tensor>& parts, const Weight& weight, const Tensor& bias = {});
// The bf16 matrix product of linear_bf16_compute. `fastest`: for at most 4 tokens (a modulation's
// one timestep embedding) `rows`, AVX512-BF16 dot products over the weight's rows in order, where the
// CPU has them; else AMX tiles where the CPU has them and Linux grants this process their state
// (amx_available()), else oneDNN's bf16 matmul (on a CPU where oneDNN has none, AVX2 alone: its f32
// sgemm over the bf16 values widened, the same products). `amx`, `onednn` and `rows` force one (tests, bench
// gemm); `amx` and `rows` throw unsupported where they are not available.
enum class Bf16Matmul { fastest, amx, onednn, rows };
bool amx_available();
// As linear with bf16 arithmetic, like a bf16 PyTorch model: x is rounded to bf16 (to nearest even),
// weight must be bf16, products accumulate in f32. At one thread the AMX kernel runs at several times
// the f32 sgemm's rate (bench gemm).
Tensor linear_bf16_compute(const Tensor& x, const Weight& weight, const Tensor& bias = {},
                           Bf16Matmul how = Bf16Matmul::fastest);

// The values of a weight as a contiguous f32 (rows, cols) tensor: block-quantised formats decoded as
// ggml lays them out (exactly as the gguf Python package's dequantize), dense ones widened.
Tensor dequantise(const Weight& weight);
// A dense (rows, cols) tensor encoded as Q8_0 (exactly as the gguf package's quantize) or Q4_K (a
// plain per-32 scale and min); cols must be whole blocks.
Weight quantise(const Tensor& values, const std::string& format);

// ---- Normalisation (over the last dim) -----------------------------------------------------------
// Weight and bias vectors may be f32, bf16 or f16 (a half-precision checkpoint's, as stored).

// (x - mean) / sqrt(var + eps) * weight + bias; var is the biased variance. weight and bias are
// (C) f32 or undefined (FLUX.1 and Wan's norm1/norm3 have no affine; Wan's norm2 has one).
Tensor layer_norm(const Tensor& x, const Tensor& weight, const Tensor& bias, float eps);
// x / sqrt(mean(x^2) + eps) * weight; weight (C) f32 or undefined. FLUX.1's QK norm is per head
// (last dim 128 of (B, S, H, 128)); Wan's spans the full D (last dim D of (B, S, D)).
Tensor rms_norm(const Tensor& x, const Tensor& weight, float eps);

// ---- Activations ---------------------------------------------------------------------------------

Tensor gelu(const Tensor& x, bool tanh_approx);  // tanh_approx = false: exact erf form
// x = gelu(x + bias) in place, x contiguous f32 (..., C), bias (C) or undefined: the first layer of a
// feed-forward net run without its bias, finished in one pass over its (large) output.
void bias_gelu_(Tensor& x, const Tensor& bias, bool tanh_approx);
Tensor silu(const Tensor& x);
Tensor quick_gelu(const Tensor& x);  // x * sigmoid(1.702 x), CLIP's activation
Tensor softmax(const Tensor& x);  // over the last dim, max-subtracted

// ---- RoPE ----------------------------------------------------------------------------------------

// Adjacent-pair rotation (pairs (2i, 2i+1)), as FLUX.1 and Wan apply it. x (B, S, H, D); cos and sin
// hold S*D values laid out (S, D) (shapes (S, D) and (1, S, 1, D) are both accepted), each value
// repeated for its pair (diffusers' repeat_interleave_real layout):
//   out[2i]   = x[2i]   * cos[2i]   - x[2i+1] * sin[2i]
//   out[2i+1] = x[2i+1] * cos[2i+1] + x[2i]   * sin[2i+1]
Tensor rope(const Tensor& x, const Tensor& cos, const Tensor& sin);
// In place on x (B, S, C), contiguous f32: x = rope(rms_norm(x + bias, weight, eps), cos, sin) in one pass,
// a q/k tail after a product run without its bias. bias (C) or undefined; weight (C) or undefined: a norm
// across heads (Wan, LTX), or (Dh): each head of Dh values normed alone (FLUX.1, Qwen-Image); cos and sin
// (S, W): whole rows rotated (W = C, LTX) or each head alike (W = Dh), or both undefined (no rotation).
void bias_rms_norm_rope_(Tensor& x, const Tensor& bias, const Tensor& weight, float eps, const Tensor& cos,
                         const Tensor& sin);

// ---- Elementwise ---------------------------------------------------------------------------------

Tensor add(const Tensor& a, const Tensor& b);  // a + b, b broadcast (see top)
Tensor mul(const Tensor& a, const Tensor& b);  // a * b, b broadcast
void add_(Tensor& a, const Tensor& b);          // a += b, b broadcast
// a += b * gate: the gated residual of both models (x = x + attn(...) * g). b has a's shape; gate
// broadcasts by the rule above, e.g. (B, 1, C) for a (B, S, C) (reshape a (B, C) gate to that).
void add_mul_(Tensor& a, const Tensor& b, const Tensor& gate);
// y = x + (y + bias) * gate, in place of y: a residual branch whose last product ran without its
// bias, finished in one pass over that product. x has y's shape; bias (C) or undefined; gate
// broadcasts as add_mul_'s, or is undefined for a plain residual.
void bias_residual_(Tensor& y, const Tensor& x, const Tensor& bias, const Tensor& gate);

// ---- AdaLN ---------------------------------------------------------------------------------------

// x * (1 + scale) + shift. x (B, S, C); scale and shift each (B, C) or (B, 1, C) (one row per batch,
// broadcast over S) or (B, S, C) (per token, Wan 2.2 TI2V).
Tensor modulate(const Tensor& x, const Tensor& scale, const Tensor& shift);
// modulate(layer_norm(x, {}, {}, eps), scale, shift) in one pass: the LN_fp32(x)(1 + sc) + sh of
// both models.
Tensor layer_norm_modulate(const Tensor& x, const Tensor& scale, const Tensor& shift, float eps);
// modulate(rms_norm(x, {}, eps), scale, shift) in one pass: LTX-Video's norm1/norm2 and modulation.
Tensor rms_norm_modulate(const Tensor& x, const Tensor& scale, const Tensor& shift, float eps);

// ---- Patch embedding -----------------------------------------------------------------------------

// Convolution with kernel == stride, as one GEMM. x (B, C, F, H, W), weight (O, C, kf, kh, kw) in a
// format linear computes with, bias (O) or undefined; F, H, W divisible by the kernel. Returns the
// TOKENS, (B, S, O) with S = F/kf * H/kh * W/kw in row-major (f, h, w) order: the Conv3d output
// already flattened and transposed, as Wan's patch_embedding is followed by
// flatten(2).transpose(1, 2). A 2-D convolution is the case x (B, C, 1, H, W), weight
// (O, C, 1, kh, kw), kernel {1, kh, kw}.
Tensor patch_embed(const Tensor& x, const Weight& weight, const Tensor& bias,
                   std::array<int64_t, 3> kernel);

}  // namespace cpdit::kernels
