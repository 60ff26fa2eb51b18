// Position rules (causal, block-causal, each alone and with key padding) on one rank: both backends
// against the float64 reference, forward and backward, on shapes that put rule edges at every place
// a flash tile can meet them, and at global offsets as a ring's KV chunk sees them; and against
// PyTorch's float64 on the rule fixtures.
#include "cases.hpp"

#include <cpdit/attention/attention.hpp>
#include <cpdit/core/error.hpp>
#include <cpdit/io/safetensors.hpp>

#include <gtest/gtest.h>

#include <filesystem>
#include <sstream>

namespace cpdit::attention::testing {
namespace {

struct RuleCase {
  RefDims d;
  MaskRule rule;
  int64_t block;  // tokens per block (1 for causal)
  int64_t q_offset, k_offset;
  bool key_padding;
  const char* what;
};

std::string name_of(const RuleCase& rc) {
  std::ostringstream n;
  n << rc.what << "_" << (rc.rule == MaskRule::causal ? "causal" : "block") << rc.block
    << (rc.key_padding ? "_padded" : "");
  return n.str();
}

void PrintTo(const RuleCase& rc, std::ostream* os) { *os << name_of(rc); }

// The reference states the rule itself, on global positions: i = q_offset + row, j = k_offset + col.
Case rule_case(const RuleCase& rc, uint32_t seed) {
  Case c = make_case(rc.d, rc.key_padding ? MaskKind::key_padding : MaskKind::none, seed);
  Mask rule = rc.rule == MaskRule::causal ? Mask::causal() : Mask::block_causal(rc.block);
  rule.q_offset = rc.q_offset;
  rule.k_offset = rc.k_offset;
  c.mask = rc.key_padding ? rule.with_key_padding(c.mask.tensor) : rule;
  auto padding = c.ref.bias;
  c.ref.bias = [padding, rc](int64_t b, int64_t h, int64_t r, int64_t col) {
    const int64_t i = rc.q_offset + r, j = rc.k_offset + col;
    const bool hidden = rc.rule == MaskRule::causal ? j > i : j / rc.block > i / rc.block;
    return hidden ? -std::numeric_limits<double>::infinity() : padding(b, h, r, col);
  };
  return c;
}

class MaskRules : public ::testing::TestWithParam<RuleCase> {};

// Forward out and lse within 2e-5 (f32 rounding of sums over <= 600 keys, O(1) data), gradients
// within 2e-5 of the largest reference gradient (as in backward_test). Fully masked rows must be
// exactly out 0, lse -inf and zero gradients.
TEST_P(MaskRules, BothBackendsMatchFloat64) {
  const RuleCase rc = GetParam();
  const Case c = rule_case(rc, 31);
  const RefOutputs want = ref_forward(c.ref);
  const std::vector<double> dout = random_values(c.ref.q.size(), 32);
  const RefGrads want_g = ref_backward(c.ref, dout);
  for (const char* name : {"native", "flash"}) {
    SCOPED_TRACE(name);
    const Backend& b = backend(name);
    const Result r = b.forward(c.q, c.k, c.v, c.mask, c.scale);
    EXPECT_LE(max_abs_diff(values(r.out), want.out), 2e-5);
    EXPECT_LE(max_abs_diff(values(r.lse), want.lse), 2e-5);
    const std::vector<double> lse = values(r.lse), out = values(r.out);
    for (size_t e = 0; e < lse.size(); ++e) EXPECT_EQ(std::isinf(lse[e]), std::isinf(want.lse[e])) << e;
    for (double x : out) ASSERT_FALSE(std::isnan(x));
    const Grads g = b.backward(to_tensor(dout, c.q.shape()), c.q, c.k, c.v, r.out, r.lse, c.mask, c.scale);
    EXPECT_LE(max_abs_diff(values(g.dq), want_g.dq), 2e-5 * std::max(1.0, max_abs(want_g.dq)));
    const std::vector<double> dq = values(g.dq);
    const RefDims& d = rc.d;
    for (int64_t b_ = 0; b_ < d.B; ++b_)
      for (int64_t h = 0; h < d.H; ++h)
        for (int64_t i = 0; i < d.Sq; ++i) {
          if (!std::isinf(want.lse[size_t((b_ * d.H + h) * d.Sq + i)])) continue;  // sees some key
          for (int64_t e = 0; e < d.D; ++e) {
            ASSERT_EQ(out[size_t(at4(b_, i, h, e, d.Sq, d.H, d.D))], 0.0);
            ASSERT_EQ(dq[size_t(at4(b_, i, h, e, d.Sq, d.H, d.D))], 0.0);
          }
        }
    EXPECT_LE(max_abs_diff(values(g.dk), want_g.dk), 2e-5 * std::max(1.0, max_abs(want_g.dk)));
    EXPECT_LE(max_abs_diff(values(g.dv), want_g.dv), 2e-5 * std::max(1.0, max_abs(want_g.dv)));
  }
}

// Flash tiles are 128 query rows by 64..512 key columns (sized from L2), clamped to the lengths.
INSTANTIATE_TEST_SUITE_P(
    Rules, MaskRules,
    ::testing::Values(
        RuleCase{{2, 37, 37, 2, 1, 16}, MaskRule::causal, 1, 0, 0, false, "smaller_than_a_tile"},
        RuleCase{{2, 37, 37, 2, 1, 16}, MaskRule::block_causal, 5, 0, 0, true, "smaller_than_a_tile"},
        RuleCase{{1, 600, 600, 2, 2, 32}, MaskRule::causal, 1, 0, 0, false, "several_tiles"},
        RuleCase{{1, 600, 600, 2, 2, 32}, MaskRule::causal, 1, 0, 0, true, "several_tiles"},
        RuleCase{{1, 600, 600, 2, 1, 32}, MaskRule::block_causal, 100, 0, 0, false, "block_straddles_tiles"},
        RuleCase{{2, 300, 300, 2, 1, 32}, MaskRule::block_causal, 7, 0, 0, true, "block_smaller_than_tile"},
        RuleCase{{1, 260, 700, 2, 2, 16}, MaskRule::block_causal, 130, 0, 0, false, "block_equals_tile"},
        // A ring chunk: queries 150.. against keys 100..; the first block-causal rows see part of it.
        RuleCase{{1, 130, 200, 2, 1, 16}, MaskRule::block_causal, 60, 150, 100, true, "chunk_offsets"},
        // Keys after the queries: rows before key 90 see nothing (out 0, lse -inf, no gradient).
        RuleCase{{2, 40, 50, 2, 1, 16}, MaskRule::causal, 1, 70, 90, false, "rows_with_no_key"}),
    [](const auto& info) { return name_of(info.param); });

// A key tile the rule hides from a whole query tile is never read: NaN in the values of keys >= 512
// (which lie in key tiles starting at >= 128 for every tile width 64..512) cannot reach the first 128
// query rows under a causal rule. A per-element mask would still multiply P = 0 by NaN.
TEST(MaskRulesFlash, SkipsKeyTilesTheRuleHides) {
  const RuleCase rc{{1, 600, 600, 1, 1, 16}, MaskRule::causal, 1, 0, 0, false, "poison"};
  const Case c = rule_case(rc, 41);
  const RefOutputs want = ref_forward(c.ref);
  Tensor v = c.v.clone(), k = c.k.clone();
  for (int64_t j = 512; j < 600; ++j)
    for (int64_t e = 0; e < 16; ++e) {
      v.data<float>()[j * 16 + e] = std::numeric_limits<float>::quiet_NaN();
      k.data<float>()[j * 16 + e] = std::numeric_limits<float>::quiet_NaN();
    }
  const Result r = backend("flash").forward(c.q, k, v, c.mask, c.scale);
  // The first 128 query rows (1 head of 16): max_abs_diff reports a NaN as an infinite difference.
  const auto first_rows = [](const std::vector<double>& x) {
    return std::vector<double>(x.begin(), x.begin() + 128 * 16);
  };
  EXPECT_LE(max_abs_diff(first_rows(values(r.out)), first_rows(want.out)), 2e-5);
  const std::vector<double> dout = random_values(c.ref.q.size(), 42);
  const Grads g = backend("flash").backward(to_tensor(dout, c.q.shape()), c.q, k, v, r.out, r.lse, c.mask, c.scale);
  const std::vector<double> want_dq = first_rows(ref_backward(c.ref, dout).dq);
  EXPECT_LE(max_abs_diff(first_rows(values(g.dq)), want_dq), 2e-5 * std::max(1.0, max_abs(want_dq)));
}

// PyTorch float64 on dense masks built as SkyReels-V2 builds its block-causal mask
// (tools/reference/attention_rules.py); the file's metadata names the rule.
TEST(MaskRuleFixtures, BothBackendsMatchPyTorchFloat64) {
  const std::filesystem::path dir = std::filesystem::path(CPDIT_TEST_DATA) / "fixtures" / "attention_rules";
  int files = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    const io::SafetensorsFile file = io::SafetensorsFile::open(entry.path().string());
    const std::string rule = file.metadata().at("mask_rule");
    Mask mask = rule == "causal" ? Mask::causal()
                                 : Mask::block_causal(std::stoll(file.metadata().at("tokens_per_block")));
    if (file.contains("key_mask")) mask = mask.with_key_padding(file.get("key_mask"));
    const Tensor q = file.get("q"), k = file.get("k"), v = file.get("v");
    const float scale = float(1.0 / std::sqrt(double(q.size(3))));
    for (const char* name : {"native", "flash"}) {
      SCOPED_TRACE(entry.path().filename().string() + " " + name);
      const Result r = backend(name).forward(q, k, v, mask, scale);
      // f32 against float64 over <= 100 keys of O(1) data.
      EXPECT_LE(max_abs_diff(values(r.out), values(file.get("out_f64"))), 2e-5);
      EXPECT_LE(max_abs_diff(values(r.lse), values(file.get("lse_f64"))), 2e-5);
    }
    ++files;
  }
  EXPECT_EQ(files, 2);
}

TEST(MaskRulesChecks, BadRulesAreRefusedInOneLine) {
  EXPECT_THROW(Mask::block_causal(0), Error);
  Mask m = Mask::causal();
  m.q_offset = -1;
  const Case c = make_case({1, 4, 4, 1, 1, 8}, MaskKind::none, 1);
  for (const char* name : {"native", "flash"}) {
    try {
      backend(name).forward(c.q, c.k, c.v, m, c.scale);
      FAIL() << "expected a refusal";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("non-negative"), std::string::npos) << e.what();
    }
  }
}

