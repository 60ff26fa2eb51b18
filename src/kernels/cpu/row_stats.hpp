#pragma once
// Per-row statistics for the norm kernels. Two passes over the row (mean, then centred squares)
// keep LayerNorm accurate for rows with a large mean; rows are short enough to stay in cache.
#include <cmath>
#include <cstdint>

namespace cpdit::kernels::detail {

struct MeanRstd {
  float mean;
  float rstd;  // 1 / sqrt(var + eps)
};

inline MeanRstd mean_rstd(const float* row, int64_t c, float eps) {
  float sum = 0.0f;
#pragma omp simd reduction(+ : sum)
  for (int64_t j = 0; j < c; ++j) sum += row[j];
  const float mean = sum / float(c);
  float squares = 0.0f;
#pragma omp simd reduction(+ : squares)
  for (int64_t j = 0; j < c; ++j) squares += (row[j] - mean) * (row[j] - mean);
  return {mean, 1.0f / std::sqrt(squares / float(c) + eps)};
}

inline float rms_rstd(const float* row, int64_t c, float eps) {
  float squares = 0.0f;
#pragma omp simd reduction(+ : squares)
  for (int64_t j = 0; j < c; ++j) squares += row[j] * row[j];
  return 1.0f / std::sqrt(squares / float(c) + eps);
}

}  // namespace cpdit::kernels::detail
