#include "write_outputs.hpp"

#include <cpdit/io/atomic_file.hpp>
#include <cpdit/io/png.hpp>
#include <cpdit/io/safetensors.hpp>
#include <cpdit/io/video.hpp>
#include <cpdit/pipeline/family.hpp>
#include <cpdit/pipeline/picture_files.hpp>
#include <cpdit/pipeline/preview.hpp>

namespace cpdit::app {

void write_outputs(const pipeline::Result& result, const Outputs& o) {
  const pipeline::Request& r = result.request;
  const Tensor& pixels = result.pixels;
  const bool video = result.family->video();
  io::OutputBatch outputs;
  if (!o.out.empty()) {
    nn::TensorMap tensors{{"latents", result.latents}};
    if (pixels.defined()) tensors[video ? "video" : "image"] = pixels;
    io::save_safetensors(o.out, tensors,
                         {{"format", result.family->latents_layout()},
                          {"seed", std::to_string(r.seed)},
                          {"steps", std::to_string(r.steps)}});
  }
  if (!o.preview.empty()) io::write_png(o.preview, pipeline::flux_latent_preview(result.latents), r.width, r.height);
  if (!o.image.empty()) pipeline::write_pictures(o.image, pixels, pipeline::generation_parameters(result));
  if (!o.frames_dir.empty()) pipeline::write_frame_pngs(o.frames_dir, pixels);
  // generate's video loops make one clip: item 0 of the (1, F, H, W, 3) video.
  if (!o.video.empty()) io::write_mp4(o.video, pixels.select(0, 0), int(result.family->frame_rate(r)));
  outputs.commit();
}

}  // namespace cpdit::app
