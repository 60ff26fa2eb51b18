// T5's relative-position bias: buckets of (key - query) looked up in a per-layer table of one value
// per head.
#include <cpdit/core/error.hpp>
#include <cpdit/models/text/t5.hpp>

#include <algorithm>
#include <cmath>
#include <limits>

namespace cpdit::models::text {

int64_t relative_position_bucket(int64_t relative_position, int64_t num_buckets, int64_t max_distance) {
  const int64_t half = num_buckets / 2;  // bidirectional: keys after the query use the upper half
  const int64_t base = relative_position > 0 ? half : 0;
  const int64_t distance = std::abs(relative_position);
  const int64_t max_exact = half / 2;
  if (distance < max_exact) return base + distance;
  // In float32, operation by operation, as PyTorch evaluates it: the truncation to an integer
  // decides the bucket, so a different rounding could move a distance on a bucket boundary.
  const float log_ratio = std::log(float(distance) / float(max_exact)) / float(std::log(double(max_distance) / double(max_exact)));
  const int64_t large = max_exact + int64_t(log_ratio * float(half - max_exact));
  return base + std::min(large, half - 1);
}

Tensor relative_position_bias(const Tensor& table_in, int64_t seq_len, int64_t num_buckets, int64_t max_distance,
                              const Tensor& attention_mask) {
  const Tensor table = table_in.to(DType::f32);
  CPDIT_CHECK(table.dim() == 2 && table.size(0) == num_buckets, internal, "relative bias table ", table.describe(),
              " does not have ", num_buckets, " buckets");
  const int64_t heads = table.size(1);
  const int64_t batch = attention_mask.defined() ? attention_mask.size(0) : 1;
  Tensor bias = Tensor::empty({batch, heads, seq_len, seq_len});
  const float* t = table.data<float>();
  float* out = bias.data<float>();
  // transformers adds (1 - mask) * finfo.min: a padded key's logit becomes float's lowest, not -inf,
  // so a row whose keys are all padding still averages them as PyTorch does.
  const float lowest = std::numeric_limits<float>::lowest();
  const int64_t* mask = attention_mask.defined() ? attention_mask.data<int64_t>() : nullptr;
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t h = 0; h < heads; ++h)
      for (int64_t q = 0; q < seq_len; ++q)
        for (int64_t k = 0; k < seq_len; ++k) {
          const float value = t[relative_position_bucket(k - q, num_buckets, max_distance) * heads + h];
          out[((b * heads + h) * seq_len + q) * seq_len + k] = mask && mask[b * seq_len + k] == 0 ? value + lowest : value;
        }
  return bias;
}

}  // namespace cpdit::models::text
