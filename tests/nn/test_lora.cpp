// The low-rank delta of a Linear against a float64 reference (W + up·down, on a dense and a Q8_0 base),
// and LoRA modules matched to layers: stacked adapters side by side, weights in the up columns, a fused
// name cut into its parts' rows (nn/lora.hpp).
#include <cpdit/core/error.hpp>
#include <cpdit/kernels/cpu.hpp>
#include <cpdit/nn/key_layout.hpp>
#include <cpdit/nn/layers.hpp>
#include <cpdit/nn/lora.hpp>

#include <gtest/gtest.h>

#include <random>

namespace cpdit::nn {
namespace {

Tensor random(const Shape& shape, uint32_t seed) {
  std::mt19937 gen(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  Tensor t = Tensor::empty(shape);
  for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = normal(gen);
  return t;
}

void bind(Linear& layer, const Weight& weight, const Tensor& bias) {
  for (auto& [name, p] : layer.named_parameters()) p->value = name == "weight" ? weight : Weight(bias);
}

// x (N, in) · (W + sum of up·down)ᵀ + b in float64, W as `dense` (N, out).
std::vector<double> reference(const Tensor& x, const Tensor& dense, const Tensor& bias,
                              const std::vector<std::pair<Tensor, Tensor>>& deltas) {
  const int64_t n = x.size(0), in = x.size(1), out = dense.size(0);
  std::vector<double> y(size_t(n * out));
  for (int64_t i = 0; i < n; ++i)
    for (int64_t o = 0; o < out; ++o) {
      double sum = bias.data<float>()[o];
      for (int64_t k = 0; k < in; ++k) {
        double w = dense.data<float>()[o * in + k];
        for (const auto& [down, up] : deltas)
          for (int64_t r = 0; r < down.size(0); ++r)
            w += double(up.data<float>()[o * up.size(1) + r]) * down.data<float>()[r * in + k];
        sum += double(x.data<float>()[i * in + k]) * w;
      }
      y[size_t(i * out + o)] = sum;
    }
  return y;
}

double max_error(const Tensor& got, const std::vector<double>& want) {
  double error = 0;
  for (int64_t i = 0; i < got.numel(); ++i) error = std::max(error, std::abs(got.data<float>()[i] - want[size_t(i)]));
  return error;
}

// f32 sums of 64 products of unit-normal values: a few 1e-6 of their ~10 magnitude.
constexpr double kF32Tolerance = 2e-5;

TEST(LinearDelta, AddsUpDownToTheDenseAndTheQuantisedWeight) {
  Linear layer(64, 48);
  const Tensor w = random({48, 64}, 1), b = random({48}, 2), x = random({5, 64}, 3);
  const Tensor down = random({4, 64}, 4), up = random({48, 4}, 5);
  bind(layer, w, b);
  EXPECT_TRUE(layer.plain());
  layer.set_delta({down, up});
  EXPECT_FALSE(layer.plain());  // fused callers must run its forward
  EXPECT_LT(max_error(layer.forward(x), reference(x, w, b, {{down, up}})), kF32Tolerance);
  // A Q8_0 base: the delta adds to the decoded weight (the base stays quantised).
  const Weight q8 = kernels::quantise(w, "Q8_0");
  bind(layer, q8, b);
  EXPECT_LT(max_error(layer.forward(x), reference(x, kernels::dequantise(q8), b, {{down, up}})), kF32Tolerance);
  layer.set_delta({});
  EXPECT_TRUE(layer.plain());
  try {
    layer.set_delta({random({4, 32}, 6), up});
    FAIL() << "a delta over 32 inputs was set on a Linear of 64";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("must be f32 down (rank, 64) and up (48, rank), got f32(4, 32)"),
              std::string::npos)
        << e.what();
  }
}

// A model of two blocks, each a fused-by-the-release q and k, and an output layer.
class Block : public Module {
 public:
  Block() : q(add_module<Linear>("to_q", 8, 6)), k(add_module<Linear>("to_k", 8, 2)) {}
  Linear &q, &k;
};
class Tiny : public Module {
 public:
  Tiny() : blocks(add_module<ModuleList<Block>>("blocks")), out(add_module<Linear>("proj_out", 8, 8)) {
    blocks.append();
    blocks.append();
  }
  ModuleList<Block>& blocks;
  Linear& out;
};

const KeyLayout kLayout = {{{"head", "proj_out"}}, {{"layers", "blocks", {}, {{"qk", {"to_q", "to_k"}}}}}};

TEST(LoraDeltas, StackedAdaptersAndFusedNamesLandOnTheirLayers) {
  Tiny model;
  auto one = std::make_shared<LoraFile>();
  one->path = "one.safetensors";
  // The release's fused qk of block 1 (8 rows: q's 6, then k's 2) and kohya's name of the output layer.
  one->modules = {{"layers.1.qk", random({3, 8}, 1), random({8, 3}, 2), 0.5},
                  {"lora_unet_head", random({2, 8}, 3), random({8, 2}, 4), 1.0}};
  auto two = std::make_shared<LoraFile>();
  two->path = "two.safetensors";
  two->modules = {{"blocks.1.to_k", random({5, 8}, 5), random({2, 5}, 6), 2.0}};
  const LoraDeltas deltas = lora_deltas(model, {{one, 0.8}, {two, -1.0}}, &kLayout, "the tiny model");
  ASSERT_EQ(deltas.size(), 3u);  // blocks.1.to_q, blocks.1.to_k, proj_out
  const LowRankDelta& k = deltas.at("blocks.1.to_k");
  ASSERT_EQ(k.down.shape(), (Shape{8, 8}));  // rank 3 of the fused file beside rank 5 of the other
  ASSERT_EQ(k.up.shape(), (Shape{2, 8}));
  // up: the fused up's rows 6 and 7 times 0.5·0.8, then the other's times 2·(-1).
  const LoraModule& fused = one->modules[0];
  EXPECT_FLOAT_EQ(k.up.data<float>()[0], fused.up.data<float>()[6 * 3] * 0.4f);
  EXPECT_FLOAT_EQ(k.up.data<float>()[8 + 3], two->modules[0].up.data<float>()[5] * -2.0f);
  EXPECT_EQ(deltas.at("blocks.1.to_q").up.shape(), (Shape{6, 3}));
  apply_lora(model, {deltas, {}});
  EXPECT_FALSE(model.blocks[1].q.plain());
  EXPECT_TRUE(model.blocks[0].q.plain());
  apply_lora(model, {});
  EXPECT_TRUE(model.blocks[1].q.plain());

  // A module naming no layer, and one of another size, are refused naming them.
  auto stray = std::make_shared<LoraFile>();
  stray->path = "stray.safetensors";
  stray->modules = {{"blocks.0.to_v", random({2, 8}, 7), random({6, 2}, 8), 1.0}};
  try {
    lora_deltas(model, {{stray, 1.0}}, &kLayout, "the tiny model");
    FAIL() << "blocks.0.to_v was matched";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("1 of 1 modules name no layer of the tiny model (e.g. 'blocks.0.to_v')"),
              std::string::npos)
        << e.what();
  }
  stray->modules = {{"layers.0.qk", random({2, 8}, 7), random({6, 2}, 8), 1.0}};
  try {
    lora_deltas(model, {{stray, 1.0}}, &kLayout, "the tiny model");
    FAIL() << "6 rows were cut for 8";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("maps 8 features to 6, but its 2 layers from blocks.0.to_q of the tiny "
                                         "model map 8 to 8"),
              std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace cpdit::nn
