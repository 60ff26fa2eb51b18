#pragma once
// Shared by the VAE tests: the vae_kl_tiny / vae_wan_tiny fixtures (diffusers' own numbers) and the
// comparison relative to a tensor's range that the fixtures' README prescribes.
#include <cpdit/core/tensor.hpp>
#include <cpdit/io/safetensors.hpp>
#include <cpdit/nn/module.hpp>

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>

namespace cpdit::models::vae::testing {

inline std::string fixture_dir(const std::string& name) { return std::string(CPDIT_TEST_DATA) + "/fixtures/" + name; }

// The fixtures keep their weights in weights.safetensors beside config.json.
inline std::string fixture_weights(const std::string& name) { return fixture_dir(name) + "/weights.safetensors"; }
inline std::string fixture_config(const std::string& name) { return fixture_dir(name) + "/config.json"; }

inline nn::TensorMap fixture_file(const std::string& name, const std::string& file) {
  return io::load_safetensors(fixture_dir(name) + "/" + file + ".safetensors");
}

// max |got - want| / (max(want) - min(want)): float32 against float64 runs of these models differ
// by ~1e-6 of the range, the porting mistakes the README lists by 1e-4 or more.
inline double relative_to_range(const Tensor& got_in, const Tensor& want_in) {
  EXPECT_EQ(got_in.shape(), want_in.shape());
  if (got_in.shape() != want_in.shape()) return INFINITY;
  const Tensor got = got_in.to(DType::f32), want = want_in.to(DType::f32);
  const float* g = got.data<float>();
  const float* w = want.data<float>();
  double lo = INFINITY, hi = -INFINITY, worst = 0.0;
  for (int64_t i = 0; i < want.numel(); ++i) {
    lo = std::min(lo, double(w[i]));
    hi = std::max(hi, double(w[i]));
    const double d = std::abs(double(g[i]) - double(w[i]));
    worst = std::isnan(d) ? INFINITY : std::max(worst, d);
  }
  return worst / std::max(hi - lo, 1e-30);
}

}  // namespace cpdit::models::vae::testing
