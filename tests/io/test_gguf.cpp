// The GGUF reader: what it hands out from a file the gguf Python package wrote, and every malformed
// header refused with one message naming the file and the problem.
#include "gguf_bytes.hpp"
#include "io_test_util.hpp"

#include <cpdit/io/gguf.hpp>

#include <gtest/gtest.h>

using namespace cpdit;
using namespace cpdit::io;
using namespace cpdit::io::test;

namespace {

std::string blocks_file() { return std::string(CPDIT_TEST_DATA) + "/fixtures/gguf/blocks.gguf"; }

class GgufCorrupt : public ::testing::Test {
 protected:
  void expect_refused(const std::string& bytes, std::initializer_list<std::string> parts) {
    write_bytes(dir.file("bad.gguf"), bytes);
    expect_error([&] { GgufFile::open(dir.file("bad.gguf")); }, parts);
    expect_error([&] { GgufFile::open(dir.file("bad.gguf")); }, {"bad.gguf"});
  }
  TempDir dir;
};

// One F32 tensor "t" of 8 values: dims {8}, type 0, offset 0, 32 data bytes.
GgufBytes one_f32() {
  GgufBytes b = GgufBytes::start(1, 0);
  b.tensor("t", {8}, 0, 0);
  b.data = std::string(32, '\0');
  return b;
}

}  // namespace

TEST(Gguf, ListsWhatTheGgufPackageWrote) {
  GgufFile file = GgufFile::open(blocks_file());
  EXPECT_EQ(file.version(), 3u);
  EXPECT_EQ(file.metadata().at("general.architecture"), "flux");
  for (const char* name : {"f32", "f16", "bf16", "q8_0", "q4_0", "q4_1", "q5_0", "q5_1", "q4_k", "q5_k", "q6_k"}) {
    ASSERT_TRUE(file.contains(name)) << name;
    EXPECT_EQ(file.info(name).shape, Shape({4, 512})) << name;
  }
  EXPECT_EQ(file.info("q4_k").type, "Q4_K");
  EXPECT_EQ(file.info("q8_0").nbytes, 4u * 512 / 32 * 34);
}

TEST(Gguf, DenseTensorsAreDenseWeightsAndBlocksAreQuantised) {
  GgufFile file = GgufFile::open(blocks_file());
  EXPECT_EQ(file.get("f16").format(), "f16");
  EXPECT_EQ(file.get("bf16").format(), "bf16");
  Weight q = file.get("q6_k");
  EXPECT_TRUE(q.is_quantised());
  EXPECT_EQ(q.describe(), "Q6_K(4, 512)");
  EXPECT_EQ(q.codes().shape(), Shape({4, 2 * 210}));  // two 256-blocks of 210 bytes per row
  EXPECT_EQ(q.nbytes(), file.info("q6_k").nbytes);
}

TEST(Gguf, WeightsOutliveTheFileObject) {
  Weight w;
  {
    GgufFile file = GgufFile::open(blocks_file());
    w = file.get("q8_0");
  }
  EXPECT_EQ(w.codes().nbytes(), 4u * 16 * 34);  // the view keeps the mapping alive (ASan would see otherwise)
}

TEST(Gguf, NarrowedRowsViewTheBlocks) {
  Weight w = GgufFile::open(blocks_file()).get("q4_0");
  Weight rows = w.narrow_rows(1, 2);
  EXPECT_EQ(rows.shape(), Shape({2, 512}));
  EXPECT_EQ(static_cast<const std::byte*>(rows.codes().raw()),
            static_cast<const std::byte*>(w.codes().raw()) + 16 * 18);
}

TEST(Gguf, IsToldByItsMagic) {
  EXPECT_TRUE(is_gguf_file(blocks_file()));
  EXPECT_FALSE(is_gguf_file(std::string(CPDIT_TEST_DATA) + "/fixtures/flux_tiny/weights.safetensors"));
}

TEST_F(GgufCorrupt, GoodFileOpens) {
  write_bytes(dir.file("good.gguf"), one_f32().file());
  EXPECT_EQ(GgufFile::open(dir.file("good.gguf")).info("t").shape, Shape({8}));
}

TEST_F(GgufCorrupt, WrongMagicOrVersion) {
  expect_refused("GGML", {"not a GGUF file"});
  expect_refused("", {"not a GGUF file"});
  std::string v1 = one_f32().file();
  v1[4] = 1;
  write_bytes(dir.file("v1.gguf"), v1);
  expect_error([&] { GgufFile::open(dir.file("v1.gguf")); }, {"version 1"});
}

TEST_F(GgufCorrupt, CountsBeyondTheFile) {
  expect_refused(GgufBytes::start(1ull << 60, 0).file(), {"tensor count"});
  expect_refused(GgufBytes::start(0, 1ull << 62).file(), {"key-value count"});
}

TEST_F(GgufCorrupt, TruncatedAnywhere) {
  const std::string good = one_f32().file();
  for (size_t n : {size_t(10), size_t(30), size_t(40), size_t(60)})
    expect_refused(good.substr(0, n), {"bad.gguf"});
  expect_refused(good.substr(0, good.size() - 4), {"runs past the end"});
}

