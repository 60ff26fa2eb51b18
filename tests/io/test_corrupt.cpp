// Malformed files: each one is refused with a message naming the file, the tensor and the problem.
#include "io_test_util.hpp"

#include <cpdit/io/safetensors.hpp>

#include <gtest/gtest.h>

using namespace cpdit;
using namespace cpdit::io;
using namespace cpdit::io::test;

namespace {

class Corrupt : public ::testing::Test {
 protected:
  // Writes `bytes` as bad.safetensors and expects opening it to fail with all of `parts`.
  void expect_refused(const std::string& bytes, std::initializer_list<std::string> parts) {
    write_bytes(dir.file("bad.safetensors"), bytes);
    expect_error([&] { SafetensorsFile::open(dir.file("bad.safetensors")); }, parts);
    expect_error([&] { SafetensorsFile::open(dir.file("bad.safetensors")); }, {"bad.safetensors"});
    try {
      SafetensorsFile::open(dir.file("bad.safetensors"));
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::format) << e.what();
    }
  }
  // A file whose only tensor "t" has the given entry JSON, and `data_bytes` data bytes.
  void expect_entry_refused(const std::string& entry, size_t data_bytes, std::initializer_list<std::string> parts) {
    expect_refused(raw_safetensors("{\"t\":" + entry + "}", std::string(data_bytes, '\0')), parts);
  }
  TempDir dir;
};

const std::string kGood = R"({"t":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})";

}  // namespace

TEST_F(Corrupt, EmptyFile) { expect_refused("", {"0 bytes", "header length is missing"}); }

TEST_F(Corrupt, TruncatedHeaderLength) { expect_refused(std::string("\x10\x00\x00", 3), {"3 bytes"}); }

TEST_F(Corrupt, HeaderLengthLargerThanFile) {
  expect_refused(raw_safetensors(kGood, std::string(8, '\0')).substr(0, 30), {"header length", "larger than the file"});
}

TEST_F(Corrupt, HeaderLengthOverTheLimit) {
  std::string bytes(16, '\0');
  uint64_t n = 200'000'000;
  std::memcpy(bytes.data(), &n, 8);
  expect_refused(bytes, {"200000000", "limit"});
  n = ~uint64_t(0);  // 8 + n would wrap around
  std::memcpy(bytes.data(), &n, 8);
  expect_refused(bytes, {"limit"});
}

TEST_F(Corrupt, TruncatedData) {
  expect_refused(raw_safetensors(kGood, std::string(5, '\0')), {"truncated", "need 8", "holds 5", "'t'"});
}

TEST_F(Corrupt, TrailingBytes) { expect_refused(raw_safetensors(kGood, std::string(9, '\0')), {"1 unexpected bytes"}); }

TEST_F(Corrupt, BadJson) {
  expect_refused(raw_safetensors(R"({"t": {"dtype": "F32", )"), {"JSON", "line 1"});
  expect_refused(raw_safetensors(std::string("{\"t\":\"\xff\"}")), {"JSON"});  // invalid UTF-8
  expect_refused(raw_safetensors(kGood + std::string(3, '\0'), std::string(8, '\0')), {"JSON"});
}

TEST_F(Corrupt, NonObjectJson) {
  expect_refused(raw_safetensors("[1, 2]"), {"not a JSON object"});
  expect_refused(raw_safetensors("\"text\""), {"not a JSON object"});
  expect_entry_refused("[1]", 0, {"'t'", "must be an object"});
}

TEST_F(Corrupt, DeeplyNestedJson) {
  expect_refused(raw_safetensors("{\"t\":" + std::string(100000, '[') + std::string(100000, ']') + "}"),
                 {"nested deeper"});
}

TEST_F(Corrupt, DuplicateTensorName) {
  expect_refused(raw_safetensors(R"({"t":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},)"
                                 R"("t":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})",
                                 std::string(8, '\0')),
                 {"'t' appears twice"});
}

// A tensor named "" (#40: it became an unexpected key "()" in a message that names nothing).
TEST_F(Corrupt, EmptyTensorName) {
  expect_refused(raw_safetensors(R"({"":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})", std::string(4, '\0')),
                 {"a tensor has an empty name"});
}

TEST_F(Corrupt, OffsetsOutOfRange) {
  expect_entry_refused(R"({"dtype":"F32","shape":[2],"data_offsets":[8,16]})", 8, {"'t'", "gap", "[8, 16]"});
  expect_entry_refused(R"({"dtype":"F32","shape":[1],"data_offsets":[8,4]})", 8, {"'t'", "end before they begin"});
  expect_entry_refused(R"({"dtype":"U8","shape":[1],"data_offsets":[18446744073709551615,0]})", 8,
                       {"'t'", "end before they begin"});
}

TEST_F(Corrupt, OverlappingRanges) {
  expect_refused(raw_safetensors(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                                 R"("b":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})",
                                 std::string(8, '\0')),
                 {"'b'", "overlap"});
}

TEST_F(Corrupt, ShapeDoesNotMatchByteLength) {
  expect_entry_refused(R"({"dtype":"F32","shape":[3],"data_offsets":[0,8]})", 8, {"'t'", "needs 12 bytes", "hold 8"});
}

