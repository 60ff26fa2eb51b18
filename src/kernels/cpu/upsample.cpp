// Nearest-neighbour x2 upsampling on the last two dims: every input pixel becomes a 2x2 block.
#include "kernels/cpu/checks.hpp"

#include <cpdit/core/threads.hpp>
#include <cpdit/kernels/image.hpp>

#include <algorithm>

namespace cpdit::kernels {

Tensor upsample_nearest2x(const Tensor& x_in) {
  detail::check_min_dims(x_in, 2, "upsample_nearest2x", "x");
  Tensor x = detail::f32_input(x_in, "upsample_nearest2x", "x");
  const int64_t h = x.size(-2), w = x.size(-1), planes = h * w == 0 ? 0 : x.numel() / (h * w);
  Shape shape = x.shape();
  shape[shape.size() - 2] = 2 * h;
  shape[shape.size() - 1] = 2 * w;
  Tensor out = Tensor::empty(shape);
  const float* src = x.data<float>();
  float* dst = out.data<float>();
#pragma omp parallel for num_threads(compute_threads()) if (out.numel() >= detail::kParallelMin)
  for (int64_t pr = 0; pr < planes * h; ++pr) {
    const float* in = src + pr * w;
    float* top = dst + pr * 4 * w;  // output rows 2r and 2r+1 of the same plane are adjacent
#pragma omp simd
    for (int64_t j = 0; j < w; ++j) top[2 * j] = top[2 * j + 1] = in[j];
    std::copy(top, top + 2 * w, top + 2 * w);
  }
  return out;
}

}  // namespace cpdit::kernels
