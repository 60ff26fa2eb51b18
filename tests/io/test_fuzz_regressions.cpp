// Inputs that once troubled the readers (found by fuzz/run.sh or written by hand): each must open
// and load, or be refused with cpdit::Error — never crash. *.gguf inputs go to the GGUF reader, the
// rest to the safetensors reader.
#include <cpdit/core/error.hpp>
#include <cpdit/io/gguf.hpp>
#include <cpdit/io/safetensors.hpp>

#include <gtest/gtest.h>

#include <filesystem>

using namespace cpdit;
using namespace cpdit::io;

TEST(FuzzRegressions, EveryInputOpensOrIsRefused) {
  const std::filesystem::path folder = std::filesystem::path(CPDIT_TEST_DATA) / "fuzz_regressions";
  int inputs = 0;
  for (const auto& entry : std::filesystem::directory_iterator(folder)) {
    ++inputs;
    if (entry.path().extension() == ".gguf") {
      try {
        GgufFile file = GgufFile::open(entry.path().string());
        for (const std::string& name : file.names()) {
          try {
            EXPECT_EQ(file.get(name).shape(), file.info(name).shape) << entry.path();
          } catch (const Error& e) {
            EXPECT_NE(std::string(e.what()).find(name), std::string::npos) << e.what();
          }
        }
      } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find(entry.path().filename().string()), std::string::npos) << e.what();
      }
      continue;
    }
    try {
      SafetensorsFile file = SafetensorsFile::open(entry.path().string());
      for (const std::string& name : file.names()) {
        try {
          Tensor t = file.get(name);
          EXPECT_EQ(t.shape(), file.info(name).shape) << entry.path();
        } catch (const Error& e) {
          EXPECT_NE(std::string(e.what()).find(name), std::string::npos) << e.what();
        }
      }
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(entry.path().filename().string()), std::string::npos) << e.what();
    }
  }
  EXPECT_GT(inputs, 0);
}
