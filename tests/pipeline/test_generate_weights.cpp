// `cpdit generate` holds one copy of the weights per process, whatever the number of local ranks:
// a bf16 checkpoint stays bf16 (mapped, not copied) unless --dtype f32 asks for one widened copy,
// and the summary's resident weight bytes say so.
#include "support/run_cli.hpp"

#include <cpdit/io/json.hpp>
#include <cpdit/io/safetensors.hpp>
#include <cpdit/pipeline/presets.hpp>

#include <gtest/gtest.h>

#include <fstream>

namespace cpdit::pipeline {
namespace {

using cpdit::testing::run_cli;
using cpdit::testing::TempDir;

// The flux-tiny preset saved as a bf16 diffusers folder; returns its tensor bytes.
int64_t write_bf16_checkpoint(const TempDir& dir) {
  std::map<std::string, Tensor> bf16;
  int64_t bytes = 0;
  for (const auto& [name, t] : flux_preset("flux-tiny", 3).state) {
    bf16[name] = t.values().to(DType::bf16);
    bytes += int64_t(bf16[name].nbytes());
  }
  io::save_safetensors(dir.file("diffusion_pytorch_model.safetensors"), bf16);
  // The fixture's config is flux-tiny's but for the packed latent channels generate feeds it.
  nlohmann::json config = io::read_json(std::string(CPDIT_TEST_DATA) + "/fixtures/flux_tiny/config.json");
  config["in_channels"] = 64;
  std::ofstream(dir.file("config.json")) << config.dump();
  return bytes;
}

struct Generated {
  int64_t weight_bytes = 0;
  Tensor latents;
};

Generated generate(const TempDir& dir, int ranks, const std::string& dtype) {
  const std::string out = dir.file("latents_" + std::to_string(ranks) + dtype + ".safetensors");
  auto r = run_cli("generate --model " + dir.path().string() + " --ranks " + std::to_string(ranks) + " --dtype " +
                   dtype + " --threads 1 --steps 2 --height 32 --width 48 --text-tokens 5 --random-embeddings --json --out " + out);
  EXPECT_EQ(r.code, 0) << r.err;
  if (r.code != 0) return {};
  return {nlohmann::json::parse(r.out).at("weight_bytes_resident").get<int64_t>(),
          io::load_safetensors(out).at("latents")};
}

TEST(GenerateWeights, OneCopyPerProcessWhateverTheRankCount) {
  TempDir dir("generate_weights");
  const int64_t checkpoint_bytes = write_bf16_checkpoint(dir);
  const Generated as_stored = generate(dir, 2, "auto");
  EXPECT_EQ(as_stored.weight_bytes, checkpoint_bytes) << "bf16 stays bf16, shared by both ranks";
  EXPECT_EQ(generate(dir, 1, "auto").weight_bytes, checkpoint_bytes);
  for (int ranks : {1, 2}) {
    const Generated widened = generate(dir, ranks, "f32");
    EXPECT_EQ(widened.weight_bytes, 2 * checkpoint_bytes) << ranks << " ranks: one widened copy for the process";
    // Widening is exact and the GEMM runs in f32 either way, so the weights' dtype in memory does not
    // change a bit of the result.
    if (ranks == 2 && widened.latents.defined() && as_stored.latents.defined()) {
      EXPECT_EQ(max_abs_diff(widened.latents, as_stored.latents), 0.0);
    }
  }
}

}  // namespace
}  // namespace cpdit::pipeline
