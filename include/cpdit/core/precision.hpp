#pragma once
// The arithmetic of the process's matrix products. exact_f32 (the default): every product in f32,
// bf16 and f16 weights widened exactly, so results match an f32 model. bf16: a Linear whose weight
// is bf16 rounds its activations to bf16 and multiplies with bf16 dot products accumulated in f32,
// as a bf16 PyTorch model does (twice the f32 rate on AVX512-BF16). Norms, modulation, softmax
// statistics and residual adds stay f32 either way.
//
// One setting for the process, not per thread: one process runs one model at one precision, and
// ranks that are threads of it must all compute alike.
namespace cpdit {

enum class MatmulPrecision { exact_f32, bf16 };

MatmulPrecision matmul_precision();
void set_matmul_precision(MatmulPrecision p);

// Sets the precision for a scope (a test, a command) and restores the previous one.
class ScopedMatmulPrecision {
 public:
  explicit ScopedMatmulPrecision(MatmulPrecision p);
  ~ScopedMatmulPrecision();
  ScopedMatmulPrecision(const ScopedMatmulPrecision&) = delete;
  ScopedMatmulPrecision& operator=(const ScopedMatmulPrecision&) = delete;

 private:
  MatmulPrecision previous_;
};

}  // namespace cpdit
