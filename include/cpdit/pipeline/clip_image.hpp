#pragma once
// The image processing in front of CLIPVisionModel (Wan 2.1's image-to-video image encoder):
// transformers' CLIPImageProcessor as its PIL backend runs it (transformers 5 uses the PIL backend
// where torchvision is absent; its torchvision backend resizes with PyTorch's kernel, within a level
// of 255 of this): the shortest edge resized to size, the aspect ratio kept (PIL's resize, bit for
// bit), a centre crop, x * rescale_factor in double then f32, (x - mean) / std per channel in f32.
#include <cpdit/core/tensor.hpp>

#include <cstdint>
#include <string>
#include <vector>

namespace cpdit::pipeline {

// preprocessor_config.json's fields, with CLIPImageProcessor's defaults.
struct ClipImageProcessing {
  int64_t shortest_edge = 224;
  int64_t crop_height = 224, crop_width = 224;
  double rescale_factor = 1.0 / 255.0;
  std::vector<double> image_mean{0.48145466, 0.4578275, 0.40821073};
  std::vector<double> image_std{0.26862954, 0.26130258, 0.27577711};
  int resample = 3;  // PIL's filter number: 3 bicubic (CLIP's), 1 Lanczos; others are refused

  // A preprocessor_config.json (a pipeline folder's image_processor/): a field of the wrong type, a
  // resize or crop it turns off, or a filter not served is one line naming the file.
  static ClipImageProcessing from_file(const std::string& path);
};

// The picture at `path` (PNG, JPEG or WebP: io::read_image) as the processor's pixel_values:
// (1, 3, crop_height, crop_width) f32.
Tensor clip_image_pixels(const std::string& path, const ClipImageProcessing& processing);

}  // namespace cpdit::pipeline
