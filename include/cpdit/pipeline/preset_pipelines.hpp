#pragma once
// The rest of a preset's pipeline beside its transformer (presets.hpp), with seeded random weights at
// the widths the transformer reads, so a preset goes from a prompt to pixels with no download:
//   flux-*: CLIP (hidden = pooled_projection_dim) and T5 (d_model = joint_attention_dim), one layer
//     each, with the built-in tokenizers; AutoencoderKL with 16 latent channels and 4 blocks (scale
//     factor 8, as FLUX.1's), narrow (16 to 32 channels), FLUX.1's scaling and shift factors.
//   wan-*: UMT5 (d_model = text_dim), one layer, with the built-in SentencePiece tokenizer;
//     AutoencoderKLWan with z_dim 16, Wan 2.1's factors (8 spatial, 4 temporal), base_dim 8.
//   qwen-*: Qwen2.5-VL's language model (hidden = joint_attention_dim, 28 query heads over 4 key/value
//     heads as the 7B's), one layer, with the built-in Qwen2 tokenizer; the same AutoencoderKLWan as
//     wan-*, the architecture of Qwen-Image's VAE.
//   ltx-*: T5 (d_model = caption_channels), one layer, with the built-in SentencePiece tokenizer;
//     AutoencoderKLLTXVideo in LTX-Video 0.9.1's layout (timestep-conditioned, residual depth-to-space
//     upsamplers: 32x in space, 8x in time, as the released VAEs) at narrow widths (8 to 32 channels).
#include <cpdit/models/registry.hpp>
#include <cpdit/pipeline/prompt_encoding.hpp>

#include <cstdint>
#include <string>

namespace cpdit::pipeline {

// The preset's text encoders, each built when the encode stage asks for it (seeded random weights,
// the built-in tokenizers).
TextComponents preset_text_components(const std::string& name, uint64_t seed);
models::LoadedModel preset_vae(const std::string& name, uint64_t seed);

}  // namespace cpdit::pipeline
