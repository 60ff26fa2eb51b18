// Forward pass of both backends against float64 fixtures and the double reference.
#include "cases.hpp"

#include <cpdit/attention/attention.hpp>
#include <cpdit/core/error.hpp>
#include <cpdit/core/precision.hpp>
#include <cpdit/io/safetensors.hpp>

#include <gtest/gtest.h>

#include <filesystem>

namespace cpdit::attention::testing {
namespace {

const char* const kBackends[] = {"native", "flash"};

TEST(AttentionFixtures, BothBackendsMatchFloat64Reference) {
  const std::filesystem::path dir = std::filesystem::path(CPDIT_TEST_DATA) / "fixtures" / "attention";
  int files = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    auto t = io::load_safetensors(entry.path().string());
    Mask mask = t.count("key_mask") ? Mask::key_padding(t.at("key_mask")) : Mask::none();
    const float scale = float(1.0 / std::sqrt(double(t.at("q").size(3))));
    for (const char* name : kBackends) {
      SCOPED_TRACE(entry.path().filename().string() + " " + name);
      Result r = backend(name).forward(t.at("q"), t.at("k"), t.at("v"), mask, scale);
      EXPECT_LE(max_abs_diff(values(r.out), values(t.at("out_f64"))), 1e-5);
      EXPECT_LE(max_abs_diff(values(r.lse), values(t.at("lse_f64"))), 1e-5);
    }
    ++files;
  }
  EXPECT_GE(files, 4);
}

struct ShapeCase {
  RefDims d;
  MaskKind mask;
};

class RandomForward : public ::testing::TestWithParam<ShapeCase> {};

TEST_P(RandomForward, MatchesDoubleReference) {
  const ShapeCase sc = GetParam();
  const Case c = make_case(sc.d, sc.mask, 11);
  const RefOutputs want = ref_forward(c.ref);
  for (const char* name : kBackends) {
    const Backend& b = backend(name);
    const Capabilities caps = b.capabilities();
    if ((sc.mask == MaskKind::boolean && !caps.full_mask) || (sc.mask == MaskKind::additive && !caps.additive_mask))
      continue;
    SCOPED_TRACE(name);
    Result r = b.forward(c.q, c.k, c.v, c.mask, c.scale);
    EXPECT_EQ(r.out.shape(), c.q.shape());
    EXPECT_LE(max_abs_diff(values(r.out), want.out), 2e-5);
    EXPECT_LE(max_abs_diff(values(r.lse), want.lse), 2e-5);
  }
}

// Tiles are 64..512 wide: 1, 7, 130, 300, 600 hit single rows, partial tiles and several tiles.
INSTANTIATE_TEST_SUITE_P(
    Shapes, RandomForward,
    ::testing::Values(ShapeCase{{1, 1, 1, 1, 1, 16}, MaskKind::none},
                      ShapeCase{{3, 7, 13, 2, 2, 32}, MaskKind::none},
                      ShapeCase{{1, 130, 600, 1, 1, 64}, MaskKind::none},
                      ShapeCase{{2, 300, 70, 4, 1, 128}, MaskKind::none},  // GQA 4:1
                      ShapeCase{{1, 65, 65, 2, 1, 256}, MaskKind::none},
                      ShapeCase{{3, 40, 530, 4, 2, 32}, MaskKind::key_padding},
                      ShapeCase{{2, 33, 47, 2, 1, 16}, MaskKind::boolean},
                      ShapeCase{{2, 33, 47, 4, 2, 16}, MaskKind::additive}));

TEST(AttentionForward, FullyMaskedRowsAreZeroWithMinusInfLse) {
  for (MaskKind kind : {MaskKind::key_padding, MaskKind::boolean, MaskKind::additive}) {
    const Case c = make_case({2, 20, 600, 2, 2, 16}, kind, 5, /*empty_row=*/true);
    for (const char* name : kBackends) {
      if (kind != MaskKind::key_padding && std::string(name) == "flash") continue;
      SCOPED_TRACE(std::string(name) + " " + mask_kind_name(kind));
      Result r = backend(name).forward(c.q, c.k, c.v, c.mask, c.scale);
      const std::vector<double> out = values(r.out), lse = values(r.lse);
      for (double x : out) ASSERT_FALSE(std::isnan(x));
      // key padding empties the last batch; full masks empty query row 0 of every head.
      const int64_t b = kind == MaskKind::key_padding ? 1 : 0;
      const int64_t row = 0;
      EXPECT_EQ(lse[(b * 2 + 1) * 20 + row], -INFINITY);
      for (int64_t e = 0; e < 16; ++e) EXPECT_EQ(out[at4(b, row, 1, e, 20, 2, 16)], 0.0);
      EXPECT_LE(max_abs_diff(out, ref_forward(c.ref).out), 2e-5);
    }
  }
}

// An empty KV chunk (uneven ring splits make them) is a call whose rows are all fully masked.
TEST(AttentionForward, NoKeysGiveZeroOutputMinusInfLseAndZeroGradients) {
  const Case c = make_case({2, 5, 1, 2, 1, 16}, MaskKind::none, 9);
  const Tensor k = c.k.narrow(1, 0, 0).contiguous(), v = c.v.narrow(1, 0, 0).contiguous();
  for (const char* name : kBackends) {
    SCOPED_TRACE(name);
    Result r = backend(name).forward(c.q, k, v, Mask::none(), c.scale);
    for (double x : values(r.out)) EXPECT_EQ(x, 0.0);
    for (double x : values(r.lse)) EXPECT_EQ(x, -INFINITY);
    Grads g = backend(name).backward(c.q, c.q, k, v, r.out, r.lse, Mask::none(), c.scale);
    for (double x : values(g.dq)) EXPECT_EQ(x, 0.0);
    EXPECT_EQ(g.dk.shape(), k.shape());
  }
}

// dispatch() on the backend `name`, through the dispatcher's checks.
Result dispatch_on(const char* name, const Tensor& q, const Tensor& k, const Tensor& v) {
  const ScopedBackend chosen(name);
  return dispatch(q, k, v, Options{});
}

// No batch item or no query: an empty output of q's shape and an empty lse on every backend (the
// flash backend divided its work by B x H and stopped on SIGFPE).
TEST(AttentionForward, AnEmptyBatchOrNoQueriesGiveEmptyOutputs) {
  const Case c = make_case({2, 5, 4, 2, 1, 16}, MaskKind::none, 10);
  const Tensor no_batch_q = c.q.narrow(0, 0, 0).contiguous(), no_batch_k = c.k.narrow(0, 0, 0).contiguous(),
               no_batch_v = c.v.narrow(0, 0, 0).contiguous(), no_queries = c.q.narrow(1, 0, 0).contiguous();
  for (const char* name : kBackends) {
    SCOPED_TRACE(name);
    const Result empty = dispatch_on(name, no_batch_q, no_batch_k, no_batch_v);
    EXPECT_EQ(empty.out.shape(), no_batch_q.shape());
    EXPECT_EQ(empty.lse.shape(), (Shape{0, 2, 5}));
    const Result none = dispatch_on(name, no_queries, c.k, c.v);
    EXPECT_EQ(none.out.shape(), no_queries.shape());
    EXPECT_EQ(none.lse.shape(), (Shape{2, 2, 0}));
  }
}

// A scale given is used or refused, never replaced by the default: 0, a negative one and NaN were
// silently 1/sqrt(D).
TEST(AttentionForward, AGivenScaleThatIsNotPositiveAndFiniteIsRefused) {
  const Case c = make_case({1, 3, 3, 1, 1, 8}, MaskKind::none, 11);
  for (const float bad : {0.0f, -1.0f, NAN, INFINITY}) {
    Options options;
    options.scale = bad;
    try {
      dispatch(c.q, c.k, c.v, options);
      ADD_FAILURE() << "scale " << bad << " was accepted";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("softmax scale must be positive and finite"), std::string::npos) << e.what();
    }
  }
  Options given;
  given.scale = 0.5f;
  const Result r = dispatch(c.q, c.k, c.v, given);
  const Result direct = backend("flash").forward(c.q, c.k, c.v, Mask::none(), 0.5f);
  EXPECT_EQ(max_abs_diff(values(r.out), values(direct.out)), 0.0);
}

