#include <cpdit/core/error.hpp>
#include <cpdit/io/image.hpp>
#include <cpdit/pipeline/skyreels_image.hpp>
#include <cpdit/pipeline/wan_image.hpp>

#include "pipeline/pil_resample.hpp"

namespace cpdit::pipeline {

Tensor image_pixels(const std::string& path, int64_t height, int64_t width) {
  CPDIT_CHECK(height >= 1 && width >= 1, invalid_argument, "an image of ", width, "x", height, " pixels is empty");
  const io::RgbImage image = pil_resize(io::read_image(path), width, height, ResampleFilter::lanczos);
  Tensor pixels = Tensor::empty({1, 3, height, width});
  float* out = pixels.data<float>();
  const int64_t plane = height * width;
  for (int64_t i = 0; i < plane; ++i)
    for (int64_t c = 0; c < 3; ++c) {
      // Two f32 roundings, as numpy's x / 255.0 and then 2 x - 1 on float32 arrays.
      const float unit = float(image.rgb[size_t(3 * i + c)]) / 255.0f;
      out[c * plane + i] = 2.0f * unit - 1.0f;
    }
  return pixels;
}

Tensor image_latents(const models::LoadedModel& vae, const Tensor& pixels) {
  CPDIT_CHECK(pixels.dim() == 4 && pixels.size(1) == 3, invalid_argument, "images to encode are (B, 3, H, W), got ",
              pixels.describe());
  return wan_video_latents(vae, pixels.contiguous().reshape({pixels.size(0), 3, 1, pixels.size(2), pixels.size(3)}));
}

}  // namespace cpdit::pipeline
