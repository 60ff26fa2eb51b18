// How SkyReelsV2DiffusionForcingPipeline cuts a long clip into chunks (its __call__ and prepare_latents),
// and the flow_shift each kind of SkyReels-V2 model samples with.
#include <cpdit/core/error.hpp>
#include <cpdit/pipeline/skyreels_pipeline.hpp>

#include <algorithm>

namespace cpdit::pipeline {

std::vector<SkyReelsChunk> skyreels_chunks(int64_t latent_frames, int64_t base_latent_frames,
                                           std::optional<int64_t> overlap_latent_frames, int64_t block_frames) {
  CPDIT_CHECK(block_frames >= 1 && base_latent_frames >= 1, invalid_argument,
              "chunks need blocks and a base of at least one latent frame");
  auto check_whole_blocks = [&](int64_t frames, const char* what) {
    CPDIT_CHECK(frames % block_frames == 0, invalid_argument, frames, " latent frames (", what,
                ") do not split into the model's blocks of num_frame_per_block = ", block_frames, " latent frames");
  };
  if (!overlap_latent_frames || latent_frames <= base_latent_frames) {
    check_whole_blocks(latent_frames, "the clip");
    return {{latent_frames, 0, 0}};
  }
  const int64_t base = base_latent_frames, overlap = *overlap_latent_frames;
  CPDIT_CHECK(overlap >= block_frames && overlap < base, invalid_argument, "the overlap of ", overlap,
              " latent frames must be at least a block (", block_frames, ") and shorter than a chunk (", base,
              " latent frames)");
  // The prefix is the clip's last `overlap` frames cut to whole blocks at their end, as prepare_latents
  // cuts them; each later chunk still counts the whole overlap as done when it sizes itself.
  const int64_t prefix = overlap - overlap % block_frames, stride = base - overlap;
  const int64_t chunks = 1 + (latent_frames - base - 1) / stride + 1;
  std::vector<SkyReelsChunk> out{{base, 0, 0}};
  check_whole_blocks(base, "a chunk of base_num_frames");
  for (int64_t k = 1; k < chunks; ++k) {
    const int64_t finished = k * stride + overlap;
    const int64_t frames = std::min(latent_frames - finished + overlap, base);
    check_whole_blocks(frames, "the last chunk; choose frames so that it is whole blocks");
    out.push_back({frames, prefix, overlap});
  }
  return out;
}

double skyreels_flow_shift(const models::wan::WanConfig& config, bool image_to_video) {
  return image_to_video || config.in_channels == 36 ? 5.0 : 8.0;
}

}  // namespace cpdit::pipeline
