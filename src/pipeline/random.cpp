#include <cpdit/core/error.hpp>
#include <cpdit/core/threads.hpp>
#include <cpdit/pipeline/random.hpp>

#include <algorithm>
#include <cmath>
#include <numbers>

namespace cpdit::pipeline {

std::array<uint32_t, 4> philox4x32_10(std::array<uint32_t, 4> ctr, std::array<uint32_t, 2> key) {
  constexpr uint64_t kMul0 = 0xD2511F53u, kMul1 = 0xCD9E8D57u;
  constexpr uint32_t kWeyl0 = 0x9E3779B9u, kWeyl1 = 0xBB67AE85u;
  for (int round = 0; round < 10; ++round) {
    if (round > 0) {
      key[0] += kWeyl0;
      key[1] += kWeyl1;
    }
    const uint64_t p0 = kMul0 * ctr[0], p1 = kMul1 * ctr[2];
    ctr = {uint32_t(p1 >> 32) ^ ctr[1] ^ key[0], uint32_t(p1), uint32_t(p0 >> 32) ^ ctr[3] ^ key[1],
           uint32_t(p0)};
  }
  return ctr;
}

namespace {

// Four N(0, 1) values from one Philox block: Box-Muller on the pairs (w0, w1) and (w2, w3), in
// double. Uniforms are (w + 0.5)·2^-32, strictly inside (0, 1), so the logarithm is finite.
std::array<float, 4> normal_block(uint64_t seed, uint64_t block) {
  const std::array<uint32_t, 4> w =
      philox4x32_10({uint32_t(block), uint32_t(block >> 32), 0, 0}, {uint32_t(seed), uint32_t(seed >> 32)});
  std::array<float, 4> out;
  for (int pair = 0; pair < 2; ++pair) {
    const double u1 = (double(w[2 * pair]) + 0.5) * 0x1p-32;
    const double u2 = (double(w[2 * pair + 1]) + 0.5) * 0x1p-32;
    const double radius = std::sqrt(-2.0 * std::log(u1));
    const double angle = 2.0 * std::numbers::pi * u2;
    out[2 * pair] = float(radius * std::cos(angle));
    out[2 * pair + 1] = float(radius * std::sin(angle));
  }
  return out;
}

}  // namespace

void fill_normal(uint64_t seed, uint64_t first_index, float* out, int64_t count) {
  CPDIT_CHECK(count >= 0, invalid_argument, "fill_normal: negative count ", count);
  int64_t done = 0;
  while (done < count) {
    const uint64_t index = first_index + uint64_t(done);
    const std::array<float, 4> block = normal_block(seed, index / 4);
    for (uint64_t lane = index % 4; lane < 4 && done < count; ++lane) out[done++] = block[lane];
  }
}

void fill_uniform(uint64_t seed, uint64_t first_index, float* out, int64_t count, float low, float high) {
  CPDIT_CHECK(count >= 0, invalid_argument, "fill_uniform: negative count ", count);
  const double width = double(high) - double(low);
  int64_t done = 0;
  while (done < count) {
    const uint64_t index = first_index + uint64_t(done);
    // Counter word 2 = 1 keeps this stream apart from the normal one for the same seed.
    const std::array<uint32_t, 4> w = philox4x32_10({uint32_t(index / 4), uint32_t((index / 4) >> 32), 1, 0},
                                                     {uint32_t(seed), uint32_t(seed >> 32)});
    for (uint64_t lane = index % 4; lane < 4 && done < count; ++lane)
      out[done++] = float(double(low) + width * ((double(w[lane]) + 0.5) * 0x1p-32));
  }
}

Tensor randn(const Shape& shape, uint64_t seed) {
  Tensor t = Tensor::empty(shape, DType::f32);
  float* out = t.data<float>();
  const int64_t n = t.numel(), chunk = 1 << 14;  // chunks are independent: any split gives the same values
#pragma omp parallel for num_threads(compute_threads()) schedule(static) if (n > 4 * chunk)
  for (int64_t begin = 0; begin < n; begin += chunk) {
    fill_normal(seed, uint64_t(begin), out + begin, std::min(chunk, n - begin));
  }
  return t;
}

}  // namespace cpdit::pipeline
