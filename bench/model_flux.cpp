// FLUX.1 blocks for `cpdit bench model`: one double-stream and one single-stream block at FLUX.1
// widths with 512 text tokens. Ranks split the image and text tokens (and their position ids) as
// the FLUX.1 plan does.
#include "measure.hpp"
#include "model_blocks.hpp"

#include <cpdit/models/flux/blocks.hpp>
#include <cpdit/parallel/context.hpp>

#include <cmath>
#include <memory>

namespace cpdit::bench {

namespace {
constexpr int64_t kDim = 3072, kHeads = 24, kHeadDim = 128, kText = 512;

// Seeded block inputs for `image` tokens (this rank's share of them when `context` splits them).
struct Inputs {
  Tensor x, c, temb, cos, sin;
};

Inputs inputs(int64_t image, parallel::ParallelContext* context) {
  const int64_t side = int64_t(std::lround(std::sqrt(double(image))));
  std::vector<float> ids;
  for (int64_t i = 0; i < image; ++i) ids.insert(ids.end(), {0.0f, float(i / side), float(i % side)});
  Tensor x = random_tensor({1, image, kDim}, 11), c = random_tensor({1, kText, kDim}, 12);
  Tensor img = Tensor::from_vector(ids, {image, 3}), txt = Tensor::zeros({kText, 3});
  if (context) {
    x = context->shard(x, 1);
    c = context->shard(c, 1);
    txt = context->shard(txt, 0);
    img = context->shard(img, 0);
  }
  const std::vector<Tensor> rope = models::flux::PosEmbed({16, 56, 56}).forward(cat({txt, img}, 0));
  return {x, c, random_tensor({1, kDim}, 13), rope[0], rope[1]};
}
}  // namespace

BlockBench flux_blocks(const WeightSource& source) {
  const nn::LoadOptions& load = source.load;
  using models::flux::DoubleBlock;
  using models::flux::SingleBlock;
  DoubleBlock dbl(kDim, kHeads, kHeadDim);
  SingleBlock single(kDim, kHeads, kHeadDim);
  auto dbl_weights = std::make_shared<const nn::StateDict>(shared_random_weights(dbl, 1, source));
  auto single_weights = std::make_shared<const nn::StateDict>(shared_random_weights(single, 2, source));

  // 2 x (12 D^2 per token in the projections) + 4 S^2 D in attention; the same for both block kinds.
  auto gflop = [](int64_t image) {
    const double tokens = double(image + kText);
    return (24.0 * kDim * kDim * tokens + 4.0 * tokens * tokens * kDim) / 1e9;
  };
  auto blocks = [dbl_weights, single_weights, load, source](int64_t image, parallel::ParallelContext* context) {
    auto dbl = std::make_shared<DoubleBlock>(kDim, kHeads, kHeadDim);
    auto single = std::make_shared<SingleBlock>(kDim, kHeads, kHeadDim);
    nn::load_state_dict(*dbl, *dbl_weights, load);
    nn::load_state_dict(*single, *single_weights, load);
    add_random_lora(*dbl, source);
    add_random_lora(*single, source);
    const Inputs in = inputs(image, context);
    return std::vector<TimedBlock>{{"double", [dbl, in] { dbl->forward(in.x, in.c, in.temb, in.cos, in.sin); }},
                                   {"single", [single, in] { single->forward(in.x, in.c, in.temb, in.cos, in.sin); }}};
  };
  // Each block's image-token output on one rank with the same seeded weights loaded as `as` asks.
  auto outputs = [](int64_t image, const nn::LoadOptions& as) {
    DoubleBlock dbl(kDim, kHeads, kHeadDim);
    SingleBlock single(kDim, kHeads, kHeadDim);
    shared_random_weights(dbl, 1, {as});
    shared_random_weights(single, 2, {as});
    const Inputs in = inputs(image, nullptr);
    return std::vector<Tensor>{dbl.forward(in.x, in.c, in.temb, in.cos, in.sin)[1],
                               single.forward(in.x, in.c, in.temb, in.cos, in.sin)[1]};
  };
  return {.class_name = "FluxTransformer2DModel",
          .tokens_field = "image_tokens",
          .default_tokens = {1024, 4096},
          .quick_tokens = {1024},
          .text_tokens = kText,
          .weight_bytes = bytes_of(*dbl_weights) + bytes_of(*single_weights),
          .block_gflop = gflop,
          .blocks = blocks,
          .block_outputs = outputs};
}

}  // namespace cpdit::bench
