#include "pipeline/pil_resample.hpp"

#include <cpdit/core/error.hpp>

#include <algorithm>
#include <cmath>
#include <numbers>
#include <vector>

namespace cpdit::pipeline {
namespace {

// PIL's filters: bicubic with a = -0.5 on [-2, 2], Lanczos-3 (sinc windowed by sinc(x / 3)) on [-3, 3).
double bicubic_weight(double x) {
  constexpr double a = -0.5;
  x = std::fabs(x);
  if (x < 1.0) return ((a + 2.0) * x - (a + 3.0)) * x * x + 1;
  if (x < 2.0) return (((x - 5) * x + 8) * x - 4) * a;
  return 0.0;
}

double sinc(double x) {
  if (x == 0.0) return 1.0;
  x *= std::numbers::pi;
  return std::sin(x) / x;
}

double lanczos_weight(double x) { return -3.0 <= x && x < 3.0 ? sinc(x) * sinc(x / 3) : 0.0; }

constexpr int kFractionBits = 22;  // 32 bits less 8 for the value and 2 for the filter's overshoot

// The taps of one output pixel: input pixels [first, first + weights.size()) and their fixed-point weights.
struct Taps {
  int64_t first = 0;
  std::vector<int32_t> weights;
};

// One pass's taps, input size `in` to `out` over the whole input: the filter centred on each output
// pixel's centre, widened by the downscaling factor, its weights normalised to sum to 1 in double and
// then rounded half away from zero to fixed point.
std::vector<Taps> pass_taps(int64_t in, int64_t out, ResampleFilter filter) {
  const double support_unit = filter == ResampleFilter::lanczos ? 3.0 : 2.0;
  // PIL takes the box edges as float and divides in double.
  const double scale = double(float(in)) / double(out);
  const double filter_scale = std::max(scale, 1.0);
  const double support = support_unit * filter_scale;
  std::vector<Taps> taps(static_cast<size_t>(out));
  for (int64_t o = 0; o < out; ++o) {
    const double center = (double(o) + 0.5) * scale;
    const int64_t first = std::max<int64_t>(int64_t(center - support + 0.5), 0);
    const int64_t end = std::min<int64_t>(int64_t(center + support + 0.5), in);
    const double step = 1.0 / filter_scale;  // multiplied, not divided by, as PIL rounds it
    std::vector<double> w;
    double sum = 0.0;
    for (int64_t i = first; i < end; ++i) {
      const double x = (double(i) - center + 0.5) * step;
      w.push_back(filter == ResampleFilter::lanczos ? lanczos_weight(x) : bicubic_weight(x));
      sum += w.back();
    }
    Taps& t = taps[size_t(o)];
    t.first = first;
    for (double v : w) {
      const double unit = sum != 0.0 ? v / sum : v;
      const double scaled = unit * double(1 << kFractionBits);
      t.weights.push_back(int32_t(unit < 0 ? -0.5 + scaled : 0.5 + scaled));
    }
  }
  return taps;
}

// A fixed-point sum back to 8 bits: the shift floors (negative sums become 0), then the clamp.
uint8_t to_8bit(int32_t sum) { return uint8_t(std::clamp(sum >> kFractionBits, 0, 255)); }

// One pass: `image` resampled to `size` rows (vertical) or columns, the other dimension kept.
io::RgbImage resample_pass(const io::RgbImage& image, int64_t size, bool vertical, ResampleFilter filter) {
  const std::vector<Taps> taps = pass_taps(vertical ? image.height : image.width, size, filter);
  io::RgbImage out{vertical ? image.width : size, vertical ? size : image.height, {}};
  out.rgb.resize(size_t(out.width * out.height * 3));
  // Input pixel k along the pass for output pixel (y, x): its row or its column moves.
  const int64_t step = vertical ? image.width * 3 : 3;
  for (int64_t y = 0; y < out.height; ++y)
    for (int64_t x = 0; x < out.width; ++x) {
      const Taps& t = taps[size_t(vertical ? y : x)];
      const uint8_t* first = image.rgb.data() + (vertical ? (t.first * image.width + x) * 3 : (y * image.width + t.first) * 3);
      for (int64_t c = 0; c < 3; ++c) {
        int32_t sum = 1 << (kFractionBits - 1);  // rounds the final shift to nearest
        for (size_t k = 0; k < t.weights.size(); ++k) sum += int32_t(first[int64_t(k) * step + c]) * t.weights[k];
        out.rgb[size_t((y * out.width + x) * 3 + c)] = to_8bit(sum);
      }
    }
  return out;
}

}  // namespace

io::RgbImage pil_resize(const io::RgbImage& image, int64_t width, int64_t height, ResampleFilter filter) {
  CPDIT_CHECK(width >= 1 && height >= 1 && image.width >= 1 && image.height >= 1, invalid_argument,
              "cannot resize a ", image.width, "x", image.height, " image to ", width, "x", height);
  // Each 8-bit rounding sits between the passes, so their order matters: Pillow 13 runs the vertical
  // pass first when it shrinks the height and the width grows, else the horizontal one (found by
  // comparing both orders with Pillow over shrinking, stretching and mixed sizes); a dimension that
  // keeps its size has no pass.
  const bool vertical_first = height < image.height && width > image.width;
  io::RgbImage out = image;
  for (bool vertical : {vertical_first, !vertical_first}) {
    const int64_t size = vertical ? height : width;
    if (size != (vertical ? out.height : out.width)) out = resample_pass(out, size, vertical, filter);
  }
  return out;
}

}  // namespace cpdit::pipeline
