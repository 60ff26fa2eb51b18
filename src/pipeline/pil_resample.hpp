#pragma once
// PIL's Image.resize of an 8-bit RGB image, bit for bit, for the image processors of the pipelines
// (diffusers' VaeImageProcessor resizes with Lanczos, CLIPImageProcessor with bicubic): separable
// filters on the whole input box, the two passes in Pillow's order, coefficients in fixed point with
// 22 fractional bits, each pass rounded and clamped to 8 bits.
#include <cpdit/io/image.hpp>

#include <cstdint>

namespace cpdit::pipeline {

enum class ResampleFilter { bicubic, lanczos };

// `image` resized to width x height (each at least 1).
io::RgbImage pil_resize(const io::RgbImage& image, int64_t width, int64_t height, ResampleFilter filter);

}  // namespace cpdit::pipeline
