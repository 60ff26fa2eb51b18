// shard / gather follow the tensor_split rule and round-trip, also with fewer elements than ranks.
#include <cpdit/comm/local.hpp>
#include <cpdit/parallel/shard.hpp>

#include <gtest/gtest.h>

namespace cpdit::parallel {
namespace {

Tensor iota(const Shape& shape) {
  std::vector<float> values(size_t(shape_numel(shape)));
  for (size_t i = 0; i < values.size(); ++i) values[i] = float(i);
  return Tensor::from_vector(values, shape);
}

TEST(Shard, FirstRanksHoldOneMoreAndGatherRestoresTheWhole) {
  for (int64_t n : {10, 3}) {
    const Tensor full = iota({2, n, 3});
    comm::run_local(4, [&](comm::Communicator& comm) {
      const Tensor part = shard(full, 1, comm);
      // 10 = 3 + 3 + 2 + 2; 3 = 1 + 1 + 1 + 0.
      const int64_t want = n / 4 + (comm.rank() < n % 4 ? 1 : 0);
      EXPECT_EQ(part.size(1), want);
      if (want > 0) {
        EXPECT_EQ(part.data<float>()[0], float(split_offset(n, 4, comm.rank()) * 3));
      }
      EXPECT_EQ(max_abs_diff(gather(part, 1, comm), full), 0.0);
    });
  }
}

}  // namespace
}  // namespace cpdit::parallel
