// The one-directional time halo of a frame-split causal decode (see halo.hpp). Time convolutions are
// causal, so frames flow forward only: rank r receives from r-1 and sends to r+1. A rank with at
// least `count` frames of its own sends before it receives, so the ranks do not wait on each other
// in a chain; one with fewer must first receive the frames it passes on.
#include <cpdit/comm/tensor_ops.hpp>
#include <cpdit/core/error.hpp>
#include <cpdit/parallel/halo.hpp>

namespace cpdit::parallel {
namespace {

constexpr int kFramesDim = 2;  // (B, C, F, H, W)
constexpr int kTagForward = 0x4a12;

Tensor last_frames(const Tensor& halo, const Tensor& x, int64_t count) {
  const int64_t own = std::min(count, x.size(kFramesDim));
  const Tensor tail = x.narrow(kFramesDim, x.size(kFramesDim) - own, own);
  if (own == count) return tail.contiguous();
  return cat({halo.narrow(kFramesDim, halo.size(kFramesDim) - (count - own), count - own), tail}, kFramesDim);
}

}  // namespace

Tensor time_halo(comm::Communicator& group, const Tensor& x, int64_t count) {
  CPDIT_CHECK(x.defined() && x.dim() == 5 && count > 0, invalid_argument,
              "time_halo: x must be (B, C, F, H, W) and count positive, got ",
              x.defined() ? x.describe() : "undefined");
  const int rank = group.rank();
  const bool last = rank + 1 == group.size();
  Shape halo_shape = x.shape();
  halo_shape[kFramesDim] = count;
  Tensor halo = Tensor::zeros(halo_shape);
  const bool send_first = x.size(kFramesDim) >= count;
  std::unique_ptr<comm::Request> sent;
  if (send_first && !last) sent = comm::isend(group, last_frames(halo, x, count), rank + 1, kTagForward);
  if (rank > 0) comm::recv(group, halo, rank - 1, kTagForward);
  if (!send_first && !last) sent = comm::isend(group, last_frames(halo, x, count), rank + 1, kTagForward);
  if (sent) sent->wait();
  return halo;
}

}  // namespace cpdit::parallel