TEST(AttentionForward, HalfPrecisionInputsComputeInF32) {
  const Case c = make_case({1, 70, 90, 2, 1, 32}, MaskKind::none, 21);
  for (DType t : {DType::bf16, DType::f16}) {
    RefInputs rounded = c.ref;
    const Tensor q = c.q.to(t), k = c.k.to(t), v = c.v.to(t);
    rounded.q = values(q), rounded.k = values(k), rounded.v = values(v);
    const RefOutputs want = ref_forward(rounded);
    for (const char* name : kBackends) {
      SCOPED_TRACE(std::string(name) + " " + dtype_name(t));
      Result r = backend(name).forward(q, k, v, Mask::none(), c.scale);
      EXPECT_EQ(r.out.dtype(), t);
      EXPECT_EQ(r.lse.dtype(), DType::f32);
      EXPECT_LE(max_abs_diff(values(r.lse), want.lse), 2e-5);   // LSE is never rounded
      // One rounding of out to t (half a unit in the last place, at most 2^-p relative for p
      // significant bits: bf16 8, f16 11) on top of the f32 kernel's 2e-5.
      const double half_ulp = std::ldexp(1.0, t == DType::bf16 ? -8 : -11);
      EXPECT_LE(max_abs_diff(values(r.out), want.out), half_ulp * max_abs(want.out) + 2e-5);
    }
  }
}

