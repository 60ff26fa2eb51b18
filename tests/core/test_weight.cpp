// Weight: dense or block-quantised, and counted once on the process's weight counter.
#include <cpdit/core/error.hpp>
#include <cpdit/core/memory.hpp>
#include <cpdit/core/weight.hpp>

#include <gtest/gtest.h>

#include <vector>

using namespace cpdit;

namespace {

TEST(Weight, DenseIsATensor) {
  Weight w = Tensor::zeros({4, 3}, DType::bf16);
  EXPECT_EQ(w.format(), "bf16");
  EXPECT_EQ(w.describe(), "bf16(4, 3)");
  EXPECT_EQ(w.shape(), (Shape{4, 3}));
  EXPECT_EQ(w.nbytes(), 4u * 3 * 2);
  EXPECT_FALSE(w.is_quantised());
  EXPECT_FALSE(Weight().defined());
}

TEST(Weight, QuantisedCarriesCodesAndBlockScales) {
  Tensor codes = Tensor::zeros({4, 32}, DType::boolean);  // 4 rows of 64 4-bit codes
  Weight w = Weight::quantised({4, 64}, codes, {"Q4_0", 32, Tensor::zeros({4, 2}, DType::f16)});
  EXPECT_TRUE(w.is_quantised());
  EXPECT_EQ(w.describe(), "Q4_0(4, 64)");
  EXPECT_EQ(w.quantisation().block_size, 32);
  EXPECT_EQ(w.nbytes(), 4u * 32 + 4 * 2 * 2);
  try {
    w.values("some kernel");
    ADD_FAILURE() << "a quantised weight gave dense values";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::unsupported);
    EXPECT_NE(std::string(e.what()).find("some kernel computes with dense"), std::string::npos) << e.what();
  }
  // Scales must be one per block; the last dim must hold whole blocks.
  EXPECT_THROW(Weight::quantised({4, 64}, codes, {"Q4_0", 32, Tensor::zeros({4, 3}, DType::f16)}), Error);
  EXPECT_THROW(Weight::quantised({4, 60}, codes, {"Q4_0", 32, Tensor::zeros({4, 2}, DType::f16)}), Error);
  EXPECT_THROW(Weight::quantised({4, 64}, codes, {"", 32, Tensor::zeros({4, 2}, DType::f16)}), Error);
}

TEST(Weight, ChargedOnceToTheWeightCounterWhateverTheHolders) {
  MemoryCounter& weights = weight_memory_counter();
  const int64_t before = weights.current();
  MemoryCounter rank;
  {
    ScopedMemoryCounter as_rank(rank);
    Tensor owned = Tensor::zeros({16, 8});  // charged to the rank that made it
    std::vector<float> file(64);            // stands in for a mapped checkpoint
    Tensor mapped = Tensor::borrow(file.data(), {64}, DType::f32, nullptr);
    EXPECT_EQ(rank.current(), 16 * 8 * 4);
    for (int holder = 0; holder < 3; ++holder) {
      Weight(owned).charge_to(weights);
      Weight(mapped.narrow(0, 8, 8)).charge_to(weights);  // a view charges its whole storage
    }
    EXPECT_EQ(rank.current(), 0) << "the weight left the rank's count";
    EXPECT_EQ(weights.current() - before, 16 * 8 * 4 + 64 * 4);
  }
  EXPECT_EQ(weights.current(), before) << "freed weights are credited back";
}

}  // namespace
