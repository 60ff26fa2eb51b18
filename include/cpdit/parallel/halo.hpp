#pragma once
// Parallel VAE decode: every activation's rows split over the ranks of the model's context-parallel
// group, each rank holding a contiguous band in rank order (the latent's band, scaled by the
// upsampling so far). The decoder is written single-device style and its plan splits the latent's
// rows at the decoder's input and gathers the image's rows at its output; its convolutions and
// GroupNorms call the functions below, which act locally unless a parallel context is bound
// on the calling thread (the model's forward with parallelism enabled):
// - a convolution takes the rows its kernel reaches beyond the band from the neighbouring ranks
//   (a halo exchange over point-to-point messages) and zero-pads only at the image's own top and
//   bottom, so every output row is the one-rank decode's;
// - a GroupNorm sums its statistics over the ranks before normalising;
// - per-pixel layers (SiLU, RMS norm over channels, nearest upsampling) need nothing;
// - the mid-block attention (one head) runs on sharded keys through the same router, on the ring.
// So a model that enables parallelism and uses nn::Conv2d or nn::GroupNorm must split image rows in
// its plan, as the VAEs do (the transformers' patch embedding calls its kernel directly).
#include <cpdit/comm/communicator.hpp>
#include <cpdit/core/tensor.hpp>
#include <cpdit/kernels/image.hpp>

namespace cpdit::parallel {

// The flat group of the parallel context bound on this thread (context.hpp), else nullptr (one rank).
comm::Communicator* row_split_group();

// kernels::conv3d on this rank's band of x (B, C, F, H_band, W), rows = dim 3. Under a row split the
// geometry's row stride must be 1 and every band at least as tall as the row padding.
Tensor conv3d_rows(const Tensor& x, const Tensor& weight, const Tensor& bias, const kernels::ConvGeometry& geometry);

// kernels::group_norm with statistics over the whole image: every rank's moments are gathered and
// summed in rank order, so every rank normalises with the same numbers.
Tensor group_norm_rows(const Tensor& x, int64_t groups, const Tensor& weight, const Tensor& bias, float eps);

// The frame split of a causal video decoder (AutoencoderKLWan's VideoSplit::frames): each rank
// holds a contiguous run of frames in rank order with whole rows, and a time convolution that looks
// back `count` frames takes them from the rank before. Returns the `count` frames of the whole
// stream just before this rank's x (B, C, F_local, H, W), zeros before the stream's start, and
// sends the last `count` frames of [that halo; x] to the rank after. A rank holding fewer than
// `count` frames passes on part of what it received, so the halo can cross several ranks.
Tensor time_halo(comm::Communicator& group, const Tensor& x, int64_t count);

}  // namespace cpdit::parallel