// A backend that serves no rule is refused at setup, naming the rule and the fix.
TEST(MaskRulesChecks, BackendWithoutTheRuleIsRefused) {
  class NoRules final : public Backend {
   public:
    std::string name() const override { return "no-rules"; }
    Capabilities capabilities() const override {
      Capabilities c = backend("flash").capabilities();
      c.causal_mask = c.block_causal_mask = false;
      return c;
    }
    Result forward(const Tensor&, const Tensor&, const Tensor&, const Mask&, float) const override { return {}; }
    Grads backward(const Tensor&, const Tensor&, const Tensor&, const Tensor&, const Tensor&,
                   const Tensor&, const Mask&, float) const override { return {}; }
  };
  const NoRules b;
  for (MaskRule rule : {MaskRule::causal, MaskRule::block_causal}) {
    Requirements needs;
    needs.rule = rule;
    try {
      check_supports(b, needs);
      FAIL() << "expected a refusal";
    } catch (const Error& e) {
      const std::string msg = e.what();
      EXPECT_NE(msg.find(mask_rule_name(rule)), std::string::npos) << msg;
      EXPECT_NE(msg.find("flash"), std::string::npos) << msg;  // names the backends that do
    }
  }
}

}  // namespace
}  // namespace cpdit::attention::testing
