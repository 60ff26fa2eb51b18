#include <cpdit/core/error.hpp>
#include <cpdit/io/png.hpp>
#include <cpdit/pipeline/skyreels_image.hpp>


namespace cpdit::pipeline {

Tensor image_pixels(const std::string& png_path, int64_t height, int64_t width) {
  const io::RgbImage image = io::read_png(png_path);
  CPDIT_CHECK(image.height == height && image.width == width, invalid_argument, png_path, " is ", image.width, "x",
              image.height, " pixels; the video is ", width, "x", height, ": resize the image to it first");
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

}  // namespace cpdit::pipeline
