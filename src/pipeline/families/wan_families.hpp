#pragma once
// What the Wan-network families (Wan 2.1 / 2.2 and SkyReels-V2) share: the Wan VAE's factors, UniPC,
// image-to-video by conditioning (WanImageToVideoPipeline, SkyReelsV2ImageToVideoPipeline), the memory
// estimate of a latent video, and the loop over one or two guidance passes.
#include <cpdit/models/wan/model.hpp>
#include <cpdit/pipeline/family.hpp>
#include <cpdit/pipeline/wan_image.hpp>

#include <functional>

namespace cpdit::pipeline {

// WanPipeline's encode_prompt (SkyReels-V2's alike): the prompt cleaned of surrounding and repeated
// whitespace, UMT5 with the attention mask, the padded positions zeroed; the negative prompt (default "").
nn::TensorMap encode_wan_prompt(const TextComponents& components, const PromptEncoding& request);

// The Wan VAE's factors from the folder's vae/config.json, when it has one.
void read_wan_vae(Transformer& t, const PipelineFolder& folder);

// The scheduler: the folder's scheduler_config.json, else Wan 2.1's UniPC at `flow_shift`.
UniPCConfig wan_schedule(const Transformer& t, double flow_shift);
// The same with the request's --flow-shift and --sigmas applied.
UniPCConfig wan_schedule(const Transformer& t, double flow_shift, const SchedulerChoice& choice);

// Refuses what image-to-video by conditioning cannot run: a first image is required, a last one only on
// a first-last-frame model (pos_embed_seq_len set) when it reads CLIP tokens.
void check_image_to_video(const Request& r, const Transformer& t, const models::wan::WanConfig& config);

// The first image must be one this family takes (`takes_it`), naming what it is otherwise.
void check_first_image_taken(const Request& r, const Transformer& t, const models::wan::WanConfig& config,
                             bool takes_it);

// check_generate_fits for the request's clip; the model sees `model_frames` latent frames at a time
// (0: all of them).
void check_video_fits(const Request& r, const Transformer& t, const models::wan::WanConfig& config,
                      int64_t model_frames = 0);

// A Wan-family loop on one rank's replica, given the prompt embeddings and the options from the request.
using VideoGenerate =
    std::function<WanGenerateResult(const nn::Model&, const Tensor& prompt_embeds, const WanGenerateOptions&)>;

// A Wan-network family's guidance when the request leaves it unset: `guidance` (the pipeline's default),
// and for Wan 2.2's low-noise expert the same unless given.
// TaylorSeer's modules on Wan's network: its attentions, blocks.N.attn1 and attn2 (which diffusers' default
// patterns, ending in "attn", miss: there it hooks nothing on Wan unless given these, as the
// cache_wan_tiny fixture does).
std::vector<std::string> wan_taylor_seer_modules();

void fill_wan_guidance(Request& r, const Transformer& t, float guidance);

// The loop of a Wan-network family: the prompt (and negative prompt) embeddings, guidance, Wan 2.2's
// second expert, then `generate` on every rank.
RankLoop video_loop(const LoopInputs& in, const models::wan::WanConfig& config, VideoGenerate generate);

// WanPipeline's loop, and with an image-to-video model WanImageToVideoPipeline's and
// SkyReelsV2ImageToVideoPipeline's (the images encoded here, before the ranks start).
RankLoop wan_loop(const LoopInputs& in, const models::wan::WanConfig& config, double flow_shift);

}  // namespace cpdit::pipeline
