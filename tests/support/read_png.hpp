#pragma once
// Reads a PNG back as 8-bit RGB through libpng's simplified API, for tests of what cpdit writes.
#include <png.h>

#include <cstdint>
#include <string>
#include <vector>

namespace cpdit::testing {

struct RgbImage {
  int64_t width = 0, height = 0;
  std::vector<uint8_t> rgb;  // height * width * 3, row-major; empty when the file is not a PNG
};

inline RgbImage read_png(const std::string& path) {
  png_image image{};
  image.version = PNG_IMAGE_VERSION;
  if (!png_image_begin_read_from_file(&image, path.c_str())) return {};
  image.format = PNG_FORMAT_RGB;
  RgbImage out{image.width, image.height, std::vector<uint8_t>(PNG_IMAGE_SIZE(image))};
  if (!png_image_finish_read(&image, nullptr, out.rgb.data(), 0, nullptr)) return {};
  return out;
}

}  // namespace cpdit::testing
