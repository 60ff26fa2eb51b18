// The RoPE table builders of models/common against diffusers' own tables (ltx_tiny, qwenimage_tiny
// fixtures; FLUX.1's and Wan's are checked by their models' intermediates) and against each other.
#include "support/random_normal.hpp"

#include <cpdit/core/error.hpp>
#include <cpdit/io/safetensors.hpp>
#include <cpdit/models/common/rope.hpp>

#include <gtest/gtest.h>

#include <cmath>
#include <numbers>
#include <string>

namespace cpdit::models::common {
namespace {

using cpdit::testing::random_normal;

std::string fixture(const std::string& model, const std::string& file) {
  return std::string(CPDIT_TEST_DATA) + "/fixtures/" + model + "/" + file;
}

// Columns 2j of a pair-repeated table: one value per pair, as a complex table holds them.
Tensor every_other_column(const Tensor& table) {
  const int64_t rows = table.size(0), pairs = table.size(1) / 2;
  std::vector<float> v;
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t j = 0; j < pairs; ++j) v.push_back(table.data<float>()[r * table.size(1) + 2 * j]);
  return Tensor::from_vector(v, {rows, pairs});
}

TEST(CommonRope, LtxFractionalTablesMatchDiffusers) {
  auto inputs = io::load_safetensors(fixture("ltx_tiny", "inputs.safetensors"));
  auto expected = io::load_safetensors(fixture("ltx_tiny", "intermediates.safetensors"));
  const Tensor scale = inputs.at("rope_interpolation_scale").to(DType::f32);
  FractionalRope options;  // ltx_tiny: patch_size_t 1, patch_size 1; diffusers' base 20, 2048, 2048
  options.interpolation_scale =
      std::array<double, 3>{scale.data<float>()[0], scale.data<float>()[1], scale.data<float>()[2]};
  const std::array<int64_t, 3> grid{inputs.at("num_frames").data<int64_t>()[0], inputs.at("height").data<int64_t>()[0],
                                    inputs.at("width").data<int64_t>()[0]};
  const RopeTables t = fractional_rope(24, grid, options);  // the inner dim, 2 heads x 12
  ASSERT_EQ(t.cos.shape(), (Shape{24, 24}));
  // Angles reach π/2·10⁴ rad, where one float32 rounding of an angle is 1e-3 rad: agreement to a
  // few ulps of cos/sin (6e-8 each; torch's vectorised cos may differ in the last bit) shows every
  // rounding step is torch's. A wrong coordinate scale or axis order moves values by O(1).
  EXPECT_LT(max_abs_diff(t.cos, expected.at("rope.0").reshape({24, 24})), 2e-7);
  EXPECT_LT(max_abs_diff(t.sin, expected.at("rope.1").reshape({24, 24})), 2e-7);
}

TEST(CommonRope, LtxPadsOddWidthsWithTheIdentity) {
  FractionalRope options;
  options.interpolation_scale = std::array<double, 3>{1.0, 1.0, 1.0};
  const RopeTables t = fractional_rope(16, {1, 2, 2}, options);  // 16 = 6·2 + 4: four identity columns
  for (int64_t token = 0; token < 4; ++token)
    for (int64_t j = 0; j < 4; ++j) {
      EXPECT_EQ(t.cos.data<float>()[token * 16 + j], 1.0f);
      EXPECT_EQ(t.sin.data<float>()[token * 16 + j], 0.0f);
    }
  EXPECT_THROW(fractional_rope(6, {1, 1, 1}, options), Error);  // one frequency: linspace needs two
}

TEST(CommonRope, LtxWithoutScaleRotatesByGridPositions) {
  // No rope_interpolation_scale: the coordinate is the grid position itself. Width 12: frequencies
  // π/2 and π/2·10⁴, no padding; token 1 of a 1x1x2 grid sits at (0, 0, 1), so 2c − 1 = (−1, −1, 1).
  const RopeTables t = fractional_rope(12, {1, 1, 2}, FractionalRope{});
  const double quarter = std::numbers::pi / 2;
  for (int a = 0; a < 3; ++a) {
    const double angle = quarter * (a == 2 ? 1.0 : -1.0);  // frequency 0, axis a: pair a, columns 2a, 2a + 1
    // float32 angles: within two ulps of the float64 rotation
    EXPECT_NEAR(t.cos.data<float>()[12 + 2 * a], std::cos(angle), 2e-7) << a;
    EXPECT_NEAR(t.sin.data<float>()[12 + 2 * a + 1], std::sin(angle), 2e-7) << a;
  }
}

TEST(CommonRope, QwenPolarTablesMatchDiffusers) {
  auto inputs = io::load_safetensors(fixture("qwenimage_tiny", "inputs.safetensors"));
  auto expected = io::load_safetensors(fixture("qwenimage_tiny", "intermediates.safetensors"));
  const Tensor shapes = inputs.at("img_shapes");  // (B, K, 3); only the first batch item counts
  std::vector<ImageSegment> segments;
  for (int64_t k = 0; k < shapes.size(1); ++k) {
    const int64_t* s = shapes.data<int64_t>() + 3 * k;
    segments.push_back({s[0], s[1], s[2]});
  }
  const int64_t text = inputs.at("encoder_hidden_states").size(1);
  const PolarRope rope = polar_rope(segments, text, {4, 6, 6}, /*scale_rope=*/true);
  for (const auto& [table, name] :
       {std::pair{&rope.image, "pos_embed.0.real_imag"}, std::pair{&rope.text, "pos_embed.1.real_imag"}}) {
    const Tensor want = expected.at(name);  // (S, pairs, 2): real, imaginary
    const int64_t rows = want.size(0), pairs = want.size(1);
    ASSERT_EQ(table->cos.shape(), (Shape{rows, 2 * pairs})) << name;
    // The same float32 angles as torch's: a few ulps of cos/sin (6e-8 each) for a last-bit difference
    // of torch's vectorised cos/sin, while a wrong position moves a value by more than 1e-2.
    EXPECT_LT(max_abs_diff(every_other_column(table->cos), want.select(2, 0).contiguous()), 2e-7) << name;
    EXPECT_LT(max_abs_diff(every_other_column(table->sin), want.select(2, 1).contiguous()), 2e-7) << name;
  }
}

TEST(CommonRope, GridIsTheTableOfTheGridsIds) {
  const std::array<int64_t, 3> grid{2, 3, 5};
  std::vector<float> ids;
  for (int64_t f = 0; f < grid[0]; ++f)
    for (int64_t h = 0; h < grid[1]; ++h)
      for (int64_t w = 0; w < grid[2]; ++w) ids.insert(ids.end(), {float(f), float(h), float(w)});
  const RopeTables from_grid = rope_grid(grid, {4, 4, 4});
  const RopeTables from_ids = rope_from_ids(Tensor::from_vector(ids, {30, 3}), {4, 4, 4});
  EXPECT_EQ(max_abs_diff(from_grid.cos, from_ids.cos), 0.0);
  EXPECT_EQ(max_abs_diff(from_grid.sin, from_ids.sin), 0.0);
}

TEST(CommonRope, FromIdsIsTheFloat64RotationOfEachAxis) {
  const Tensor ids = random_normal({7, 2}, 5);  // non-integer positions are legal
  const RopeTables t = rope_from_ids(ids, {4, 6}, 10000.0);
  for (int64_t i = 0; i < 7; ++i)
    for (int64_t c = 0; c < 10; ++c) {
      const int64_t axis = c < 4 ? 0 : 1, d = axis == 0 ? 4 : 6, j = ((axis == 0 ? c : c - 4)) / 2;
      const double angle = double(ids.data<float>()[i * 2 + axis]) / std::pow(10000.0, double(2 * j) / double(d));
      // One float32 rounding of the float64 value.
      EXPECT_NEAR(t.cos.data<float>()[i * 10 + c], std::cos(angle), 6e-8);
      EXPECT_NEAR(t.sin.data<float>()[i * 10 + c], std::sin(angle), 6e-8);
    }
}

TEST(CommonRope, WideTablesRotateEachHeadByItsSlice) {
  const Tensor x = random_normal({2, 5, 3, 4}, 1);  // (B, S, H, Dh)
  RopeTables wide{random_normal({5, 12}, 2), random_normal({5, 12}, 3)};
  const Tensor rotated = apply_rope(x, wide);
  for (int64_t h = 0; h < 3; ++h) {
    RopeTables slice{wide.cos.narrow(1, 4 * h, 4).contiguous(), wide.sin.narrow(1, 4 * h, 4).contiguous()};
    const Tensor head = x.narrow(2, h, 1).contiguous();
    EXPECT_EQ(max_abs_diff(rotated.narrow(2, h, 1).contiguous(), apply_rope(head, slice)), 0.0) << h;
  }
  EXPECT_THROW(apply_rope(x, RopeTables{random_normal({5, 8}, 4), random_normal({5, 8}, 5)}), Error);
}

}  // namespace
}  // namespace cpdit::models::common
