// `cpdit generate` writes its outputs together: when one cannot be written, none is, every old one
// stays as it was, and no temp file is left.
#include "support/run_cli.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iterator>

namespace cpdit::pipeline {
namespace {

namespace fs = std::filesystem;
using cpdit::testing::run_cli;
using cpdit::testing::TempDir;

std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

TEST(GenerateOutputs, AFailingPreviewKeepsTheOldOutAndWritesNothing) {
  TempDir dir("generate_outputs");
  const std::string out = dir.file("out.safetensors");
  std::ofstream(out) << "old latents";
  // A folder where the preview PNG should go: its write is the one that fails, after --out's.
  // --json: no progress lines, so the error is the one line on stderr.
  fs::create_directory(dir.file("preview.png"));
  const auto r = run_cli(
      "generate --preset flux-tiny --steps 1 --height 32 --width 32 --text-tokens 8 --threads 1 --json"
      " --out " +
      out + " --image " + dir.file("image.png") + " --preview " + dir.file("preview.png"));
  EXPECT_EQ(r.code, 2) << r.err;
  EXPECT_NE(r.err.find("preview.png: it is a folder"), std::string::npos) << r.err;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  EXPECT_EQ(slurp(out), "old latents");
  std::vector<std::string> names = dir.entries();
  std::sort(names.begin(), names.end());
  EXPECT_EQ(names, (std::vector<std::string>{"out.safetensors", "preview.png"})) << "no image, no temp file";
  EXPECT_TRUE(fs::is_empty(dir.file("preview.png")));
}

}  // namespace
}  // namespace cpdit::pipeline