TEST_F(Corrupt, UnknownDtype) {
  expect_entry_refused(R"({"dtype":"F31","shape":[2],"data_offsets":[0,8]})", 8, {"'t'", "unknown dtype 'F31'"});
  expect_entry_refused(R"({"dtype":7,"shape":[2],"data_offsets":[0,8]})", 8, {"'t'", "\"dtype\" must be a string"});
}

TEST_F(Corrupt, NegativeFractionalOrHugeShape) {
  expect_entry_refused(R"({"dtype":"F32","shape":[-2],"data_offsets":[0,8]})", 8,
                       {"'t'", "not a non-negative integer"});
  expect_entry_refused(R"({"dtype":"F32","shape":[2.0],"data_offsets":[0,8]})", 8,
                       {"'t'", "not a non-negative integer"});
  expect_entry_refused(R"({"dtype":"F32","shape":[1e30],"data_offsets":[0,8]})", 8,
                       {"'t'", "not a non-negative integer"});
  expect_entry_refused(R"({"dtype":"F32","shape":"2","data_offsets":[0,8]})", 8, {"'t'", "\"shape\" must be an array"});
  // 2^62 * 2^3 * 4 bytes overflows 64 bits.
  expect_entry_refused(R"({"dtype":"F32","shape":[4611686018427387904, 8],"data_offsets":[0,8]})", 8,
                       {"'t'", "overflows 64 bits"});
  // Each dim fits in int64 and the product of dims wraps to 0: still caught.
  expect_entry_refused(R"({"dtype":"U8","shape":[4294967296, 4294967296, 0],"data_offsets":[0,0]})", 0,
                       {"'t'", "overflows 64 bits"});
}

TEST_F(Corrupt, MissingOrMalformedDataOffsets) {
  expect_entry_refused(R"({"dtype":"F32","shape":[2]})", 8, {"'t'", "missing \"data_offsets\""});
  expect_entry_refused(R"({"shape":[2],"data_offsets":[0,8]})", 8, {"'t'", "missing \"dtype\""});
  expect_entry_refused(R"({"dtype":"F32","data_offsets":[0,8]})", 8, {"'t'", "missing \"shape\""});
  expect_entry_refused(R"({"dtype":"F32","shape":[2],"data_offsets":[0]})", 8, {"'t'", "two non-negative integers"});
  expect_entry_refused(R"({"dtype":"F32","shape":[2],"data_offsets":[0,8,9]})", 8,
                       {"'t'", "two non-negative integers"});
  expect_entry_refused(R"({"dtype":"F32","shape":[2],"data_offsets":[-1,7]})", 8, {"'t'", "two non-negative integers"});
}

TEST_F(Corrupt, BadMetadata) {
  expect_refused(raw_safetensors(R"({"__metadata__":{"format":1}})"), {"__metadata__", "'format'", "not a string"});
  expect_refused(raw_safetensors(R"({"__metadata__":[1]})"), {"__metadata__", "object of strings"});
}

TEST_F(Corrupt, MissingFileAndFolderAreIoErrors) {
  expect_error([&] { SafetensorsFile::open(dir.file("absent.safetensors")); }, {"absent.safetensors", "No such file"});
  expect_error([&] { SafetensorsFile::open(dir.path().string()); }, {"folder"});
}

TEST_F(Corrupt, ValidEdgeCasesAreAccepted) {
  // No tensors at all; zero-size tensors sharing an offset; a scalar; header padded with spaces.
  write_bytes(dir.file("ok.safetensors"), raw_safetensors("{}"));
  EXPECT_TRUE(SafetensorsFile::open(dir.file("ok.safetensors")).names().empty());
  write_bytes(dir.file("ok.safetensors"),
              raw_safetensors(R"({"z1":{"dtype":"F32","shape":[0,3],"data_offsets":[0,0]},)"
                              R"("s":{"dtype":"F32","shape":[],"data_offsets":[0,4]},)"
                              R"("z2":{"dtype":"BF16","shape":[2,0],"data_offsets":[4,4]}}    )",
                              std::string(4, '\0')));
  SafetensorsFile file = SafetensorsFile::open(dir.file("ok.safetensors"));
  EXPECT_EQ(file.names(), (std::vector<std::string>{"z1", "s", "z2"}));
  EXPECT_EQ(file.get("s").numel(), 1);
  EXPECT_EQ(file.get("z2").numel(), 0);
  expect_error([&] { file.info("nope"); }, {"ok.safetensors", "no tensor 'nope'"});
}

TEST_F(Corrupt, TooManyDimsFailsOnGetOnly) {
  write_bytes(dir.file("d.safetensors"),
              raw_safetensors(R"({"t":{"dtype":"U8","shape":[1,1,1,1,1,1,1],"data_offsets":[0,1]}})", "\x01"));
  SafetensorsFile file = SafetensorsFile::open(dir.file("d.safetensors"));
  expect_error([&] { file.get("t"); }, {"'t'", "7 dims"});
}
