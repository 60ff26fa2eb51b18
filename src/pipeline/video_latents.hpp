#pragma once
// The latent shape of a video pipeline (Wan, SkyReels-V2, LTX-Video), whose VAE compresses time by
// `temporal` after a first frame of its own and space by `spatial`: the sizes the pipelines' own
// checks accept, and an error naming the nearest frame counts for the others.
#include <cpdit/core/error.hpp>
#include <cpdit/core/tensor.hpp>

#include <algorithm>

namespace cpdit::pipeline {

// (batch, channels, (frames - 1) / temporal + 1, height / spatial, width / spatial); height and width
// must be positive multiples of `size_unit` (the spatial factor, times the transformer's patch where
// it has one) and frames temporal·k + 1.
inline Shape video_latent_shape(int64_t batch, int64_t channels, int64_t frames, int64_t height, int64_t width,
                                int64_t temporal, int64_t spatial, int64_t size_unit) {
  const int64_t t = temporal;
  CPDIT_CHECK(height > 0 && width > 0 && height % size_unit == 0 && width % size_unit == 0, invalid_argument,
              "height and width must be positive multiples of ", size_unit, ", got ", height, "x", width);
  CPDIT_CHECK(frames >= 1 && (frames - 1) % t == 0, invalid_argument, "frames must be ", t, "k + 1, got ", frames,
              "; the nearest are ", std::max<int64_t>(1, (frames - 1) / t * t + 1), " and ",
              ((frames - 1) / t + 1) * t + 1);
  return {batch, channels, (frames - 1) / t + 1, height / spatial, width / spatial};
}

}  // namespace cpdit::pipeline
