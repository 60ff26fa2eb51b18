// `cpdit forward` on the wan_tiny fixture: the command finds the model class in config.json and
// writes diffusers' sample, on one rank and under context parallelism.
#include "models/wan_fixture.hpp"

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <unistd.h>

namespace cpdit::models::wan {
namespace {

namespace fs = std::filesystem;
using testing::fixture_dir;

// A diffusers transformer folder built from the fixture (config.json beside
// diffusion_pytorch_model.safetensors), removed afterwards.
class DiffusersFolder {
 public:
  DiffusersFolder() : path_(fs::temp_directory_path() / ("cpdit_wan_cli_" + std::to_string(::getpid()))) {
    fs::remove_all(path_);
    fs::create_directories(path_ / "model");
    fs::copy_file(fixture_dir() + "/config.json", path_ / "model" / "config.json");
    fs::copy_file(fixture_dir() + "/weights.safetensors", path_ / "model" / "diffusion_pytorch_model.safetensors");
  }
  ~DiffusersFolder() { fs::remove_all(path_); }
  std::string model() const { return (path_ / "model").string(); }
  std::string file(const std::string& name) const { return (path_ / name).string(); }

 private:
  fs::path path_;
};

TEST(WanCli, ForwardFindsTheModelClassAndWritesTheSample) {
  DiffusersFolder dir;
  const Tensor expected = io::load_safetensors(fixture_dir() + "/expected.safetensors").at("sample");
  const std::string out = dir.file("sample.safetensors");
  const std::string common = " --inputs " + fixture_dir() + "/inputs.safetensors --threads 1 --output " + out;
  for (const std::string& model : {"--model " + dir.model(), "--model " + fixture_dir() + "/weights.safetensors --config " +
                                                                 fixture_dir() + "/config.json"})
    for (const std::string layout : {"", " --ring 2 --ulysses 2", " --ring 3"}) {
      fs::remove(out);
      const std::string command = std::string(CPDIT_BINARY) + " forward " + model + common + layout + " > /dev/null";
      ASSERT_EQ(std::system(command.c_str()), 0) << command;
      EXPECT_LT(max_abs_diff(io::load_safetensors(out).at("sample"), expected), 1e-4) << command;
    }
}

}  // namespace
}  // namespace cpdit::models::wan
