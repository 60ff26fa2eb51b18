// An LTX-Video 2B transformer block for `cpdit bench model`: a 768x512 25-frame video is latent
// 128 x 4 x 16 x 24 = 1536 tokens (32x spatial, 8x temporal compression, patch 1), with 128 T5
// tokens of which the last 28 are padding; the quick size is 4 x 8 x 12 = 384 tokens. Ranks split
// the video tokens, the RoPE tables, the text and its mask as the LTX plan does, so cross-attention
// runs on sharded text keys.
#include "measure.hpp"
#include "model_blocks.hpp"

#include <cpdit/core/error.hpp>
#include <cpdit/kernels/cpu.hpp>
#include <cpdit/models/ltx_video/blocks.hpp>
#include <cpdit/parallel/context.hpp>

#include <memory>

namespace cpdit::bench {

namespace {
constexpr int64_t kDim = 2048, kHeads = 32, kHeadDim = 64, kText = 128, kRealText = 100;

std::array<int64_t, 3> grid_for(int64_t tokens) {
  if (tokens == 1536) return {4, 16, 24};
  if (tokens == 384) return {4, 8, 12};
  fail(ErrorKind::invalid_argument, "bench model --model ltx: --image-tokens must be 1536 (4 x 16 x 24) or 384 "
       "(4 x 8 x 12), got ", tokens);
}

std::unique_ptr<models::ltx_video::TransformerBlock> make_block() {
  return std::make_unique<models::ltx_video::TransformerBlock>(kDim, kHeads, kHeadDim, 1e-6f);
}
}  // namespace

BlockBench ltx_blocks(const WeightSource& source) {
  const nn::LoadOptions& load = source.load;
  auto weights = std::make_shared<const nn::StateDict>(shared_random_weights(*make_block(), 1, source));
  // 2 FLOP per multiply-add: projections of the video tokens (self q k v o, cross q o, FFN 4D), the
  // text keys and values, and the two attentions.
  auto gflop = [](int64_t s) {
    const double d = kDim;
    return (2.0 * s * (6 * d * d + 8 * d * d) + 2.0 * kText * 2 * d * d + 4.0 * s * s * d + 4.0 * s * kText * d) / 1e9;
  };
  auto blocks = [weights, load](int64_t tokens, parallel::ParallelContext* context) {
    std::shared_ptr<models::ltx_video::TransformerBlock> block = make_block();
    nn::load_state_dict(*block, *weights, load);
    std::vector<Tensor> rope = models::ltx_video::RotaryPosEmbed(kDim, 1, 1)
                                   .forward(grid_for(tokens), std::array<double, 3>{8.0 / 24, 32, 32});
    Tensor x = random_tensor({1, tokens, kDim}, 11), cos = rope[0], sin = rope[1];
    Tensor text = random_tensor({1, kText, kDim}, 12);
    Tensor mask = Tensor::empty({1, kText}, DType::boolean);
    for (int64_t j = 0; j < kText; ++j) mask.data<bool>()[j] = j < kRealText;
    const Tensor temb = kernels::mul(random_tensor({1, 6, kDim}, 13), Tensor::full({1}, 0.1));  // modulation-sized
    if (context) {
      x = context->shard(x, 1);
      cos = context->shard(cos, 1);
      sin = context->shard(sin, 1);
      text = context->shard(text, 1);
      mask = context->shard(mask, 1);
    }
    return std::vector<TimedBlock>{
        {"ltx-2b", [block, x, text, temb, cos, sin, mask] { block->forward(x, text, temb, cos, sin, mask); }}};
  };
  return {.class_name = "LTXVideoTransformer3DModel",
          .tokens_field = "video_tokens",
          .default_tokens = {1536},
          .quick_tokens = {384},
          .text_tokens = kText,
          .weight_bytes = bytes_of(*weights),
          .block_gflop = gflop,
          .blocks = blocks};
}

}  // namespace cpdit::bench
