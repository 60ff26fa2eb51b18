#pragma once
// Parallel VAE decode: every activation's rows split over the ranks of a group, each rank holding a
// contiguous band in rank order (the latent's band, scaled by the upsampling so far). The decoder is
// written single-device style; its convolutions and GroupNorms call the functions below, which act
// locally unless a row split is bound on the calling thread:
// - a convolution takes the rows its kernel reaches beyond the band from the neighbouring ranks
//   (a halo exchange over point-to-point messages) and zero-pads only at the image's own top and
//   bottom, so every output row is the one-rank decode's;
// - a GroupNorm sums its statistics over the ranks before normalising;
// - per-pixel layers (SiLU, RMS norm over channels, nearest upsampling) need nothing;
// - the mid-block attention runs on sharded keys through the context-parallel router (enable it on
//   the model with ring_degree = group size).
#include <cpdit/comm/communicator.hpp>
#include <cpdit/core/tensor.hpp>
#include <cpdit/kernels/image.hpp>

#include <functional>

namespace cpdit::parallel {

// Binds `group` as this thread's row split while it lives (ranks are threads); nests.
class ScopedRowSplit {
 public:
  explicit ScopedRowSplit(comm::Communicator& group);
  ~ScopedRowSplit();
  ScopedRowSplit(const ScopedRowSplit&) = delete;
  ScopedRowSplit& operator=(const ScopedRowSplit&) = delete;

 private:
  comm::Communicator* previous_;
};

comm::Communicator* bound_row_split();  // nullptr when decoding on one rank

// kernels::conv3d on this rank's band of x (B, C, F, H_band, W), rows = dim 3. Under a row split the
// geometry's row stride must be 1 and every band at least as tall as the row padding.
Tensor conv3d_rows(const Tensor& x, const Tensor& weight, const Tensor& bias, const kernels::ConvGeometry& geometry);

// kernels::group_norm with statistics over the whole image: every rank's moments are gathered and
// summed in rank order, so every rank normalises with the same numbers.
Tensor group_norm_rows(const Tensor& x, int64_t groups, const Tensor& weight, const Tensor& bias, float eps);

// Collective over `group`: splits latents (..., h, w) by rows (tensor_split rule; every rank needs
// at least one row), runs decode on this rank's band with the split bound, and returns the whole
// result, the bands gathered in rank order on every rank.
Tensor decode_by_rows(comm::Communicator& group, const Tensor& latents,
                      const std::function<Tensor(const Tensor&)>& decode);

}  // namespace cpdit::parallel
