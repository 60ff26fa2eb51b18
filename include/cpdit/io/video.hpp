#pragma once
// Writing video as H.264 in MP4 through the FFmpeg libraries (libavcodec's libx264 encoder,
// libavformat's mp4 muxer, libswscale for RGB -> YUV 4:2:0), atomically like every output of cpdit.
#include <cpdit/core/tensor.hpp>

#include <string>

namespace cpdit::io {

// `frames` is (F, H, W, 3) f32 RGB in [0, 1] (values are clamped; NaN is refused), H and W even (4:2:0
// chroma halves both). Each value becomes round(x * 255), as diffusers' export_to_video. The file
// plays at `fps` frames per second. Throws Error(unsupported) when this FFmpeg has no libx264.
void write_mp4(const std::string& path, const Tensor& frames, int fps);

}  // namespace cpdit::io
