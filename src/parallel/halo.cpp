// The halo exchange of a row-split convolution. Rank r sends its first `after` rows up to r-1 (they
// are r-1's lower halo) and its last `before` rows down to r+1 (r+1's upper halo), receives the
// same from its neighbours, and convolves [upper halo; band; lower halo] with zero padding only
// where the band touches the image's edge, the three laid out into the convolution's buffer apart
// (never copied together, which would hold the band twice).
#include <cpdit/comm/tensor_ops.hpp>
#include <cpdit/core/error.hpp>
#include <cpdit/parallel/halo.hpp>

#include <memory>
#include <vector>

namespace cpdit::parallel {
namespace {

constexpr int kRowsDim = 3;  // (B, C, F, H, W)
constexpr int kTagUpward = 0x4a10, kTagDownward = 0x4a11;

Tensor rows_of(const Tensor& x, int64_t start, int64_t count) { return x.narrow(kRowsDim, start, count).contiguous(); }

}  // namespace

Tensor conv3d_rows(const Tensor& x, const Tensor& weight, const Tensor& bias, const kernels::ConvGeometry& geometry) {
  comm::Communicator* group = row_split_group();
  const int64_t before = geometry.pad_before[1], after = geometry.pad_after[1];
  if (!group || group->size() == 1 || (before == 0 && after == 0)) return kernels::conv3d(x, weight, bias, geometry);
  CPDIT_CHECK(x.dim() == 5, invalid_argument, "conv3d_rows: x must be (B, C, F, H, W), got ", x.describe());
  CPDIT_CHECK(geometry.stride[1] == 1, unsupported, "conv3d_rows: a row-split convolution needs row stride 1");
  const int64_t band = x.size(kRowsDim);
  CPDIT_CHECK(band >= before && band >= after, invalid_argument, "conv3d_rows: rank ", group->rank(), "'s band of ",
              band, " rows is thinner than the convolution's halo (", before, " above, ", after,
              " below); decode on fewer ranks");
  const int rank = group->rank();
  const bool top = rank == 0, bottom = rank == group->size() - 1;

  Shape halo_shape = x.shape();
  std::vector<std::unique_ptr<comm::Request>> pending;
  Tensor upper, lower;
  if (!top && before > 0) {
    halo_shape[kRowsDim] = before;
    upper = Tensor::empty(halo_shape);
    pending.push_back(comm::irecv(*group, upper, rank - 1, kTagDownward));
  }
  if (!bottom && after > 0) {
    halo_shape[kRowsDim] = after;
    lower = Tensor::empty(halo_shape);
    pending.push_back(comm::irecv(*group, lower, rank + 1, kTagUpward));
  }
  if (!top && after > 0) pending.push_back(comm::isend(*group, rows_of(x, 0, after), rank - 1, kTagUpward));
  if (!bottom && before > 0)
    pending.push_back(comm::isend(*group, rows_of(x, band - before, before), rank + 1, kTagDownward));
  // Every rank sums the layer as one rank would: the choice of algorithm counts the whole image's rows.
  std::vector<int64_t> bands(size_t(group->size()));
  group->all_gather(&band, sizeof(int64_t), bands.data());
  int64_t rows = 0;
  for (int64_t b : bands) rows += b;
  const kernels::ConvAlgorithm algorithm =
      kernels::resolve_conv_algorithm(kernels::default_conv_algorithm(), x.shape(), weight.shape(), geometry,
                                      rows + before + after - weight.size(3) + 1);
  for (auto& request : pending) request->wait();

  std::vector<Tensor> parts;
  if (upper.defined()) parts.push_back(upper);
  parts.push_back(x);
  if (lower.defined()) parts.push_back(lower);
  kernels::ConvGeometry g = geometry;
  g.pad_before[1] = top ? before : 0;
  g.pad_after[1] = bottom ? after : 0;
  return kernels::conv3d_row_parts(parts, weight, bias, g, algorithm);
}

}  // namespace cpdit::parallel