// --dtype bf16's attention: under MatmulPrecision::bf16 the flash kernel rounds Q, K, V and the
// softmax weights P to bf16 and accumulates their products in f32. Checked against the float64
// reference on bf16-rounded q, k, v: the scores are then exact products summed in f32, so the LSE
// keeps f32 accuracy; P's rounding (relative 2^-9 each) moves out by at most 2^-9 max|v|. Shapes hit
// partial register tiles (rows % 8, columns % 48), odd head dims and key counts, GQA, key padding,
// and key tiles with no padding at all (1024 keys, D 64: two full tiles of 512 where L2 is 2 MiB),
// whose packed K and V are not zeroed first.
TEST(AttentionForward, FlashUnderBf16PrecisionRoundsOperandsOnly) {
  const ShapeCase cases[] = {{{2, 130, 600, 4, 2, 128}, MaskKind::none},
                             {{1, 37, 71, 2, 1, 15}, MaskKind::none},
                             {{3, 40, 530, 4, 2, 32}, MaskKind::key_padding},
                             {{1, 50, 1024, 2, 2, 64}, MaskKind::none}};
  for (const ShapeCase& sc : cases) {
    SCOPED_TRACE(::testing::Message() << "Sq " << sc.d.Sq << " Sk " << sc.d.Sk << " D " << sc.d.D);
    Case c = make_case(sc.d, sc.mask, 31);
    c.q = c.q.to(DType::bf16).to(DType::f32), c.k = c.k.to(DType::bf16).to(DType::f32);
    c.v = c.v.to(DType::bf16).to(DType::f32);
    c.ref.q = values(c.q), c.ref.k = values(c.k), c.ref.v = values(c.v);
    const RefOutputs want = ref_forward(c.ref);
    const Result exact = backend("flash").forward(c.q, c.k, c.v, c.mask, c.scale);
    double v_max = 0;
    for (double x : c.ref.v) v_max = std::max(v_max, std::abs(x));
    ScopedMatmulPrecision precision(MatmulPrecision::bf16);
    const Result r = backend("flash").forward(c.q, c.k, c.v, c.mask, c.scale);
    EXPECT_LE(max_abs_diff(values(r.lse), want.lse), 2e-5);  // as the f32 kernel: f32 sums of exact products
    // P's rounding, plus the f32 kernel's own 2e-5.
    EXPECT_LE(max_abs_diff(values(r.out), want.out), std::ldexp(v_max, -9) + 2e-5);
    // P's rounding moves out far more than f32 rounding does: the bf16 products really ran.
    EXPECT_GT(max_abs_diff(values(r.out), values(exact.out)), 1e-4);
  }
}

