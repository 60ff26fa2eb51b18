#pragma once
// Decoded pixels (pipeline/vae_decode.hpp's postprocess_pixels) to PNG files, each written atomically.
#include <cpdit/core/tensor.hpp>

#include <string>
#include <vector>

namespace cpdit::pipeline {

// The files write_image_pngs writes for `batch` images: `path` itself for one; for more, one per item,
// the item's index before the extension (out.png -> out_0.png, out_1.png).
std::vector<std::string> image_png_paths(const std::string& path, int64_t batch);
// image (B, H, W, 3) in [0, 1].
void write_image_pngs(const std::string& path, const Tensor& image);

// video (B, F, H, W, 3) in [0, 1] as dir/frame_00000.png, frame_00001.png, ...; a batch of several
// videos puts item b's frames under dir/b/. The folders are created when absent.
void write_frame_pngs(const std::string& dir, const Tensor& video);

}  // namespace cpdit::pipeline
