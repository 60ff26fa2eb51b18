#include "io_test_util.hpp"

#include <cpdit/io/json.hpp>

#include <gtest/gtest.h>

using namespace cpdit;
using namespace cpdit::io;
using namespace cpdit::io::test;

TEST(Json, ReadsAFixtureConfig) {
  nlohmann::json config = read_json(std::string(CPDIT_TEST_DATA) + "/fixtures/flux_tiny/config.json");
  EXPECT_EQ(config["_class_name"], "FluxTransformer2DModel");
}

TEST(Json, BadJsonNamesFileAndPosition) {
  TempDir dir;
  write_text_atomic(dir.file("c.json"), "{\n  \"a\": 1,\n  \"b\": ]\n}");
  expect_error([&] { read_json(dir.file("c.json")); }, {"c.json", "invalid JSON", "line 3, column"});
  try {
    read_json(dir.file("c.json"));
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::format);
    EXPECT_EQ(std::string(e.what()).find("json.exception"), std::string::npos) << e.what();
  }
}

TEST(Json, MissingFileOrFolderIsAnIoError) {
  TempDir dir;
  expect_error([&] { read_json(dir.file("none.json")); }, {"none.json", "No such file"});
  expect_error([&] { read_json(dir.path().string()); }, {"is a folder"});
}

// A number too large for a double is nlohmann's out_of_range, not a parse_error: it must become the
// same one-line format error (the CLIP tokenizer fuzzer found it escaping as an uncaught exception).
TEST(Json, NumberOverflowIsAFormatError) {
  try {
    parse_json("{\"a\": 44E77777555544}", "vocab.json");
    ADD_FAILURE() << "an overflowing number parsed";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::format);
    EXPECT_NE(std::string(e.what()).find("vocab.json"), std::string::npos) << e.what();
  }
}
