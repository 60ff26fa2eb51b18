// Qwen-Image blocks for `cpdit bench model`: one QwenImageTransformerBlock at the released widths
// (3072 = 24 heads x 128) with 256 text tokens, unmasked. Ranks split the image and text tokens and
// their RoPE tables as the Qwen-Image plan does (tables computed whole, then split).
#include "measure.hpp"
#include "model_blocks.hpp"

#include <cpdit/core/error.hpp>
#include <cpdit/models/qwenimage/blocks.hpp>
#include <cpdit/parallel/context.hpp>

#include <cmath>
#include <memory>

namespace cpdit::bench {

namespace {
constexpr int64_t kDim = 3072, kHeads = 24, kHeadDim = 128, kText = 256;
}  // namespace

BlockBench qwenimage_blocks(const WeightSource& source) {
  const nn::LoadOptions& load = source.load;
  using models::qwenimage::TransformerBlock;
  TransformerBlock block(kDim, kHeads, kHeadDim);
  auto weights = std::make_shared<const nn::StateDict>(shared_random_weights(block, 3, source));

  // Per token: modulation is per item, so the projections are q, k, v, out (4 D^2) and the MLP (8 D^2),
  // 2 FLOP each: 24 D^2; attention 4 S^2 D. Both streams alike.
  auto gflop = [](int64_t image) {
    const double tokens = double(image + kText);
    return (24.0 * kDim * kDim * tokens + 4.0 * tokens * tokens * kDim) / 1e9;
  };
  auto blocks = [weights, load](int64_t image, parallel::ParallelContext* context) {
    auto b = std::make_shared<TransformerBlock>(kDim, kHeads, kHeadDim);
    nn::load_state_dict(*b, *weights, load);
    // A square image of `image` tokens as one segment (1, side, side).
    const int64_t side = int64_t(std::lround(std::sqrt(double(image))));
    CPDIT_CHECK(side * side == image, invalid_argument,
                "bench model --model qwenimage needs a square token count, got ", image);
    Tensor img_shapes = Tensor::empty({1, 1, 3}, DType::i64);
    img_shapes.data<int64_t>()[0] = 1, img_shapes.data<int64_t>()[1] = side, img_shapes.data<int64_t>()[2] = side;
    std::vector<Tensor> rope = models::qwenimage::PosEmbed({16, 56, 56}).forward(img_shapes, kText);
    Tensor x = random_tensor({1, image, kDim}, 21), c = random_tensor({1, kText, kDim}, 22);
    const Tensor temb = random_tensor({1, kDim}, 23);
    if (context) {
      x = context->shard(x, 1);
      c = context->shard(c, 1);
      for (Tensor& table : rope) table = context->shard(table, 0);
    }
    const Tensor cos = cat({rope[2], rope[0]}, 0), sin = cat({rope[3], rope[1]}, 0);
    return std::vector<TimedBlock>{
        {"dual-stream", [b, x, c, temb, cos, sin] { b->forward(x, c, Tensor(), temb, cos, sin); }}};
  };
  return {.class_name = "QwenImageTransformer2DModel",
          .tokens_field = "image_tokens",
          .default_tokens = {4096},
          .quick_tokens = {1024},
          .text_tokens = kText,
          .weight_bytes = bytes_of(*weights),
          .block_gflop = gflop,
          .blocks = blocks};
}

}  // namespace cpdit::bench
