// The Wan 2.1 T2V-1.3B transformer block for `cpdit bench model`, as Wan and SkyReels-V2 (the same
// network) run it. Ranks split the video tokens as the two plans do (RoPE tables, hidden states and
// SkyReels-V2's per-token modulation on the token dim); the 512 text tokens stay whole on every rank
// (cross-attention to replicated keys).
//   wan       a 480x832 17-frame clip is latent 16 x 5 x 60 x 104 = 5 x 30 x 52 = 7800 tokens; the
//             quarter-size clip 5 x 15 x 26 = 1950 tokens; one timestep for the clip.
//   skyreels  a 544x960 17-frame clip is 5 x 34 x 60 = 10,200 tokens (quick: 5 x 17 x 30 = 2550), one
//             timestep per latent frame (diffusion forcing), timed twice: block-causal over blocks of
//             one frame (a frame sees itself and the frames before it: 60% of the scores) and full;
//             split in SkyReels-V2's zigzag layout, so each ring rank sees as many keys.
#include "measure.hpp"
#include "model_blocks.hpp"

#include <cpdit/core/error.hpp>
#include <cpdit/kernels/cpu.hpp>
#include <cpdit/models/common/wan_layers.hpp>
#include <cpdit/parallel/context.hpp>

#include <memory>

namespace cpdit::bench {

namespace {
constexpr int64_t kDim = 1536, kHeads = 12, kHeadDim = 128, kFfn = 8960, kText = 512, kChannels = 16;
constexpr std::array<int64_t, 3> kPatch{1, 2, 2};

// Latent (frames, rows, columns) of patches.
using Grid = std::array<int64_t, 3>;

// One timed variant of the block: its name and the latent frames per causal block (0: full attention).
struct Variant {
  std::string block;
  int64_t frames_per_block = 0;
};

std::unique_ptr<models::common::wan::Block> make_block() {
  return std::make_unique<models::common::wan::Block>(kDim, kHeads, kHeadDim, kFfn, /*cross_attn_norm=*/true, 1e-6f);
}

// The block at the clips' token counts: `grids` the clips (the first is --quick's), `per_token_temb`
// one timestep projection per token (expanded from one per frame) instead of one for the clip,
// `layout` how the ranks split the tokens.
BlockBench wan21_block_bench(const WeightSource& source, std::string class_name, std::vector<Grid> grids,
                             std::vector<Variant> variants, bool per_token_temb,
                             parallel::TokenLayout layout = parallel::TokenLayout::contiguous) {
  const nn::LoadOptions& load = source.load;
  auto weights = std::make_shared<const nn::StateDict>(shared_random_weights(*make_block(), 1, source));
  // 2 FLOP per multiply-add: projections of the video tokens (self q k v o, cross q o, FFN), the
  // text keys and values, and the two attentions (self-attention counted in full, mask or not).
  auto gflop = [](int64_t s) {
    const double d = kDim;
    return (2.0 * s * (6 * d * d + 2 * d * kFfn) + 2.0 * kText * 2 * d * d + 4.0 * s * s * d + 4.0 * s * kText * d) /
           1e9;
  };
  std::vector<int64_t> tokens;
  std::string sizes;
  for (const Grid& g : grids) {
    tokens.push_back(g[0] * g[1] * g[2]);
    sizes += (sizes.empty() ? "" : " or ") + std::to_string(tokens.back());
  }
  auto grid_for = [grids, tokens, sizes](int64_t n) {
    for (size_t i = 0; i < grids.size(); ++i)
      if (tokens[i] == n) return grids[i];
    fail(ErrorKind::invalid_argument, "bench model: --image-tokens must be ", sizes, " for this model, got ", n);
  };
  auto blocks = [weights, load, grid_for, variants, per_token_temb, source](int64_t n,
                                                                            parallel::ParallelContext* context) {
    const Grid grid = grid_for(n);
    std::shared_ptr<models::common::wan::Block> block = make_block();
    nn::load_state_dict(*block, *weights, load);
    add_random_lora(*block, source);
    const Tensor latent = Tensor::empty({1, kChannels, grid[0] * kPatch[0], grid[1] * kPatch[1], grid[2] * kPatch[2]});
    std::vector<Tensor> rope = models::common::wan::RotaryPosEmbed(kHeadDim, kPatch, 1024).forward(latent);
    Tensor x = random_tensor({1, n, kDim}, 11), cos = rope[0], sin = rope[1];
    const Tensor text = random_tensor({1, kText, kDim}, 12);
    // Modulation-sized; the same per token (the values do not change the cost).
    Tensor temb = kernels::mul(random_tensor({1, 6, kDim}, 13), Tensor::full({1}, 0.1));
    if (per_token_temb) temb = kernels::add(Tensor::zeros({1, n, 6, kDim}), temb.reshape({1, 1, 6, kDim}));
    if (context) {
      x = context->shard(x, 1);
      cos = context->shard(cos, 1);
      sin = context->shard(sin, 1);
      if (per_token_temb) temb = context->shard(temb, 1);
    }
    std::vector<TimedBlock> timed;
    for (const Variant& v : variants) {
      const attention::Mask mask = v.frames_per_block > 0
                                       ? attention::Mask::block_causal(v.frames_per_block * grid[1] * grid[2])
                                       : attention::Mask::none();
      timed.push_back(
          {v.block, [block, x, text, temb, cos, sin, mask] { block->forward(x, text, temb, cos, sin, mask); }});
    }
    return timed;
  };
  return {.class_name = std::move(class_name),
          .tokens_field = "video_tokens",
          .default_tokens = tokens,
          .quick_tokens = {tokens.front()},
          .text_tokens = kText,
          .weight_bytes = bytes_of(*weights),
          .block_gflop = gflop,
          .blocks = blocks,
          .layout = layout};
}

}  // namespace

BlockBench wan_blocks(const WeightSource& source) {
  return wan21_block_bench(source, "WanTransformer3DModel", {{5, 15, 26}, {5, 30, 52}}, {{"wan2.1-1.3b"}}, false);
}

BlockBench skyreels_blocks(const WeightSource& source) {
  return wan21_block_bench(source, "SkyReelsV2Transformer3DModel", {{5, 17, 30}, {5, 34, 60}},
                           {{"skyreels-v2-1.3b-block-causal", 1}, {"skyreels-v2-1.3b-full", 0}}, true,
                           parallel::TokenLayout::zigzag);
}

}  // namespace cpdit::bench
