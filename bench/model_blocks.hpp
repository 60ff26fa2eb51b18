#pragma once
// What `cpdit bench model` needs from each model family: its blocks at full width with random
// weights, built and fed on every rank, and their FLOPs. bench/model.cpp runs the one timing loop
// (layouts, token counts, JSON lines) over whichever family is asked for.
#include <cpdit/comm/communicator.hpp>
#include <cpdit/nn/load.hpp>
#include <cpdit/parallel/context.hpp>

#include <functional>
#include <string>
#include <vector>

namespace cpdit::bench {

// One block's forward on one rank, ready to time.
struct TimedBlock {
  std::string block;  // e.g. "double", "single", "wan2.1-1.3b"
  std::function<void()> forward;
};

// Where the blocks' weights are held: in memory as the load converted them, or, `mapped`, written once
// in that dtype to a temporary safetensors file and mapped back, as a downloaded checkpoint is read
// (views of the file, which starts its tensors 8-byte aligned, not on cache lines).
struct WeightSource {
  nn::LoadOptions load;
  bool mapped = false;
  int64_t lora_rank = 0;  // > 0: every Linear of the blocks carries a random LoRA delta of this rank
  bool lora_merge = false;  // ... merged into its weight (--lora-merge) instead
};

struct BlockBench {
  std::string class_name;    // the model registry's name for the family
  std::string tokens_field;  // what the token counts count, e.g. "image_tokens"
  std::vector<int64_t> default_tokens, quick_tokens;
  int64_t text_tokens = 0;
  int64_t weight_bytes = 0;  // the blocks' weights, one copy shared by every thread rank
  std::function<double(int64_t tokens)> block_gflop;
  // Builds the blocks on the calling rank (sharing the weights) with its inputs for `tokens`;
  // `context` is the rank's context-parallel attention, whose shard() splits the tokens in its
  // layout, or nullptr on one rank (nothing to split).
  std::function<std::vector<TimedBlock>(int64_t tokens, parallel::ParallelContext* context)> blocks;
  // Optional: each block's output on one rank, its seeded weights loaded as `load` asks (the same
  // values whatever the dtype), for the accuracy of a dtype against f32.
  std::function<std::vector<Tensor>(int64_t tokens, const nn::LoadOptions& load)> block_outputs{};
  // The token layout of the multi-rank runs (zigzag where a causal mask would unbalance a ring).
  parallel::TokenLayout layout = parallel::TokenLayout::contiguous;
};

// A FLUX.1 double- and single-stream block (3072 = 24 heads x 128, 512 text tokens).
BlockBench flux_blocks(const WeightSource& source);
// A Wan 2.1 T2V-1.3B block (1536 = 12 heads x 128, FFN 8960, 512 text tokens).
BlockBench wan_blocks(const WeightSource& source);
// An LTX-Video 2B block (2048 = 32 heads x 64, FFN 8192, 128 text tokens split with the video).
BlockBench ltx_blocks(const WeightSource& source);
// A Qwen-Image dual-stream block (3072 = 24 heads x 128, 256 text tokens).
BlockBench qwenimage_blocks(const WeightSource& source);
// The same block as SkyReels-V2 runs it: per-token modulation, block-causal (one frame per block) and
// full self-attention timed side by side, 544x960 x 17 frames = 10,200 video tokens.
BlockBench skyreels_blocks(const WeightSource& source);

// Random weights for `module` (PyTorch's Linear initialisation, from `seed`), converted once to the
// load dtype (and mapped, where the source asks) and bound to it; blocks loaded from the result share them.
nn::StateDict shared_random_weights(nn::Module& module, uint64_t seed, const WeightSource& source);

int64_t bytes_of(const nn::StateDict& weights);

// Where `source` asks for one, a seeded random LoRA delta of its rank on every Linear of `module`: beside
// the weights as generate --lora applies it, or merged into them (--lora-merge).
void add_random_lora(nn::Module& module, const WeightSource& source);

}  // namespace cpdit::bench
