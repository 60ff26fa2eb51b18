#include <cpdit/core/error.hpp>
#include <cpdit/pipeline/preview.hpp>

#include <algorithm>
#include <cmath>

namespace cpdit::pipeline {

namespace {
constexpr int kUpscale = 8;  // the VAE's spatial factor

// Rows: latent channel; columns: R, G, B (see the header for the source).
constexpr float kFactors[16][3] = {
    {-0.0346f, 0.0244f, 0.0681f},  {0.0034f, 0.0210f, 0.0687f},   {0.0275f, -0.0668f, -0.0433f},
    {-0.0174f, 0.0160f, 0.0617f},  {0.0859f, 0.0721f, 0.0329f},   {0.0004f, 0.0383f, 0.0115f},
    {0.0405f, 0.0861f, 0.0915f},   {-0.0236f, -0.0185f, -0.0259f}, {-0.0245f, 0.0250f, 0.1180f},
    {0.1008f, 0.0755f, -0.0421f},  {-0.0515f, 0.0201f, 0.0011f},  {0.0428f, -0.0012f, -0.0036f},
    {0.0817f, 0.0765f, 0.0749f},   {-0.1264f, -0.0522f, -0.1103f}, {-0.0280f, -0.0881f, -0.0499f},
    {-0.1262f, -0.0982f, -0.0778f}};
constexpr float kBias[3] = {-0.0329f, -0.0718f, -0.0851f};
}  // namespace

std::vector<uint8_t> flux_latent_preview(const Tensor& latents, int64_t index) {
  CPDIT_CHECK(latents.dim() == 4 && latents.size(1) == 16, invalid_argument,
              "a FLUX.1 preview needs latents (B, 16, h, w), got ", latents.describe());
  CPDIT_CHECK(index >= 0 && index < latents.size(0), invalid_argument, "preview of image ", index, " of a batch of ",
              latents.size(0));
  Tensor x = latents.select(0, index).to(DType::f32).contiguous();
  const int64_t h = x.size(1), w = x.size(2), plane = h * w;
  const float* p = x.data<float>();
  const int64_t out_w = w * kUpscale;
  std::vector<uint8_t> rgb(size_t(h * kUpscale * out_w * 3));
  for (int64_t y = 0; y < h; ++y)
    for (int64_t xpos = 0; xpos < w; ++xpos) {
      uint8_t pixel[3];
      for (int c = 0; c < 3; ++c) {
        float v = kBias[c];
        for (int k = 0; k < 16; ++k) v += kFactors[k][c] * p[k * plane + y * w + xpos];
        pixel[c] = uint8_t(std::lround(std::clamp((v + 1.0f) * 0.5f, 0.0f, 1.0f) * 255.0f));
      }
      for (int64_t dy = 0; dy < kUpscale; ++dy)
        for (int64_t dx = 0; dx < kUpscale; ++dx)
          std::copy(pixel, pixel + 3, &rgb[size_t(((y * kUpscale + dy) * out_w + xpos * kUpscale + dx) * 3)]);
    }
  return rgb;
}

}  // namespace cpdit::pipeline
