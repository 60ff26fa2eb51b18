#pragma once
// Double-precision attention for the tests: the outside truth the backends and the context-parallel
// modes are compared against.
// Masks of every kind become one additive bias(b, h, i, j) (0 / -inf / finite).
#include <cpdit/attention/attention.hpp>

#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <random>
#include <vector>

namespace cpdit::attention::testing {

struct RefDims {
  int64_t B, Sq, Sk, H, Hkv, D;
};

// Values in (B, S, H, D) order, like the tensors.
struct RefInputs {
  RefDims d;
  std::vector<double> q, k, v;
  std::function<double(int64_t b, int64_t h, int64_t i, int64_t j)> bias = [](auto...) { return 0.0; };
  double scale = 1;
};

struct RefOutputs {
  std::vector<double> out, lse;  // (B,S_q,H,D), (B,H,S_q)
};

struct RefGrads {
  std::vector<double> dq, dk, dv;
};

inline int64_t at4(int64_t b, int64_t s, int64_t h, int64_t d, int64_t S, int64_t H, int64_t D) {
  return ((b * S + s) * H + h) * D + d;
}

// P[i][j] of one (b, h), from the given lse (or computed when lse is empty); returns logits.
inline std::vector<double> ref_logits(const RefInputs& in, int64_t b, int64_t h) {
  const RefDims& d = in.d;
  const int64_t hk = h / (d.H / d.Hkv);
  std::vector<double> s(size_t(d.Sq * d.Sk));
  for (int64_t i = 0; i < d.Sq; ++i)
    for (int64_t j = 0; j < d.Sk; ++j) {
      double dot = 0;
      for (int64_t e = 0; e < d.D; ++e)
        dot += in.q[at4(b, i, h, e, d.Sq, d.H, d.D)] * in.k[at4(b, j, hk, e, d.Sk, d.Hkv, d.D)];
      s[i * d.Sk + j] = in.scale * dot + in.bias(b, h, i, j);
    }
  return s;
}

inline RefOutputs ref_forward(const RefInputs& in) {
  const RefDims& d = in.d;
  const double ninf = -std::numeric_limits<double>::infinity();
  RefOutputs r{std::vector<double>(size_t(d.B * d.Sq * d.H * d.D), 0.0),
               std::vector<double>(size_t(d.B * d.H * d.Sq), ninf)};
  for (int64_t b = 0; b < d.B; ++b)
    for (int64_t h = 0; h < d.H; ++h) {
      const int64_t hk = h / (d.H / d.Hkv);
      std::vector<double> s = ref_logits(in, b, h);
      for (int64_t i = 0; i < d.Sq; ++i) {
        double mx = ninf;
        for (int64_t j = 0; j < d.Sk; ++j) mx = std::max(mx, s[i * d.Sk + j]);
        if (mx == ninf) continue;  // fully masked: out 0, lse -inf
        double sum = 0;
        for (int64_t j = 0; j < d.Sk; ++j) sum += std::exp(s[i * d.Sk + j] - mx);
        r.lse[(b * d.H + h) * d.Sq + i] = mx + std::log(sum);
        for (int64_t j = 0; j < d.Sk; ++j) {
          const double p = std::exp(s[i * d.Sk + j] - mx) / sum;
          for (int64_t e = 0; e < d.D; ++e)
            r.out[at4(b, i, h, e, d.Sq, d.H, d.D)] += p * in.v[at4(b, j, hk, e, d.Sk, d.Hkv, d.D)];
        }
      }
    }
  return r;
}

// Analytic gradients of sum(dout * out), straight from the softmax Jacobian.
inline RefGrads ref_backward(const RefInputs& in, const std::vector<double>& dout) {
  const RefDims& d = in.d;
  const RefOutputs f = ref_forward(in);
  RefGrads g{std::vector<double>(in.q.size()), std::vector<double>(in.k.size()),
             std::vector<double>(in.v.size())};
  for (int64_t b = 0; b < d.B; ++b)
    for (int64_t h = 0; h < d.H; ++h) {
      const int64_t hk = h / (d.H / d.Hkv);
      std::vector<double> s = ref_logits(in, b, h);
      for (int64_t i = 0; i < d.Sq; ++i) {
        const double lse = f.lse[(b * d.H + h) * d.Sq + i];
        if (std::isinf(lse)) continue;
        std::vector<double> p(size_t(d.Sk)), dp(size_t(d.Sk));
        double dot_p_dp = 0;
        for (int64_t j = 0; j < d.Sk; ++j) {
          p[j] = std::exp(s[i * d.Sk + j] - lse);
          double x = 0;
          for (int64_t e = 0; e < d.D; ++e)
            x += dout[at4(b, i, h, e, d.Sq, d.H, d.D)] * in.v[at4(b, j, hk, e, d.Sk, d.Hkv, d.D)];
          dp[j] = x;
          dot_p_dp += p[j] * x;
        }
        for (int64_t j = 0; j < d.Sk; ++j) {
          const double ds = p[j] * (dp[j] - dot_p_dp) * in.scale;
          for (int64_t e = 0; e < d.D; ++e) {
            const int64_t qi = at4(b, i, h, e, d.Sq, d.H, d.D), kj = at4(b, j, hk, e, d.Sk, d.Hkv, d.D);
            g.dq[qi] += ds * in.k[kj];
            g.dk[kj] += ds * in.q[qi];
            g.dv[kj] += p[j] * dout[qi];
          }
        }
      }
    }
  return g;
}

inline std::vector<double> random_values(size_t n, uint32_t seed, double sd = 1.0) {
  std::mt19937 gen(seed);
  std::normal_distribution<double> dist(0.0, sd);
  std::vector<double> x(n);
  for (double& e : x) e = dist(gen);
  return x;
}

inline Tensor to_tensor(const std::vector<double>& x, const Shape& shape) {
  return Tensor::from_vector(std::vector<float>(x.begin(), x.end()), shape);
}

// Values of a tensor (any float dtype) as doubles.
inline std::vector<double> values(const Tensor& t) {
  Tensor f = t.to(DType::f32);
  const float* p = f.data<float>();
  return std::vector<double>(p, p + f.numel());
}

inline double max_abs_diff(const std::vector<double>& a, const std::vector<double>& b) {
  double worst = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    if (std::isinf(a[i]) && a[i] == b[i]) continue;  // matching -inf LSEs
    worst = std::max(worst, std::fabs(a[i] - b[i]));
    if (std::isnan(a[i]) || std::isnan(b[i])) return INFINITY;
  }
  return worst;
}

inline double max_abs(const std::vector<double>& a) {
  double m = 0;
  for (double x : a) m = std::max(m, std::fabs(x));
  return m;
}

}  // namespace cpdit::attention::testing
