#pragma once
// Shared by the text-encoder tests: the t5_tiny, umt5_tiny and clip_text_tiny fixtures (transformers'
// own numbers) and the comparison they call for.
#include "support/model_fixture.hpp"
#include "support/relative_error.hpp"

namespace cpdit::models::text::testing {

using cpdit::testing::fixture_dir;

// The fixture README: float32 and float64 runs of these models differ by <= 2.3e-6 on outputs of
// magnitude 0.2 to 4.7, and the smallest porting mistake (exact GELU for tanh in T5) moves them by
// 2e-4 relative; 1e-5 of the output's range separates the two.
constexpr double kRelativeTolerance = 1e-5;

// max |got - want| / range(want)
inline double relative_error(const Tensor& got, const Tensor& want) {
  return cpdit::testing::relative_to_range(got, want);
}

}  // namespace cpdit::models::text::testing
