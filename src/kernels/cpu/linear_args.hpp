#pragma once
// The checked arguments of a Linear layer, shared by its f32 and bf16-compute paths.
#include "kernels/cpu/checks.hpp"

#include <cpdit/core/weight.hpp>
#include <cpdit/kernels/cpu.hpp>

namespace cpdit::kernels::detail {

struct LinearArgs {
  Tensor x;       // contiguous f32 (..., k)
  Tensor weight;  // contiguous (n, k), f32, bf16 or f16; undefined for a quantised weight
  Weight blocks;  // the weight when it is block-quantised (only where the kernel allows it)
  Tensor bias;    // contiguous f32 (n) or undefined
  Epilogue epilogue = Epilogue::none;  // applied to x W^T + b
  int64_t m = 0, n = 0, k = 0;
  Shape out_shape;  // (..., n)
};

// `quantised_ok`: the kernel computes from block-quantised weights too (else they are refused).
inline LinearArgs linear_args(const Tensor& x, const Weight& w, const Tensor& bias, const char* kernel,
                              bool quantised_ok = false) {
  check_min_dims(x, 1, kernel, "x");
  if (!quantised_ok || !w.is_quantised()) w.values(kernel);  // refuses a quantised weight, naming the kernel
  CPDIT_CHECK(w.defined() && w.shape().size() == 2, invalid_argument, kernel, ": weight must be (out, in), got ",
              w.describe());
  CPDIT_CHECK(w.shape()[1] == x.size(-1), invalid_argument, kernel, ": x ", x.describe(), " has ", x.size(-1),
              " features but weight ", w.describe(), " expects ", w.shape()[1]);
  LinearArgs a;
  a.x = f32_input(x, kernel, "x");
  if (w.is_quantised()) a.blocks = w;
  else a.weight = w.values(kernel).contiguous();
  a.n = w.shape()[0];
  a.k = x.size(-1);
  a.bias = optional_vector(bias, a.n, kernel, "bias");
  a.out_shape = x.shape();
  a.out_shape.back() = a.n;
  a.m = shape_numel(Shape(x.shape().begin(), x.shape().end() - 1));
  return a;
}

// y (m, n) = epilogue(y + bias) in place where a.epilogue is not none, bias (n) or undefined, for the
// products that do not fuse it (all but the AMX kernel's).
inline void apply_epilogue(const LinearArgs& a, float* y, const Tensor& bias = {}) {
  if (a.epilogue == Epilogue::none) return;
  Tensor rows = Tensor::borrow(y, {a.m, a.n}, DType::f32, nullptr);
  bias_gelu_(rows, bias, /*tanh_approx=*/true);
}

// out = epilogue(x W^T + b) with x rounded to bf16 and bf16 products accumulated in f32, on `how`
// (linear_bf16_compute.cpp); a.weight must be bf16, out contiguous f32 of a.out_shape.
void bf16_matmul_into(const LinearArgs& a, Tensor& out, Bf16Matmul how = Bf16Matmul::fastest);

// The same product and epilogue for at most kBf16RowsMaxTokens rows of x, by AVX512-BF16 dot products
// over the weight's rows in order (linear_bf16_rows.cpp): at such m a Linear is bound by the weight's
// reads. Needs kernel_isa() >= avx512_bf16 and a bf16 weight.
constexpr int64_t kBf16RowsMaxTokens = 4;
void bf16_rows_into(const LinearArgs& a, float* y);

// The same product and epilogue on AMX tiles into y (m, n) (linear_amx.cpp); available only where amx::granted().
// A block-quantised weight (a.blocks) is decoded to bf16 a run of rows at a time.
bool amx_linear_available();
void amx_linear_into(const LinearArgs& a, float* y);

// y = epilogue(x W^T + beta * y) for a block-quantised W, y contiguous (m, n): each tile of W's rows is decoded
// to f32 and multiplied by the sgemm (linear_quantised.cpp); under MatmulPrecision::bf16, Q8_0 and
// Q4_0 go to linear_int8 where the CPU has AVX512-VNNI.
void linear_quantised(const LinearArgs& a, float beta, float* y);

// The same for a Q8_0 or Q4_0 W by int8 dot products, the activations quantised per 32-block
// (linear_int8.cpp). False, with nothing done, for another format or a CPU (or kernel_isa()) without
// AVX512-VNNI.
bool linear_int8(const LinearArgs& a, float beta, float* y);


}  // namespace cpdit::kernels::detail
