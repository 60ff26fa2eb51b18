// `cpdit inspect` run as a user would: output on stdout, one-line errors on stderr, exit code 2.
#include "io_test_util.hpp"
#include "support/run_cli.hpp"

#include <gtest/gtest.h>


#include <cstdio>
#include <filesystem>

#include <sys/stat.h>

using namespace cpdit::io::test;

namespace {

const std::string kAttention = std::string(CPDIT_TEST_DATA) + "/fixtures/attention/attention_b1_s64_h2_d16.safetensors";

}  // namespace

TEST(Inspect, ListsTensorsAndMetadataOfAFile) {
  TempDir dir;
  cpdit::testing::CliResult run = cpdit::testing::run_cli("inspect '" + kAttention + "'");
  EXPECT_EQ(run.code, 0) << run.err;
  EXPECT_TRUE(run.err.empty()) << run.err;
  EXPECT_NE(run.out.find("7 tensors"), std::string::npos) << run.out;
  EXPECT_NE(run.out.find("layout_qkv_out = B,S,H,D"), std::string::npos) << run.out;
  // Row of q: name, dtype, shape, bytes (1*64*2*16 floats).
  EXPECT_NE(run.out.find("\nq "), std::string::npos) << run.out;
  EXPECT_NE(run.out.find("F32      (1, 64, 2, 16)  8192"), std::string::npos) << run.out;
  EXPECT_NE(run.out.find("F64"), std::string::npos) << run.out;
}

TEST(Inspect, WorksOnAFolder) {
  TempDir dir;
  std::filesystem::copy_file(kAttention, dir.file("model.safetensors"));
  cpdit::testing::CliResult run = cpdit::testing::run_cli("inspect '" + dir.path().string() + "'");
  EXPECT_EQ(run.code, 0) << run.err;
  EXPECT_NE(run.out.find("lse_f64"), std::string::npos) << run.out;
}

TEST(Inspect, CorruptFileIsOneLineOnStderrAndExit2) {
  TempDir dir;
  std::string bytes = read_bytes(kAttention);
  write_bytes(dir.file("cut.safetensors"), bytes.substr(0, bytes.size() - 100));
  cpdit::testing::CliResult run = cpdit::testing::run_cli("inspect '" + dir.file("cut.safetensors") + "'");
  EXPECT_EQ(run.code, 2);
  EXPECT_TRUE(run.out.empty()) << run.out;
  EXPECT_EQ(std::count(run.err.begin(), run.err.end(), '\n'), 1) << run.err;
  EXPECT_EQ(run.err.rfind("cpdit: error: ", 0), 0u) << run.err;
  EXPECT_NE(run.err.find("cut.safetensors"), std::string::npos) << run.err;
  EXPECT_NE(run.err.find("truncated"), std::string::npos) << run.err;
}

// Only regular files are read: opening a FIFO for reading would wait for a writer forever, and a
// device like /dev/zero has no size to map. `timeout` turns a hang into exit 124 instead of a stuck test.
TEST(Inspect, FifoAndDeviceAreRefusedAtOnce) {
  TempDir dir;
  ASSERT_EQ(mkfifo(dir.file("pipe.safetensors").c_str(), 0600), 0);
  for (const std::string& path : {dir.file("pipe.safetensors"), std::string("/dev/zero")}) {
    cpdit::testing::CliResult run = cpdit::testing::run_cli("inspect '" + path + "'", "timeout 20");
    EXPECT_EQ(run.code, 2) << path << ": " << run.err;
    EXPECT_EQ(std::count(run.err.begin(), run.err.end(), '\n'), 1) << run.err;
    EXPECT_NE(run.err.find("not a regular file"), std::string::npos) << run.err;
  }
}

// A symbolic link loop is the operating system's refusal, reported as one line, not an internal error.
TEST(Inspect, SymlinkLoopIsAOneLineError) {
  TempDir dir;
  std::filesystem::create_symlink(dir.file("b.safetensors"), dir.file("a.safetensors"));
  std::filesystem::create_symlink(dir.file("a.safetensors"), dir.file("b.safetensors"));
  cpdit::testing::CliResult run = cpdit::testing::run_cli("inspect '" + dir.file("a.safetensors") + "'");
  EXPECT_EQ(run.code, 2) << run.err;
  EXPECT_EQ(std::count(run.err.begin(), run.err.end(), '\n'), 1) << run.err;
  EXPECT_EQ(run.err.rfind("cpdit: error: ", 0), 0u) << run.err;
  EXPECT_NE(run.err.find("symbolic links"), std::string::npos) << run.err;
}

// Past the file-size limit (ulimit -f) the write fails with a message instead of SIGXFSZ killing the
// process silently, and neither the output nor its temp file is left behind.
TEST(Outputs, FileSizeLimitIsAOneLineErrorAndLeavesNoTempFile) {
  TempDir dir;
  const std::string inputs = std::string(CPDIT_TEST_DATA) + "/fixtures/attention/attention_b1_s64_h2_d16.safetensors";
  cpdit::testing::CliResult run = cpdit::testing::run_cli(
      "attention --inputs '" + inputs + "' --output '" + dir.file("out.safetensors") + "'", "ulimit -f 2;");
  EXPECT_EQ(run.code, 2) << run.err;
  EXPECT_EQ(std::count(run.err.begin(), run.err.end(), '\n'), 1) << run.err;
  EXPECT_NE(run.err.find("File too large"), std::string::npos) << run.err;
  EXPECT_TRUE(std::filesystem::is_empty(dir.path())) << "left files in " << dir.path();
}

// CLI11's own parse errors read like every other error: one line, the prefix, exit 2.
TEST(Outputs, BadOptionIsOneLineWithThePrefix) {
  cpdit::testing::CliResult run = cpdit::testing::run_cli("inspect --no-such-option x");
  EXPECT_EQ(run.code, 2) << run.err;
  EXPECT_EQ(std::count(run.err.begin(), run.err.end(), '\n'), 1) << run.err;
  EXPECT_EQ(run.err.rfind("cpdit: error: ", 0), 0u) << run.err;
}

TEST(Outputs, UnknownCommandIsNamedWithTheChoices) {
  cpdit::testing::CliResult run = cpdit::testing::run_cli("inpsect x");
  EXPECT_EQ(run.code, 2) << run.err;
  EXPECT_EQ(std::count(run.err.begin(), run.err.end(), '\n'), 1) << run.err;
  EXPECT_EQ(run.err.rfind("cpdit: error: unknown command 'inpsect'; the commands are ", 0), 0u) << run.err;
  EXPECT_NE(run.err.find("inspect"), std::string::npos) << run.err;
}
