// Backward pass: the double reference against finite differences, the backends against the double
// reference and each other, and the per-KV-chunk re-entrancy ring attention relies on.
#include "cases.hpp"

#include <cpdit/attention/attention.hpp>

#include <gtest/gtest.h>

namespace cpdit::attention::testing {
namespace {

double loss(const RefInputs& in, const std::vector<double>& dout) {
  const RefOutputs f = ref_forward(in);
  double s = 0;
  for (size_t i = 0; i < dout.size(); ++i) s += dout[i] * f.out[i];
  return s;
}

// Central differences of sum(dout * out) in double: the analytic reference is right.
TEST(AttentionBackward, DoubleReferenceMatchesFiniteDifferences) {
  for (MaskKind kind : {MaskKind::none, MaskKind::additive}) {
    Case c = make_case({1, 3, 4, 2, 1, 4}, kind, 3);
    const std::vector<double> dout = random_values(c.ref.q.size(), 99);
    const RefGrads g = ref_backward(c.ref, dout);
    const double h = 1e-6;
    for (auto [x, grad] : {std::pair{&c.ref.q, &g.dq}, std::pair{&c.ref.k, &g.dk}, std::pair{&c.ref.v, &g.dv}})
      for (size_t i = 0; i < x->size(); ++i) {
        const double keep = (*x)[i];
        (*x)[i] = keep + h;
        const double up = loss(c.ref, dout);
        (*x)[i] = keep - h;
        const double down = loss(c.ref, dout);
        (*x)[i] = keep;
        EXPECT_NEAR((up - down) / (2 * h), (*grad)[i], 1e-7) << mask_kind_name(kind) << " element " << i;
      }
  }
}

Grads run_backward(const Backend& b, const Case& c, const Tensor& dout) {
  Result f = b.forward(c.q, c.k, c.v, c.mask, c.scale);
  return b.backward(dout, c.q, c.k, c.v, f.out, f.lse, c.mask, c.scale);
}

TEST(AttentionBackward, BackendsMatchDoubleReference) {
  struct Item {
    const char* backend;
    MaskKind mask;
  };
  for (Item it : {Item{"native", MaskKind::none}, Item{"native", MaskKind::boolean},
                  Item{"native", MaskKind::additive}, Item{"native", MaskKind::key_padding},
                  Item{"flash", MaskKind::none}, Item{"flash", MaskKind::key_padding}}) {
    SCOPED_TRACE(std::string(it.backend) + " " + mask_kind_name(it.mask));
    // Key padding with the last batch fully masked: its gradients must be exactly zero.
    const Case c = make_case({2, 9, 70, 4, 2, 16}, it.mask, 7, /*empty_row=*/true);
    const std::vector<double> dout = random_values(c.ref.q.size(), 8);
    const RefGrads want = ref_backward(c.ref, dout);
    const Grads g = run_backward(backend(it.backend), c, to_tensor(dout, c.q.shape()));
    EXPECT_LE(max_abs_diff(values(g.dq), want.dq), 2e-5 * std::max(1.0, max_abs(want.dq)));
    EXPECT_LE(max_abs_diff(values(g.dk), want.dk), 2e-5 * std::max(1.0, max_abs(want.dk)));
    EXPECT_LE(max_abs_diff(values(g.dv), want.dv), 2e-5 * std::max(1.0, max_abs(want.dv)));
  }
}

double relative_error(const Tensor& got, const Tensor& want) {
  return max_abs_diff(values(got), values(want)) / std::max(1e-30, max_abs(values(want)));
}

// Several key and query tiles, GQA, ragged edges, key padding.
TEST(AttentionBackward, FlashMatchesNative) {
  for (MaskKind kind : {MaskKind::none, MaskKind::key_padding}) {
    SCOPED_TRACE(mask_kind_name(kind));
    const Case c = make_case({2, 300, 333, 4, 2, 64}, kind, 17);
    const Tensor dout = to_tensor(random_values(c.ref.q.size(), 18), c.q.shape());
    const Grads n = run_backward(backend("native"), c, dout);
    const Grads f = run_backward(backend("flash"), c, dout);
    EXPECT_LE(relative_error(f.dq, n.dq), 1e-4);
    EXPECT_LE(relative_error(f.dk, n.dk), 1e-4);
    EXPECT_LE(relative_error(f.dv, n.dv), 1e-4);
  }
}

// LSE merge, with the -inf guard.
void merge_into(std::vector<double>& o, std::vector<double>& lse, const Result& part, const RefDims& d) {
  const std::vector<double> ob = values(part.out), lb = values(part.lse);
  for (int64_t b = 0; b < d.B; ++b)
    for (int64_t h = 0; h < d.H; ++h)
      for (int64_t i = 0; i < d.Sq; ++i) {
        double& a = lse[(b * d.H + h) * d.Sq + i];
        const double c = lb[(b * d.H + h) * d.Sq + i];
        if (std::isinf(c)) continue;
        const double w = std::isinf(a) ? 1.0 : 1.0 / (1.0 + std::exp(a - c));  // sigma(c - a)
        for (int64_t e = 0; e < d.D; ++e) {
          double& x = o[at4(b, i, h, e, d.Sq, d.H, d.D)];
          x -= w * (x - ob[at4(b, i, h, e, d.Sq, d.H, d.D)]);
        }
        a = std::isinf(a) ? c : std::max(a, c) + std::log1p(std::exp(-std::fabs(a - c)));
      }
}

// Split the keys into chunks: forward per chunk merged by LSE equals the full forward; backward per
// chunk with the global out/lse, dq summed and dk/dv concatenated, equals the full backward.
TEST(AttentionBackward, PerKvChunkCallsComposeToTheFullResult) {
  const RefDims d{2, 50, 301, 2, 1, 32};
  for (const char* name : {"native", "flash"}) {
    SCOPED_TRACE(name);
    const Backend& b = backend(name);
    const Case c = make_case(d, MaskKind::key_padding, 23, /*empty_row=*/true);
    const Tensor dout = to_tensor(random_values(c.ref.q.size(), 24), c.q.shape());
    const Result full = b.forward(c.q, c.k, c.v, c.mask, c.scale);
    const Grads full_g = b.backward(dout, c.q, c.k, c.v, full.out, full.lse, c.mask, c.scale);

    const std::vector<int64_t> sizes{100, 0, 1, 200};  // an empty chunk, as uneven rings make
    const auto ks = split(c.k, 1, sizes), vs = split(c.v, 1, sizes), ms = split(c.mask.tensor, 1, sizes);
    std::vector<double> out(size_t(c.q.numel()), 0.0), lse(size_t(d.B * d.H * d.Sq), -INFINITY);
    std::vector<Tensor> dks, dvs;
    std::vector<double> dq(size_t(c.q.numel()), 0.0);
    for (size_t i = 0; i < sizes.size(); ++i) {
      const Mask m = Mask::key_padding(ms[i].contiguous());
      merge_into(out, lse, b.forward(c.q, ks[i].contiguous(), vs[i].contiguous(), m, c.scale), d);
      const Grads g = b.backward(dout, c.q, ks[i].contiguous(), vs[i].contiguous(), full.out, full.lse, m, c.scale);
      const std::vector<double> part = values(g.dq);
      for (size_t e = 0; e < dq.size(); ++e) dq[e] += part[e];
      dks.push_back(g.dk), dvs.push_back(g.dv);
    }
    EXPECT_LE(max_abs_diff(out, values(full.out)), 1e-5);
    EXPECT_LE(max_abs_diff(lse, values(full.lse)), 1e-5);
    EXPECT_LE(max_abs_diff(dq, values(full_g.dq)), 1e-5);
    EXPECT_LE(cpdit::max_abs_diff(cat(dks, 1), full_g.dk), 1e-5);
    EXPECT_LE(cpdit::max_abs_diff(cat(dvs, 1), full_g.dv), 1e-5);
  }
}

}  // namespace
}  // namespace cpdit::attention::testing