TEST_F(GgufCorrupt, HugeStringLength) {
  GgufBytes b = GgufBytes::start(0, 1);
  b.put<uint64_t>(1ull << 63).put<uint64_t>(0).put<uint64_t>(0);  // the count needs 13 bytes to follow
  expect_refused(b.file(), {"truncated reading a key"});
}

TEST_F(GgufCorrupt, ValuesAndKeys) {
  GgufBytes unknown = GgufBytes::start(0, 1);
  unknown.str("k").put<uint32_t>(99).put<uint32_t>(0);
  expect_refused(unknown.file(), {"unknown value type 99"});
  GgufBytes twice = GgufBytes::start(0, 2);
  twice.str("k").put<uint32_t>(4).put<uint32_t>(1).str("k").put<uint32_t>(4).put<uint32_t>(1);
  expect_refused(twice.file(), {"'k' appears twice"});
  GgufBytes nested = GgufBytes::start(0, 1);
  nested.str("k").put<uint32_t>(9).put<uint32_t>(9).put<uint64_t>(1).put<uint32_t>(9).put<uint64_t>(1);
  nested.put<uint32_t>(9).put<uint64_t>(0);
  expect_refused(nested.file(), {"nested deeper"});
  GgufBytes long_array = GgufBytes::start(0, 1);
  long_array.str("k").put<uint32_t>(9).put<uint32_t>(10).put<uint64_t>(1ull << 61);
  expect_refused(long_array.file(), {"array's length"});
  GgufBytes bad_bool = GgufBytes::start(0, 1);
  bad_bool.str("k").put<uint32_t>(7).put<uint8_t>(2);
  expect_refused(bad_bool.file(), {"bool value 2"});
}

TEST_F(GgufCorrupt, Alignment) {
  GgufBytes odd = GgufBytes::start(0, 1);
  odd.str("general.alignment").put<uint32_t>(4).put<uint32_t>(24);
  expect_refused(odd.file(), {"not a power of two"});
  GgufBytes typed = GgufBytes::start(0, 1);
  typed.str("general.alignment").put<uint32_t>(10).put<uint64_t>(32);
  expect_refused(typed.file(), {"must be a u32"});
}

TEST_F(GgufCorrupt, TensorInfos) {
  auto with = [](const std::string& name, std::vector<uint64_t> dims, uint32_t type, uint64_t offset, size_t data) {
    GgufBytes b = GgufBytes::start(1, 0);
    b.tensor(name, std::move(dims), type, offset);
    b.data = std::string(data, '\0');
    return b.file();
  };
  expect_refused(with("", {8}, 0, 0, 32), {"a tensor has an empty name"});
  expect_refused(with("t", {}, 0, 0, 0), {"'t' has 0 dims"});
  expect_refused(with("t", {1, 1, 1, 1, 1, 1}, 0, 0, 4), {"6 dims"});
  expect_refused(with("t", {0}, 0, 0, 0), {"a dim of 0"});
  expect_refused(with("t", {8}, 77, 0, 32), {"ggml type 77"});
  expect_refused(with("t", {48}, 8, 0, 64), {"not a multiple of its block size 32"});
  expect_refused(with("t", {1ull << 40, 1ull << 40}, 0, 0, 0), {"overflows"});
  expect_refused(with("t", {8}, 0, 4, 64), {"not a multiple of the alignment"});
  expect_refused(with("t", {8}, 0, 32, 64), {"expected 0"});
  expect_refused(with("t", {8}, 0, 0, 64), {"no tensor claims"});
}

TEST_F(GgufCorrupt, TensorsMustTileTheData) {
  GgufBytes overlap = GgufBytes::start(2, 0);
  overlap.tensor("a", {16}, 0, 0).tensor("b", {8}, 0, 32);  // a is 64 bytes: b starts inside it
  overlap.data = std::string(96, '\0');
  expect_refused(overlap.file(), {"'b' starts at offset 32", "expected 64"});
  GgufBytes same = GgufBytes::start(2, 0);
  same.tensor("a", {8}, 0, 0).tensor("a", {8}, 0, 32);
  same.data = std::string(64, '\0');
  expect_refused(same.file(), {"'a' appears twice"});
}

TEST_F(GgufCorrupt, UnsupportedTypesAreRefusedWhenRead) {
  GgufBytes b = GgufBytes::start(2, 0);
  b.tensor("q2", {256}, 10, 0).tensor("cube", {32, 2, 2}, 8, 96);  // Q2_K: 84 bytes, padded to 96
  b.data = std::string(96 + 4 * 34, '\0');
  write_bytes(dir.file("types.gguf"), b.file());
  GgufFile file = GgufFile::open(dir.file("types.gguf"));
  expect_error([&] { file.get("q2"); }, {"'q2' is Q2_K", "does not compute with"});
  expect_error([&] { file.get("cube"); }, {"'cube' is Q8_0 with 3 dims"});
  expect_error([&] { file.get("nope"); }, {"no tensor 'nope'"});
}
