#pragma once
// What the two image families (FLUX.1, Qwen-Image) share: their image-to-image start, their defaults
// and the memory estimate of a packed-latent run.
#include <cpdit/pipeline/family.hpp>
#include <cpdit/pipeline/image_start.hpp>

namespace cpdit::pipeline {

// The image-to-image start of a run (image_start), or none without an init image.
ImageStart init_image_start(const LoopInputs& in, int64_t latent_channels);

// check_generate_fits for a (2x2-packed) image of the request's size on a transformer of `hidden` widths.
void check_image_fits(const Request& request, const Transformer& t, int64_t hidden);

}  // namespace cpdit::pipeline
