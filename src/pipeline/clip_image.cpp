#include <cpdit/core/error.hpp>
#include <cpdit/io/json.hpp>
#include <cpdit/io/image.hpp>
#include <cpdit/pipeline/clip_image.hpp>

#include "pipeline/pil_resample.hpp"

#include <nlohmann/json.hpp>

namespace cpdit::pipeline {

ClipImageProcessing ClipImageProcessing::from_file(const std::string& path) {
  const nlohmann::json j = io::read_json(path);
  ClipImageProcessing p;
  try {
    CPDIT_CHECK(j.is_object(), invalid_argument, "must be a JSON object");
    CPDIT_CHECK(j.value("do_resize", true) && j.value("do_center_crop", true) && j.value("do_rescale", true) &&
                    j.value("do_normalize", true),
                unsupported, "only the full CLIP processing is served (do_resize, do_center_crop, do_rescale and "
                "do_normalize true)");
    if (j.contains("size")) p.shortest_edge = j.at("size").at("shortest_edge").get<int64_t>();
    if (j.contains("crop_size")) {
      p.crop_height = j.at("crop_size").at("height").get<int64_t>();
      p.crop_width = j.at("crop_size").at("width").get<int64_t>();
    }
    p.rescale_factor = j.value("rescale_factor", p.rescale_factor);
    p.image_mean = j.value("image_mean", p.image_mean);
    p.image_std = j.value("image_std", p.image_std);
    p.resample = j.value("resample", p.resample);
  } catch (const nlohmann::json::exception& e) {
    fail(ErrorKind::invalid_argument, path, ": not a CLIP image processor config: ", e.what());
  } catch (const Error& e) {
    fail(e.kind(), path, ": ", e.what());
  }
  CPDIT_CHECK(p.shortest_edge >= 1 && p.crop_height >= 1 && p.crop_width >= 1 && p.image_mean.size() == 3 &&
                  p.image_std.size() == 3,
              invalid_argument, path, ": size, crop_size must be positive and image_mean, image_std 3 values each");
  for (double s : p.image_std) CPDIT_CHECK(s > 0, invalid_argument, path, ": image_std must be positive");
  CPDIT_CHECK(p.resample == 3 || p.resample == 1, unsupported, path, ": resample ", p.resample,
              " is not served (3 bicubic, 1 Lanczos)");
  return p;
}

Tensor clip_image_pixels(const std::string& path, const ClipImageProcessing& p) {
  const io::RgbImage image = io::read_image(path);
  // The shortest edge to `shortest_edge`, the longer one scaled alike and truncated, as transformers'
  // get_resize_output_image_size computes it (in double).
  const bool wide = image.width > image.height;
  const int64_t shorter = wide ? image.height : image.width, longer = wide ? image.width : image.height;
  const int64_t scaled = int64_t(double(p.shortest_edge) * double(longer) / double(shorter));
  const int64_t width = wide ? scaled : p.shortest_edge, height = wide ? p.shortest_edge : scaled;
  const io::RgbImage resized = pil_resize(image, width, height,
                                          p.resample == 3 ? ResampleFilter::bicubic : ResampleFilter::lanczos);
  // The centre crop from (size - crop) // 2 (Python's floor division); where the image is smaller than
  // the crop, zeros around it (the crop's padding).
  const int64_t ch = p.crop_height, cw = p.crop_width;
  auto start = [](int64_t size, int64_t crop) { return size >= crop ? (size - crop) / 2 : -((crop - size + 1) / 2); };
  const int64_t top = start(height, ch), left = start(width, cw);
  Tensor pixels = Tensor::empty({1, 3, ch, cw});
  float* out = pixels.data<float>();
  for (int64_t c = 0; c < 3; ++c) {
    const float mean = float(p.image_mean[size_t(c)]), std = float(p.image_std[size_t(c)]);
    for (int64_t y = 0; y < ch; ++y)
      for (int64_t x = 0; x < cw; ++x) {
        const int64_t sy = top + y, sx = left + x;
        const bool inside = sy >= 0 && sy < height && sx >= 0 && sx < width;
        const uint8_t v = inside ? resized.rgb[size_t((sy * width + sx) * 3 + c)] : 0;
        const float unit = float(double(v) * p.rescale_factor);
        out[(c * ch + y) * cw + x] = (unit - mean) / std;
      }
  }
  return pixels;
}

}  // namespace cpdit::pipeline
