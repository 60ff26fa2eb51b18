#pragma once
// Decoded pixels (pipeline/vae_decode.hpp's postprocess_pixels) to picture files, PNG, JPEG or WebP by
// their names, each written atomically, carrying the settings that made them.
#include <cpdit/core/tensor.hpp>
#include <cpdit/io/png.hpp>
#include <cpdit/pipeline/request.hpp>

#include <string>
#include <vector>

namespace cpdit::pipeline {

// A name that says a picture format cpdit writes: .png, .jpg or .jpeg, .webp.
bool is_picture_name(const std::string& path);

// The files write_pictures writes for `batch` images: `path` itself for one; for more, one per item,
// the item's index before the extension (out.png -> out_0.png, out_1.png).
std::vector<std::string> picture_paths(const std::string& path, int64_t batch);
// image (B, H, W, 3) in [0, 1], in the format the name says: JPEG (quality 90) for .jpg and .jpeg, WebP
// (lossy, quality 90) for .webp, PNG for any other name. Every file carries `text`: a PNG as its text
// chunks, a JPEG or WebP its "parameters" alone, as an EXIF UserComment (io/image.hpp).
void write_pictures(const std::string& path, const Tensor& image, const io::PictureText& text = {});

// A run's settings as the text "parameters" (a PNG's text chunk, a JPEG's or WebP's EXIF), laid out as
// stable-diffusion.cpp and A1111 write it (so the tools that read theirs read cpdit's): the prompt (its
// LoRA adapters after it as <lora:NAME:WEIGHT>), "Negative prompt: ..." when there is one, then "Steps: 4, Sampler: flow-match Euler, Seed: 7, Size: 256x256, Model: preset flux-mini,
// Version: cpdit 0.1.0", with "Guidance" and "True CFG scale" when the request gave them.
io::PictureText generation_parameters(const Result& result);
// The scheduler the run took, in words ("DPM++ 2M"), as the parameters and generate's summary name it.
std::string scheduler_that_ran(const Result& result);

// video (B, F, H, W, 3) in [0, 1] as dir/frame_00000.png, frame_00001.png, ...; a batch of several
// videos puts item b's frames under dir/b/. The folders are created when absent; a folder that held a
// longer clip's frames is left with this clip's only (other files in it stay).
void write_frame_pngs(const std::string& dir, const Tensor& video);

}  // namespace cpdit::pipeline