// The bf16 pass keeps its shift m while a key tile's weights sum to at most 2^32 (flash_forward.cpp).
// Here key j is scaled by 1 + 8 j / S_k, so later tiles' scores pass the first 512 keys' max by far
// more than ln 2^32 = 22: the pass must notice, take the new max and rescale. Tolerances as above plus,
// for f32 sums of scores this large, 8 eps max|s| (as isa_test.cpp argues).
TEST(AttentionForward, FlashUnderBf16PrecisionFollowsAGrowingMax) {
  const RefDims d{1, 20, 1100, 2, 2, 32};
  Case c = make_case(d, MaskKind::none, 51);
  c.scale = 1.0f, c.ref.scale = 1.0;
  const int64_t key_stride = d.Hkv * d.D;
  for (size_t i = 0; i < c.ref.k.size(); ++i) c.ref.k[i] *= 1 + 8.0 * double(int64_t(i) / key_stride) / double(d.Sk);
  c.q = c.q.to(DType::bf16).to(DType::f32), c.v = c.v.to(DType::bf16).to(DType::f32);
  c.k = to_tensor(c.ref.k, c.k.shape()).to(DType::bf16).to(DType::f32);
  c.ref.q = values(c.q), c.ref.k = values(c.k), c.ref.v = values(c.v);
  double gap = 0, max_score = 0;  // the largest rise of a row's max past its first 512 keys
  for (int64_t i = 0; i < d.Sq; ++i)
    for (int64_t h = 0; h < d.H; ++h) {
      double first = -1e300, all = -1e300;
      for (int64_t j = 0; j < d.Sk; ++j) {
        double s = 0;
        for (int64_t e = 0; e < d.D; ++e)
          s += c.ref.q[size_t((i * d.H + h) * d.D + e)] * c.ref.k[size_t(j * key_stride + h * d.D + e)];
        all = std::max(all, s);
        if (j < 512) first = std::max(first, s);
        max_score = std::max(max_score, std::abs(s));
      }
      gap = std::max(gap, all - first);
    }
  ASSERT_GT(gap, 40.0);
  const RefOutputs want = ref_forward(c.ref);
  double v_max = 0;
  for (double x : c.ref.v) v_max = std::max(v_max, std::abs(x));
  ScopedMatmulPrecision precision(MatmulPrecision::bf16);
  const Result r = backend("flash").forward(c.q, c.k, c.v, c.mask, c.scale);
  const double sums = 8 * std::ldexp(max_score, -24);
  EXPECT_LE(max_abs_diff(values(r.lse), want.lse), 2e-5 + sums);
  EXPECT_LE(max_abs_diff(values(r.out), want.out), std::ldexp(v_max, -9) + 2e-5 + sums);
}

TEST(AttentionForward, BadShapesAreRefusedNamingTheTensor) {
  const Case c = make_case({1, 4, 4, 3, 3, 8}, MaskKind::none, 1);
  const Tensor k2 = Tensor::zeros({1, 4, 2, 8});  // 3 query heads over 2 KV heads
  try {
    backend("flash").forward(c.q, k2, k2, Mask::none(), 1.0f);
    FAIL() << "expected a refusal";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::invalid_argument);
    EXPECT_NE(std::string(e.what()).find("multiple"), std::string::npos) << e.what();
  }
  EXPECT_THROW(backend("native").forward(c.q, c.k, c.v, Mask::key_padding(Tensor::zeros({1, 5}, DType::boolean)), 1.0f),
               Error);
}

}  // namespace
}  // namespace cpdit::attention::testing
