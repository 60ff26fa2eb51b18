// save_safetensors then open: every dtype, views, metadata, and the reference writer's layout.
#include "io_test_util.hpp"

#include <cpdit/io/safetensors.hpp>

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

using namespace cpdit;
using namespace cpdit::io;
using namespace cpdit::io::test;

namespace {

Tensor counting(const Shape& shape, DType dtype) {
  Tensor t = Tensor::empty(shape, DType::f32);
  for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = float(i % 7) - 3.0f;
  return t.to(dtype);
}

void expect_same(const Tensor& a, const Tensor& b, const std::string& what) {
  ASSERT_EQ(a.dtype(), b.dtype()) << what;
  ASSERT_EQ(a.shape(), b.shape()) << what;
  Tensor ca = a.contiguous(), cb = b.contiguous();
  EXPECT_EQ(std::memcmp(ca.raw(), cb.raw(), ca.nbytes()), 0) << what;
}

}  // namespace

TEST(RoundTrip, EveryDtypeAndShape) {
  TempDir dir;
  std::map<std::string, Tensor> tensors = {
      {"f32", counting({2, 3, 4}, DType::f32)},   {"bf16", counting({5, 3}, DType::bf16)},
      {"f16", counting({7}, DType::f16)},         {"i64", counting({3, 1, 2}, DType::i64)},
      {"bool", Tensor::full({4, 2}, 1.0, DType::boolean)}, {"scalar", counting({}, DType::f32)},
      {"empty", counting({0, 5}, DType::f32)},    {"six_dims", counting({1, 2, 1, 2, 1, 3}, DType::bf16)},
  };
  save_safetensors(dir.file("all.safetensors"), tensors);
  std::map<std::string, Tensor> loaded = load_safetensors(dir.file("all.safetensors"));
  ASSERT_EQ(loaded.size(), tensors.size());
  for (const auto& [name, t] : tensors) expect_same(loaded.at(name), t, name);
}

TEST(RoundTrip, NonContiguousViewsAreWrittenContiguous) {
  TempDir dir;
  Tensor base = counting({4, 6}, DType::f32);
  Tensor columns = base.narrow(1, 1, 3);            // strided view
  Tensor transposed = base.permute({1, 0});         // a copy, but from a permutation
  Tensor row = counting({3, 5}, DType::bf16).select(0, 2);
  ASSERT_FALSE(columns.is_contiguous());
  save_safetensors(dir.file("views.safetensors"), {{"columns", columns}, {"transposed", transposed}, {"row", row}});
  SafetensorsFile file = SafetensorsFile::open(dir.file("views.safetensors"));
  expect_same(file.get("columns"), columns, "columns");
  expect_same(file.get("transposed"), transposed, "transposed");
  expect_same(file.get("row"), row, "row");
  EXPECT_EQ(file.info("columns").end - file.info("columns").begin, 4u * 3u * 4u);
}

TEST(RoundTrip, MetadataIsKept) {
  TempDir dir;
  save_safetensors(dir.file("m.safetensors"), {{"x", counting({2}, DType::f32)}},
                   {{"format", "pt"}, {"note", "a \"quoted\" é"}});
  SafetensorsFile file = SafetensorsFile::open(dir.file("m.safetensors"));
  EXPECT_EQ(file.metadata(), (std::map<std::string, std::string>{{"format", "pt"}, {"note", "a \"quoted\" é"}}));
}

TEST(RoundTrip, LayoutFollowsTheReferenceWriter) {
  // Header padded with spaces to a multiple of 8; tensors ordered larger dtypes first (I64, F32,
  // BF16, F16, BOOL), then by name, so each one is aligned to its element size.
  TempDir dir;
  save_safetensors(dir.file("l.safetensors"), {{"a_bool", counting({3}, DType::boolean)},
                                               {"b_f16", counting({3}, DType::f16)},
                                               {"c_bf16", counting({1}, DType::bf16)},
                                               {"d_f32", counting({3}, DType::f32)},
                                               {"e_i64", counting({1}, DType::i64)},
                                               {"f_f32", counting({1}, DType::f32)}});
  std::string bytes = read_bytes(dir.file("l.safetensors"));
  uint64_t n;
  std::memcpy(&n, bytes.data(), 8);
  EXPECT_EQ(n % 8, 0u);
  std::string header = bytes.substr(8, n);
  EXPECT_EQ(header.find_last_not_of(' '), header.find_last_of('}'));
  SafetensorsFile file = SafetensorsFile::open(dir.file("l.safetensors"));
  EXPECT_EQ(file.names(), (std::vector<std::string>{"e_i64", "d_f32", "f_f32", "c_bf16", "b_f16", "a_bool"}));
  for (const std::string& name : file.names()) {
    size_t element = file.info(name).dtype == "I64"    ? 8
                     : file.info(name).dtype == "F32"  ? 4
                     : file.info(name).dtype == "BOOL" ? 1
                                                       : 2;
    EXPECT_EQ((8 + n + file.info(name).begin) % element, 0u) << name;
  }
  EXPECT_EQ(nlohmann::json::parse(header)["e_i64"]["dtype"], "I64");
}

TEST(RoundTrip, RejectsUnwritableNamesAndUndefinedTensors) {
  TempDir dir;
  expect_error([&] { save_safetensors(dir.file("x.safetensors"), {{"__metadata__", counting({1}, DType::f32)}}); },
               {"__metadata__", "not a usable tensor name"});
  expect_error([&] { save_safetensors(dir.file("x.safetensors"), {{"x", Tensor()}}); }, {"'x'", "undefined"});
  expect_error([&] { save_safetensors(dir.file("x.safetensors"), {{"bad\xff", counting({1}, DType::f32)}}); },
               {"not valid UTF-8"});
  EXPECT_TRUE(dir.entries().empty());
}
