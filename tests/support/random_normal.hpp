#pragma once
// Seeded standard-normal test tensors (times `stddev`): the same numbers on every run and machine
// that share the standard library's mt19937 and normal_distribution.
#include <cpdit/core/tensor.hpp>

#include <random>
#include <vector>

namespace cpdit::testing {

// Drawn from `rng`, which the caller keeps: several tensors of one case come from one seed.
inline Tensor random_normal(const Shape& shape, std::mt19937& rng, float stddev = 1.0f) {
  std::normal_distribution<float> normal(0.0f, stddev);
  std::vector<float> values(size_t(shape_numel(shape)));
  for (float& x : values) x = normal(rng);
  return Tensor::from_vector(values, shape);
}

inline Tensor random_normal(const Shape& shape, unsigned seed, float stddev = 1.0f) {
  std::mt19937 rng(seed);
  return random_normal(shape, rng, stddev);
}

}  // namespace cpdit::testing
