// The VAE kernels (kernels/image.hpp) against float64 references computed here.
#include "kernels/reference.hpp"

#include <cpdit/core/error.hpp>
#include <cpdit/core/threads.hpp>
#include <cpdit/core/weight.hpp>
#include <cpdit/kernels/image.hpp>

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <future>
#include <thread>

namespace cpdit {
namespace {

using kernels::ConvGeometry;
using test::random_tensor;
using test::to_double;

// Direct 3-D convolution in double: the definition, one output element at a time. Also returns
// sum |w*x| per output, the scale of the f32 rounding error.
struct Reference {
  std::vector<double> out, magnitude;
};
Reference conv3d_reference(const Tensor& x, const Tensor& w, const Tensor& bias, const ConvGeometry& g) {
  const auto xs = to_double(x), ws = to_double(w), bs = bias.defined() ? to_double(bias) : std::vector<double>{};
  const int64_t B = x.size(0), C = x.size(1), F = x.size(2), H = x.size(3), W = x.size(4);
  const int64_t O = w.size(0), kf = w.size(2), kh = w.size(3), kw = w.size(4);
  const int64_t Fo = (F + g.pad_before[0] + g.pad_after[0] - kf) / g.stride[0] + 1;
  const int64_t Ho = (H + g.pad_before[1] + g.pad_after[1] - kh) / g.stride[1] + 1;
  const int64_t Wo = (W + g.pad_before[2] + g.pad_after[2] - kw) / g.stride[2] + 1;
  Reference r;
  for (int64_t b = 0; b < B; ++b)
    for (int64_t o = 0; o < O; ++o)
      for (int64_t f = 0; f < Fo; ++f)
        for (int64_t y = 0; y < Ho; ++y)
          for (int64_t xo = 0; xo < Wo; ++xo) {
            double acc = bs.empty() ? 0.0 : bs[size_t(o)], mag = std::abs(acc);
            for (int64_t c = 0; c < C; ++c)
              for (int64_t i = 0; i < kf; ++i)
                for (int64_t j = 0; j < kh; ++j)
                  for (int64_t l = 0; l < kw; ++l) {
                    const int64_t fi = f * g.stride[0] + i - g.pad_before[0];
                    const int64_t yi = y * g.stride[1] + j - g.pad_before[1];
                    const int64_t xi = xo * g.stride[2] + l - g.pad_before[2];
                    if (fi < 0 || fi >= F || yi < 0 || yi >= H || xi < 0 || xi >= W) continue;
                    const double p = ws[size_t((((o * C + c) * kf + i) * kh + j) * kw + l)] *
                                     xs[size_t((((b * C + c) * F + fi) * H + yi) * W + xi)];
                    acc += p;
                    mag += std::abs(p);
                  }
            r.out.push_back(acc);
            r.magnitude.push_back(mag);
          }
  return r;
}

void expect_conv3d_matches(const Shape& x_shape, const Shape& w_shape, const ConvGeometry& g, bool with_bias,
                           kernels::ConvAlgorithm algorithm = kernels::ConvAlgorithm::direct) {
  const Tensor x = random_tensor(x_shape, 1), w = random_tensor(w_shape, 2, -0.5f, 0.5f);
  const Tensor bias = with_bias ? random_tensor({w_shape[0]}, 3) : Tensor{};
  const Reference ref = conv3d_reference(x, w, bias, g);
  const Tensor got = kernels::conv3d(x, w, bias, g, algorithm);
  ASSERT_EQ(size_t(got.numel()), ref.out.size()) << got.describe();
  // f32 sums of K products: each rounding is at most 2^-24 of the running magnitude, and oneDNN's
  // blocked sums keep the growth near log K; 1e-6 of sum |w*x| covers K up to a few thousand
  // (measured up to 0.2e-6). Winograd F(4x4, 3x3) sums transformed tiles whose coefficients reach
  // ~10, so its rounding is larger: measured up to 0.9e-6 of sum |w*x| on 2304 products; 2e-6.
  const double relative = algorithm == kernels::ConvAlgorithm::winograd ? 2e-6 : 1e-6;
  std::vector<double> bound(ref.out.size());
  for (size_t i = 0; i < bound.size(); ++i) bound[i] = relative * ref.magnitude[i] + 1e-7;
  test::expect_within(got, ref.out, bound);
}

TEST(Conv3d, SamePaddingMatchesDirectSum) {
  expect_conv3d_matches({2, 3, 4, 5, 7}, {4, 3, 3, 3, 3}, ConvGeometry::same(1, 1, 1), true);
}

TEST(Conv3d, CausalTimePaddingOnlyBefore) {
  ConvGeometry g;
  g.pad_before = {2, 1, 1};
  g.pad_after = {0, 1, 1};
  expect_conv3d_matches({1, 4, 3, 6, 5}, {5, 4, 3, 3, 3}, g, true);
}

TEST(Conv3d, StridedAsymmetricPadding) {
  ConvGeometry g;  // the encoder's downsampling: pad (0, 1, 0, 1), kernel 3, stride 2
  g.stride = {1, 2, 2};
  g.pad_after = {0, 1, 1};
  expect_conv3d_matches({1, 3, 1, 9, 8}, {4, 3, 1, 3, 3}, g, false);
}

TEST(Conv3d, PointwiseKernel) {
  expect_conv3d_matches({2, 6, 2, 3, 5}, {7, 6, 1, 1, 1}, ConvGeometry{}, true);
}

TEST(Conv3d, WideChannelsOddSizes) {
  // 64 channels (several of oneDNN's 16-channel blocks) over 70 x 40 pixels: sums of 1728 products.
  expect_conv3d_matches({1, 64, 1, 70, 40}, {3, 64, 3, 3, 3}, ConvGeometry::same(1, 1, 1), true);
}

TEST(Conv3d, WinogradMatchesDirectSum) {
  if (!kernels::winograd_available()) GTEST_SKIP() << "oneDNN has no Winograd convolution on this CPU (AVX-512 needed)";
  // 256 channels in and out, 3x3, stride 1: the wide layers conv3d runs through Winograd F(4x4, 3x3)
  // once they are large (forced here on small ones). Frames as the batch of a 2-D convolution (two
  // batch elements of three frames), sizes that are not multiples of the 4x4 output tile, and the
  // one-sided row padding of a row-split band.
  const auto winograd = kernels::ConvAlgorithm::winograd;
  ConvGeometry g = ConvGeometry::same(0, 1, 1);
  expect_conv3d_matches({2, 256, 3, 6, 7}, {256, 256, 1, 3, 3}, g, true, winograd);
  g.pad_after[1] = 0;
  expect_conv3d_matches({1, 256, 1, 9, 5}, {256, 256, 1, 3, 3}, g, false, winograd);
  // Winograd is for 3x3 stride-1 kernels only: anything else is refused, not run another way.
  EXPECT_THROW(kernels::conv3d(random_tensor({1, 256, 1, 5, 5}, 4), random_tensor({256, 256, 1, 1, 1}, 5), {},
                               ConvGeometry{}, winograd),
               Error);
}

// `fastest` decides by the layer's whole output, so that the bands of a row split sum as one rank
// would (parallel::conv3d_rows passes every rank's rows together).
TEST(Conv3d, FastestDecidesByTheWholeLayer) {
  using kernels::ConvAlgorithm;
  const ConvGeometry same = ConvGeometry::same(0, 1, 1);
  const Shape band{1, 256, 1, 64, 128}, weight{256, 256, 1, 3, 3};
  // A 64-row band of a 128-row layer: Winograd, as for the whole 128x128 layer on one rank.
  EXPECT_EQ(kernels::resolve_conv_algorithm(ConvAlgorithm::fastest, band, weight, same, 128), ConvAlgorithm::winograd);
  // The same band as a whole 64-row layer is below the size where Winograd pays.
  EXPECT_EQ(kernels::resolve_conv_algorithm(ConvAlgorithm::fastest, band, weight, same, 64), ConvAlgorithm::direct);
  // Frames count as pixels: two frames of 64x128.
  EXPECT_EQ(kernels::resolve_conv_algorithm(ConvAlgorithm::fastest, {1, 256, 2, 64, 128}, weight, same, 64),
            ConvAlgorithm::winograd);
  // Narrow channels, or a kernel three frames deep, sum directly at any size; a named algorithm stays.
  EXPECT_EQ(kernels::resolve_conv_algorithm(ConvAlgorithm::fastest, {1, 128, 1, 128, 128}, {256, 128, 1, 3, 3}, same,
                                            128),
            ConvAlgorithm::direct);
  EXPECT_EQ(kernels::resolve_conv_algorithm(ConvAlgorithm::fastest, band, {256, 256, 3, 3, 3},
                                            ConvGeometry::same(1, 1, 1), 128),
            ConvAlgorithm::direct);
  EXPECT_EQ(kernels::resolve_conv_algorithm(ConvAlgorithm::direct, band, weight, same, 128), ConvAlgorithm::direct);
}

// Inside a ConvWeightScope (a decode), Winograd's weight transform is made once per weight and kept
// (counted with the weights): two threads convolving with one weight at once (ranks sharing a
// model) transform it once, later calls not again, and both get the same numbers; when the scope
// ends the kept weights are freed, and outside one nothing is kept.
TEST(Conv3d, WinogradWeightsAreTransformedOncePerScope) {
  if (!kernels::winograd_available()) GTEST_SKIP() << "oneDNN has no Winograd convolution on this CPU (AVX-512 needed)";
  const auto winograd = kernels::ConvAlgorithm::winograd;
  const Tensor x = random_tensor({1, 256, 1, 8, 8}, 11), w = random_tensor({256, 256, 1, 3, 3}, 12);
  const ConvGeometry g = ConvGeometry::same(0, 1, 1);
  MemoryCounter& weights = weight_memory_counter();
  const int64_t before = weights.current();
  {
    const kernels::ConvWeightScope scope;
    Tensor first, second;
    std::thread other([&] { second = kernels::conv3d(x, w, {}, g, winograd); });
    first = kernels::conv3d(x, w, {}, g, winograd);
    other.join();
    const int64_t one_transform = weights.current() - before;
    EXPECT_GT(one_transform, int64_t(w.nbytes()));  // 6x6 tiles of every 3x3 kernel
    EXPECT_EQ(max_abs_diff(first, second), 0.0);
    kernels::conv3d(x, w, {}, g, winograd);
    EXPECT_EQ(weights.current() - before, one_transform);
    // Another weight of the same shape has a transform of its own, of the same size: so the two
    // threads above made exactly one.
    kernels::conv3d(x, w.clone(), {}, g, winograd);
    EXPECT_EQ(weights.current() - before, 2 * one_transform);
  }
  EXPECT_EQ(weights.current(), before);
  kernels::conv3d(x, w, {}, g, winograd);
  EXPECT_EQ(weights.current(), before);
}

// The local ranks of a decode wait for a kept transform, so it runs on all their compute threads:
// beside a second scope of one thread, a one-thread caller transforms on a team of two. Its bytes
// are a one-thread transform's: the convolution, itself at one thread both times, gives the same
// numbers to the bit.
TEST(Conv3d, KeptWinogradTransformRunsOnEveryScopesThreads) {
  if (!kernels::winograd_available()) GTEST_SKIP() << "oneDNN has no Winograd convolution on this CPU (AVX-512 needed)";
  const ScopedComputeThreads one_thread(1);
  const auto winograd = kernels::ConvAlgorithm::winograd;
  const Tensor x = random_tensor({1, 256, 1, 8, 8}, 13), w = random_tensor({256, 256, 1, 3, 3}, 14);
  const ConvGeometry g = ConvGeometry::same(0, 1, 1);
  Tensor alone, shared;
  {
    const kernels::ConvWeightScope scope;
    alone = kernels::conv3d(x, w, {}, g, winograd);
    EXPECT_EQ(kernels::weight_transform_stats().last_threads, 1);
  }
  {
    const kernels::ConvWeightScope scope;
    std::promise<void> other_in_scope, finished;
    std::thread other_rank([&] {
      const ScopedComputeThreads rank_threads(1);
      const kernels::ConvWeightScope rank_scope;
      other_in_scope.set_value();
      finished.get_future().wait();
    });
    other_in_scope.get_future().wait();
    shared = kernels::conv3d(x, w, {}, g, winograd);
    const int team = kernels::weight_transform_stats().last_threads;
    finished.set_value();
    other_rank.join();
    EXPECT_EQ(team, 2);
  }
  EXPECT_EQ(max_abs_diff(alone, shared), 0.0);
}

TEST(Conv3d, RefusesBadShapes) {
  const Tensor x = random_tensor({1, 3, 1, 2, 2}, 7);
  EXPECT_THROW(kernels::conv3d(x, random_tensor({4, 2, 1, 1, 1}, 8), {}, {}), Error);       // channels
  EXPECT_THROW(kernels::conv3d(x, random_tensor({4, 3, 1, 3, 3}, 8), {}, {}), Error);       // kernel > input
  EXPECT_THROW(kernels::conv3d(x, random_tensor({4, 3, 1, 1, 1}, 8), random_tensor({3}, 9), {}), Error);  // bias
}

std::vector<double> group_norm_reference(const Tensor& x, int64_t groups, const Tensor& w, const Tensor& b,
                                         double eps) {
  const auto xs = to_double(x), ws = to_double(w), bs = to_double(b);
  const int64_t B = x.size(0), C = x.size(1), P = x.numel() / (B * C), per = C / groups;
  std::vector<double> out(xs.size());
  for (int64_t bi = 0; bi < B; ++bi)
    for (int64_t g = 0; g < groups; ++g) {
      const size_t begin = size_t((bi * C + g * per) * P), n = size_t(per * P);
      double mean = 0.0, var = 0.0;
      for (size_t i = 0; i < n; ++i) mean += xs[begin + i];
      mean /= double(n);
      for (size_t i = 0; i < n; ++i) var += (xs[begin + i] - mean) * (xs[begin + i] - mean);
      var /= double(n);
      for (size_t i = 0; i < n; ++i) {
        const size_t c = size_t(g * per) + i / size_t(P);
        out[begin + i] = (xs[begin + i] - mean) / std::sqrt(var + eps) * ws[c] + bs[c];
      }
    }
  return out;
}

TEST(GroupNorm, MatchesFloat64) {
  const Tensor x = random_tensor({2, 8, 3, 5, 7}, 10), w = random_tensor({8}, 11), b = random_tensor({8}, 12);
  // Outputs are O(3); f32 rounding of the folded scale and shift is a few ulps of that.
  test::expect_close(kernels::group_norm(x, 4, w, b, 1e-6f), group_norm_reference(x, 4, w, b, 1e-6), 1e-6, 1e-6);
}

TEST(GroupNorm, LargeMeanKeepsTheVariance) {
  // Values 1000 +- 1: an f32 E[x^2] - mean^2 would cancel every digit of the variance.
  const Tensor x = random_tensor({1, 4, 64, 64}, 13, 999.0f, 1001.0f);
  const Tensor w = random_tensor({4}, 14), b = random_tensor({4}, 15);
  // The input itself is only known to f32 ulp(1000) = 6e-5, i.e. 1e-4 of its spread of 1 after
  // normalising: the output inherits that, and no more.
  test::expect_close(kernels::group_norm(x, 2, w, b, 1e-6f), group_norm_reference(x, 2, w, b, 1e-6), 0, 2e-5);
}

TEST(GroupNorm, ShardMomentsAddUpToTheWhole) {
  const Tensor x = random_tensor({1, 6, 9, 4}, 16);
  kernels::GroupMoments top = kernels::group_moments(x.narrow(2, 0, 4), 3);
  const kernels::GroupMoments bottom = kernels::group_moments(x.narrow(2, 4, 5), 3);
  for (size_t i = 0; i < top.sums.size(); ++i) top.sums[i] += bottom.sums[i];
  top.count += bottom.count;
  const Tensor w = random_tensor({6}, 17), b = random_tensor({6}, 18);
  const Tensor whole = kernels::group_norm(x, 3, w, b, 1e-6f);
  const Tensor part = kernels::group_norm_apply(x.narrow(2, 4, 5), 3, top, w, b, 1e-6f);
  // Sums in a different order: the mean and variance differ by double rounding only.
  test::expect_close(part, to_double(whole.narrow(2, 4, 5).contiguous()), 1e-6, 1e-6);
  EXPECT_THROW(kernels::group_norm(x, 4, w, b, 1e-6f), Error);  // 6 channels, 4 groups
}

TEST(ChannelRmsNorm, MatchesFloat64AndKeepsZeroVectors) {
  Tensor x = random_tensor({2, 5, 3, 4, 300}, 19);  // 1200 positions: more than one block of 256
  float* p = x.data<float>();
  for (int64_t c = 0; c < 5; ++c) p[c * 3600 + 7] = 0.0f;  // position 7 of batch 0 is all zeros
  const Tensor gamma = random_tensor({5, 1, 1, 1}, 20);
  const auto xs = to_double(x), gs = to_double(gamma);
  std::vector<double> ref(xs.size());
  for (int64_t b = 0; b < 2; ++b)
    for (int64_t i = 0; i < 3600; ++i) {
      double norm = 0.0;
      for (int64_t c = 0; c < 5; ++c) norm += xs[size_t((b * 5 + c) * 3600 + i)] * xs[size_t((b * 5 + c) * 3600 + i)];
      norm = std::max(std::sqrt(norm), 1e-12);
      for (int64_t c = 0; c < 5; ++c) {
        const size_t k = size_t((b * 5 + c) * 3600 + i);
        ref[k] = xs[k] / norm * std::sqrt(5.0) * gs[size_t(c)];
      }
    }
  const Tensor got = kernels::channel_rms_norm(x, gamma);
  test::expect_close(got, ref, 1e-6, 1e-7);  // three f32 roundings of an O(2) value
  EXPECT_EQ(got.data<float>()[7], 0.0f);
}

TEST(ChannelRmsNormEps, MatchesFloat64WithTheEpsInside) {
  // LTX-Video's x / sqrt(mean_c(x^2) + eps): a zero vector stays zero, and at a position whose
  // values are near sqrt(eps) the eps halves the result, so a misplaced eps fails the comparison.
  Tensor x = random_tensor({2, 5, 3, 4, 30}, 22);  // 360 positions: more than one block of 256
  float* p = x.data<float>();
  for (int64_t c = 0; c < 5; ++c) p[c * 360 + 7] = 0.0f;
  for (int64_t c = 0; c < 5; ++c) p[c * 360 + 8] = 1e-4f;  // mean square 1e-8 = eps
  const auto xs = to_double(x);
  std::vector<double> ref(xs.size());
  for (int64_t b = 0; b < 2; ++b)
    for (int64_t i = 0; i < 360; ++i) {
      double squares = 0.0;
      for (int64_t c = 0; c < 5; ++c) squares += xs[size_t((b * 5 + c) * 360 + i)] * xs[size_t((b * 5 + c) * 360 + i)];
      for (int64_t c = 0; c < 5; ++c) {
        const size_t k = size_t((b * 5 + c) * 360 + i);
        ref[k] = xs[k] / std::sqrt(squares / 5.0 + 1e-8);
      }
    }
  const Tensor got = kernels::channel_rms_norm_eps(x, 1e-8f);
  test::expect_close(got, ref, 1e-6, 1e-7);  // two f32 roundings of an O(1) value
  EXPECT_EQ(got.data<float>()[7], 0.0f);
  EXPECT_NEAR(got.data<float>()[8], 1.0 / std::sqrt(2.0), 1e-6);
}

TEST(UpsampleNearest2x, CopiesEachPixelToA2x2Block) {
  const Tensor x = random_tensor({2, 3, 2, 3, 5}, 21);
  const Tensor got = kernels::upsample_nearest2x(x);
  ASSERT_EQ(got.shape(), (Shape{2, 3, 2, 6, 10}));
  const float* in = x.data<float>();
  const float* out = got.data<float>();
  for (int64_t plane = 0; plane < 12; ++plane)
    for (int64_t y = 0; y < 6; ++y)
      for (int64_t xo = 0; xo < 10; ++xo)
        ASSERT_EQ(out[(plane * 6 + y) * 10 + xo], in[(plane * 3 + y / 2) * 5 + xo / 2])
            << plane << " " << y << " " << xo;
}

TEST(Clamp, LimitsToTheRange) {
  const Tensor x = Tensor::from_vector({-3.0f, -1.0f, 0.25f, 1.0f, 7.0f}, {5});
  EXPECT_EQ(to_double(kernels::clamp(x, -1.0f, 1.0f)), (std::vector<double>{-1.0, -1.0, 0.25, 1.0, 1.0}));
}

}  // namespace
}  // namespace cpdit
