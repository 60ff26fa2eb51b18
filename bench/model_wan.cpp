// A Wan 2.1 T2V-1.3B transformer block for `cpdit bench model`: a 480x832 17-frame clip is latent
// 16 x 5 x 60 x 104 = 5 x 30 x 52 = 7800 tokens; the quarter-size clip 5 x 15 x 26 = 1950 tokens.
// Ranks split the video tokens as the Wan plan does (RoPE tables and hidden states on the token
// dim); the 512 text tokens stay whole on every rank (cross-attention to replicated keys).
#include "measure.hpp"
#include "model_blocks.hpp"

#include <cpdit/core/error.hpp>
#include <cpdit/kernels/cpu.hpp>
#include <cpdit/models/common/wan_layers.hpp>
#include <cpdit/parallel/shard.hpp>

#include <memory>

namespace cpdit::bench {

namespace {
constexpr int64_t kDim = 1536, kHeads = 12, kHeadDim = 128, kFfn = 8960, kText = 512, kChannels = 16;
constexpr std::array<int64_t, 3> kPatch{1, 2, 2};

// Latent (frames, rows, columns) of patches for the clip sizes named above: 5 frames, 30 x 52 at
// 480x832 and half of each side for the quarter-size clip.
std::array<int64_t, 3> grid_for(int64_t tokens) {
  for (int64_t rows : {30, 15})
    if (tokens == 5 * rows * (rows * 52 / 30)) return {5, rows, rows * 52 / 30};
  fail(ErrorKind::invalid_argument, "bench model --model wan: --image-tokens must be 7800 (5 x 30 x 52) or 1950 (5 x 15 x 26), got ",
       tokens);
}

std::unique_ptr<models::common::wan::Block> make_block() {
  return std::make_unique<models::common::wan::Block>(kDim, kHeads, kHeadDim, kFfn, /*cross_attn_norm=*/true, 1e-6f);
}
}  // namespace

BlockBench wan_blocks(const nn::LoadOptions& load) {
  auto weights = std::make_shared<const nn::StateDict>(shared_random_weights(*make_block(), 1, load));
  // 2 FLOP per multiply-add: projections of the video tokens (self q k v o, cross q o, FFN), the
  // text keys and values, and the two attentions.
  auto gflop = [](int64_t s) {
    const double d = kDim;
    return (2.0 * s * (6 * d * d + 2 * d * kFfn) + 2.0 * kText * 2 * d * d + 4.0 * s * s * d + 4.0 * s * kText * d) / 1e9;
  };
  auto blocks = [weights, load](int64_t tokens, comm::Communicator* flat) {
    const auto grid = grid_for(tokens);
    std::shared_ptr<models::common::wan::Block> block = make_block();
    nn::load_state_dict(*block, *weights, load);
    const Tensor latent = Tensor::empty({1, kChannels, grid[0] * kPatch[0], grid[1] * kPatch[1], grid[2] * kPatch[2]});
    std::vector<Tensor> rope = models::common::wan::RotaryPosEmbed(kHeadDim, kPatch, 1024).forward(latent);
    Tensor x = random_tensor({1, tokens, kDim}, 11), cos = rope[0], sin = rope[1];
    const Tensor text = random_tensor({1, kText, kDim}, 12);
    const Tensor temb = kernels::mul(random_tensor({1, 6, kDim}, 13), Tensor::full({1}, 0.1));  // modulation-sized
    if (flat) {
      x = parallel::shard(x, 1, *flat);
      cos = parallel::shard(cos, 1, *flat);
      sin = parallel::shard(sin, 1, *flat);
    }
    return std::vector<TimedBlock>{
        {"wan2.1-1.3b", [block, x, text, temb, cos, sin] { block->forward(x, text, temb, cos, sin); }}};
  };
  return {.class_name = "WanTransformer3DModel",
          .tokens_field = "video_tokens",
          .default_tokens = {1950, 7800},
          .quick_tokens = {1950},
          .text_tokens = kText,
          .weight_bytes = bytes_of(*weights),
          .block_gflop = gflop,
          .blocks = blocks};
}

}  // namespace cpdit::bench
