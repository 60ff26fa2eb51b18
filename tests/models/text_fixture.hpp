#pragma once
// Shared by the text-encoder tests: the t5_tiny, umt5_tiny and clip_text_tiny fixtures (transformers'
// own numbers) and the comparison they call for.
#include <cpdit/core/tensor.hpp>
#include <cpdit/io/safetensors.hpp>

#include <algorithm>
#include <string>

namespace cpdit::models::text::testing {

inline std::string fixture_dir(const std::string& name) { return std::string(CPDIT_TEST_DATA) + "/fixtures/" + name; }

// The fixture README: float32 and float64 runs of these models differ by <= 2.3e-6 on outputs of
// magnitude 0.2 to 4.7, and the smallest porting mistake (exact GELU for tanh in T5) moves them by
// 2e-4 relative; 1e-5 of the output's range separates the two.
constexpr double kRelativeTolerance = 1e-5;

inline double value_range(const Tensor& t) {
  const Tensor f = t.to(DType::f32).contiguous();
  const float* p = f.data<float>();
  const auto [lo, hi] = std::minmax_element(p, p + f.numel());
  return double(*hi) - double(*lo);
}

// max |got - want| / range(want)
inline double relative_error(const Tensor& got, const Tensor& want) {
  return max_abs_diff(got, want) / value_range(want);
}

}  // namespace cpdit::models::text::testing
