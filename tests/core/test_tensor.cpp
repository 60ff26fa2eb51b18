#include <cpdit/core/error.hpp>
#include <cpdit/core/memory.hpp>
#include <cpdit/core/tensor.hpp>

#include <gtest/gtest.h>

#include <cmath>
#include <numeric>

using namespace cpdit;

namespace {
Tensor iota(const Shape& shape) {
  std::vector<float> v(size_t(shape_numel(shape)));
  std::iota(v.begin(), v.end(), 0.0f);
  return Tensor::from_vector(v, shape);
}
float at(const Tensor& t, std::initializer_list<int64_t> idx) {
  int64_t off = 0, d = 0;
  for (int64_t i : idx) off += i * t.strides()[size_t(d++)];
  return t.data<float>()[off];
}
}  // namespace

TEST(Tensor, ReshapeIsAViewOfTheSameStorage) {
  Tensor t = iota({2, 3, 4});
  Tensor r = t.reshape({6, -1});
  EXPECT_EQ(r.shape(), (Shape{6, 4}));
  EXPECT_TRUE(r.same_storage(t));
  EXPECT_THROW(t.reshape({5, 5}), Error);
  EXPECT_THROW(t.reshape({-1, -1}), Error);
}

TEST(Tensor, NarrowSharesStorageAndIndexesCorrectly) {
  Tensor t = iota({2, 5, 3});
  Tensor n = t.narrow(1, 2, 2);
  EXPECT_TRUE(n.same_storage(t));
  EXPECT_FALSE(n.is_contiguous());
  EXPECT_EQ(at(n, {1, 1, 2}), at(t, {1, 3, 2}));
  Tensor c = n.contiguous();
  EXPECT_TRUE(c.is_contiguous());
  EXPECT_EQ(c.data<float>()[c.numel() - 1], at(t, {1, 3, 2}));
  EXPECT_THROW(t.narrow(1, 4, 2), Error);
}

TEST(Tensor, SplitFollowsTensorSplitRule) {
  EXPECT_EQ(split_sizes(10, 4), (std::vector<int64_t>{3, 3, 2, 2}));
  EXPECT_EQ(split_sizes(2, 4), (std::vector<int64_t>{1, 1, 0, 0}));
  EXPECT_EQ(split_offset(10, 4, 3), 8);
  Tensor t = iota({1, 7, 2});
  auto parts = split(t, 1, 3);
  ASSERT_EQ(parts.size(), 3u);
  EXPECT_EQ(parts[0].size(1), 3);
  EXPECT_EQ(parts[2].size(1), 2);
  EXPECT_EQ(at(parts[2], {0, 0, 0}), 10.0f);
  EXPECT_EQ(max_abs_diff(cat(parts, 1), t), 0.0);
}

TEST(Tensor, SplitIntoMorePartsThanElementsGivesEmptyChunks) {
  Tensor t = iota({3, 2});
  auto parts = split(t, 0, 5);
  EXPECT_EQ(parts[3].numel(), 0);
  EXPECT_EQ(max_abs_diff(cat(parts, 0), t), 0.0);
}

TEST(Tensor, PermuteMaterialises) {
  Tensor t = iota({2, 3, 4});
  Tensor p = t.permute({2, 0, 1});
  EXPECT_EQ(p.shape(), (Shape{4, 2, 3}));
  EXPECT_TRUE(p.is_contiguous());
  EXPECT_FALSE(p.same_storage(t));
  for (int64_t a = 0; a < 2; ++a)
    for (int64_t b = 0; b < 3; ++b)
      for (int64_t c = 0; c < 4; ++c) EXPECT_EQ(at(p, {c, a, b}), at(t, {a, b, c}));
}

TEST(Tensor, CatAlongInnerDim) {
  Tensor a = iota({2, 2}), b = iota({2, 3});
  Tensor c = cat({a, b}, 1);
  EXPECT_EQ(c.shape(), (Shape{2, 5}));
  EXPECT_EQ(at(c, {1, 1}), 3.0f);
  EXPECT_EQ(at(c, {1, 4}), 5.0f);
  EXPECT_THROW(cat({a, iota({3, 3})}, 1), Error);
}

TEST(Tensor, ShapesBeyondSixDimsAreRefused) {
  EXPECT_NO_THROW(Tensor::zeros({1, 1, 1, 1, 1, 2}));
  EXPECT_THROW(Tensor::zeros({1, 1, 1, 1, 1, 1, 1}), Error);
}

TEST(Tensor, DtypeRoundTrip) {
  Tensor t = Tensor::from_vector({1.0f, -2.5f, 3.140625f, 0.0f}, {4});
  EXPECT_EQ(max_abs_diff(t.to(DType::bf16).to(DType::f32), t), 0.0);
  EXPECT_EQ(max_abs_diff(t.to(DType::f16).to(DType::f32), t), 0.0);
  Tensor i = t.to(DType::i64);
  EXPECT_EQ(i.data<int64_t>()[1], -2);
  EXPECT_THROW(t.data<bf16>(), Error);
}

TEST(Memory, CountsCurrentAndPeakPerRank) {
  MemoryCounter rank;
  ScopedMemoryCounter scope(rank);
  {
    Tensor a = Tensor::empty({1024}, DType::f32);
    EXPECT_EQ(memory::current_bytes(), 4096);
    Tensor b = Tensor::empty({256}, DType::f32);
    EXPECT_EQ(memory::peak_bytes(), 5120);
  }
  EXPECT_EQ(memory::current_bytes(), 0);
  EXPECT_EQ(memory::peak_bytes(), 5120);
  memory::reset_peak();
  EXPECT_EQ(memory::peak_bytes(), 0);
}

TEST(Memory, ViewsDoNotCount) {
  MemoryCounter rank;
  ScopedMemoryCounter scope(rank);
  Tensor a = Tensor::zeros({64, 64});
  Tensor v = a.narrow(0, 3, 10).reshape({-1, 64});
  EXPECT_EQ(memory::current_bytes(), 64 * 64 * 4);
}

TEST(Memory, TensorMayOutliveTheCounterItWasChargedTo) {
  Tensor survivor;
  {
    MemoryCounter rank;
    ScopedMemoryCounter scope(rank);
    survivor = Tensor::zeros({256});
    EXPECT_EQ(rank.current(), 1024);
  }
  int64_t before = memory::current_bytes();
  survivor = Tensor();  // frees into the counts the dead counter shared; the caller's are untouched
  EXPECT_EQ(memory::current_bytes(), before);
}

TEST(Tensor, ElementCountsNeverOverflow) {
  EXPECT_EQ(shape_numel({int64_t(1) << 32, int64_t(1) << 32, 0}), 0);
  EXPECT_THROW(shape_numel({int64_t(1) << 32, int64_t(1) << 32}), Error);
  EXPECT_EQ(shape_numel({}), 1);
}

// 2^62 f32 elements fit an int64 count but their bytes wrap a size_t to 0: such a tensor must be
// refused, not allocated as a 0-byte buffer that its users write past.
TEST(Tensor, ByteSizesNeverOverflow) {
  const Shape shape{int64_t(1) << 31, int64_t(1) << 31};
  EXPECT_EQ(shape_numel(shape), int64_t(1) << 62);
  try {
    Tensor::empty(shape, DType::f32);
    ADD_FAILURE() << "a tensor of 2^64 bytes was created";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("more bytes than memory can address"), std::string::npos) << e.what();
  }
  float one = 1;
  EXPECT_THROW(Tensor::borrow(&one, shape, DType::f32, nullptr), Error);
}
