#pragma once
// Random attention problems: tensors for the backends plus the same numbers for the double reference.
#include "support/attention_reference.hpp"

#include <cpdit/attention/attention.hpp>

namespace cpdit::attention::testing {

struct Case {
  RefInputs ref;
  Tensor q, k, v;
  Mask mask;
  float scale;
};

// Every mask kind draws ~30% masked entries. With `empty_row`, query row 0 of every head (full masks)
// or every key of the last batch (key padding) is masked, to exercise the fully masked rule.
inline Case make_case(RefDims d, MaskKind kind, uint32_t seed, bool empty_row = false) {
  Case c;
  c.ref.d = d;
  c.ref.q = random_values(size_t(d.B * d.Sq * d.H * d.D), seed);
  c.ref.k = random_values(size_t(d.B * d.Sk * d.Hkv * d.D), seed + 1);
  c.ref.v = random_values(size_t(d.B * d.Sk * d.Hkv * d.D), seed + 2);
  c.scale = float(1.0 / std::sqrt(double(d.D)));
  c.ref.scale = c.scale;  // the float scale, so both sides use the same number
  c.q = to_tensor(c.ref.q, {d.B, d.Sq, d.H, d.D});
  c.k = to_tensor(c.ref.k, {d.B, d.Sk, d.Hkv, d.D});
  c.v = to_tensor(c.ref.v, {d.B, d.Sk, d.Hkv, d.D});
  // Round the reference inputs to what the f32 tensors hold.
  c.ref.q = values(c.q), c.ref.k = values(c.k), c.ref.v = values(c.v);

  const double ninf = -std::numeric_limits<double>::infinity();
  std::mt19937 gen(seed + 3);
  std::bernoulli_distribution keep_draw(0.7);
  if (kind == MaskKind::key_padding) {
    Tensor keep = Tensor::empty({d.B, d.Sk}, DType::boolean);
    bool* kp = keep.data<bool>();
    for (int64_t b = 0; b < d.B; ++b)
      for (int64_t j = 0; j < d.Sk; ++j) kp[b * d.Sk + j] = !(empty_row && b == d.B - 1) && keep_draw(gen);
    c.mask = Mask::key_padding(keep);
    c.ref.bias = [kp, keep, d, ninf](int64_t b, int64_t, int64_t, int64_t j) {
      return kp[b * d.Sk + j] ? 0.0 : ninf;
    };
  } else if (kind == MaskKind::boolean || kind == MaskKind::additive) {
    // Broadcast over batch, one mask per head: both broadcast rules get used.
    Tensor m = Tensor::empty({1, d.H, d.Sq, d.Sk}, kind == MaskKind::boolean ? DType::boolean : DType::f32);
    std::normal_distribution<float> finite_bias(0.0f, 1.0f);
    std::vector<double> bias(size_t(d.H * d.Sq * d.Sk));
    for (int64_t e = 0; e < int64_t(bias.size()); ++e) {
      const bool keep = !(empty_row && (e / d.Sk) % d.Sq == 0) && keep_draw(gen);
      const float additive = keep ? finite_bias(gen) : -INFINITY;
      if (kind == MaskKind::boolean) m.data<bool>()[e] = keep;
      else m.data<float>()[e] = additive;
      bias[e] = kind == MaskKind::boolean ? (keep ? 0.0 : ninf) : double(additive);
    }
    c.mask = kind == MaskKind::boolean ? Mask::boolean(m) : Mask::additive(m);
    c.ref.bias = [bias, d](int64_t, int64_t h, int64_t i, int64_t j) {
      return bias[size_t((h * d.Sq + i) * d.Sk + j)];
    };
  }
  return c;
}

}  // namespace cpdit::attention::testing
