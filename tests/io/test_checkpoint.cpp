// Checkpoints: a single file, a sharded index, and the folder layouts of diffusers/transformers.
#include "io_test_util.hpp"

#include <cpdit/io/json.hpp>
#include <cpdit/io/safetensors.hpp>

#include <gtest/gtest.h>

using namespace cpdit;
using namespace cpdit::io;
using namespace cpdit::io::test;

namespace {

// Two shards in the diffusers naming, plus the index that maps each tensor to its shard.
void write_sharded(const TempDir& dir, const nlohmann::json& weight_map_override = nullptr) {
  save_safetensors(dir.file("diffusion_pytorch_model-00001-of-00002.safetensors"),
                   {{"a.weight", Tensor::full({2, 3}, 1.0)}, {"a.bias", Tensor::full({2}, 2.0)}});
  save_safetensors(dir.file("diffusion_pytorch_model-00002-of-00002.safetensors"),
                   {{"b.weight", Tensor::full({4}, 3.0, DType::bf16)}});
  nlohmann::json index = {{"metadata", {{"total_size", 40}}},
                          {"weight_map",
                           {{"a.weight", "diffusion_pytorch_model-00001-of-00002.safetensors"},
                            {"a.bias", "diffusion_pytorch_model-00001-of-00002.safetensors"},
                            {"b.weight", "diffusion_pytorch_model-00002-of-00002.safetensors"}}}};
  if (!weight_map_override.is_null()) index["weight_map"] = weight_map_override;
  write_text_atomic(dir.file("diffusion_pytorch_model.safetensors.index.json"), index.dump(2));
}

}  // namespace

TEST(Checkpoint, ShardedIndexResolvesEveryTensor) {
  TempDir dir;
  write_sharded(dir);
  for (const std::string& path : {dir.file("diffusion_pytorch_model.safetensors.index.json"), dir.path().string()}) {
    Checkpoint ckpt = Checkpoint::open(path);
    EXPECT_EQ(ckpt.shards().size(), 2u);
    EXPECT_EQ(ckpt.names().size(), 3u);
    EXPECT_EQ(ckpt.info("b.weight").dtype, "BF16");
    EXPECT_EQ(ckpt.get("a.weight").shape(), (Shape{2, 3}));
    EXPECT_EQ(ckpt.get("a.bias").data<float>()[1], 2.0f);
    EXPECT_EQ(bf16_to_f32(ckpt.get("b.weight").data<bf16>()[3]), 3.0f);
    EXPECT_FALSE(ckpt.contains("c"));
    expect_error([&] { ckpt.get("c"); }, {"no tensor 'c'", path});
  }
}

TEST(Checkpoint, IndexFromAnotherFolderResolvesShardsBesideIt) {
  TempDir dir;
  write_sharded(dir);
  auto original = std::filesystem::current_path();
  std::filesystem::current_path(std::filesystem::temp_directory_path());
  EXPECT_EQ(Checkpoint::open(dir.file("diffusion_pytorch_model.safetensors.index.json")).names().size(), 3u);
  std::filesystem::current_path(original);
}

TEST(Checkpoint, MissingShardIsAnError) {
  TempDir dir;
  write_sharded(dir, {{"a.weight", "diffusion_pytorch_model-00001-of-00002.safetensors"},
                      {"x", "diffusion_pytorch_model-00009-of-00009.safetensors"}});
  expect_error([&] { Checkpoint::open(dir.path().string()); },
               {"index.json", "shard diffusion_pytorch_model-00009-of-00009.safetensors", "'x'", "missing"});
}

TEST(Checkpoint, TensorListedButAbsentIsAnError) {
  TempDir dir;
  write_sharded(dir, {{"a.weight", "diffusion_pytorch_model-00001-of-00002.safetensors"},
                      {"b.weight", "diffusion_pytorch_model-00001-of-00002.safetensors"}});
  expect_error([&] { Checkpoint::open(dir.path().string()); },
               {"'b.weight'", "listed for shard diffusion_pytorch_model-00001-of-00002.safetensors", "does not hold"});
}

TEST(Checkpoint, TensorInTwoShardsIsAnError) {
  TempDir dir;
  write_sharded(dir);
  save_safetensors(dir.file("diffusion_pytorch_model-00002-of-00002.safetensors"),
                   {{"b.weight", Tensor::full({4}, 3.0)}, {"a.bias", Tensor::full({2}, 2.0)}});
  expect_error([&] { Checkpoint::open(dir.path().string()); }, {"'a.bias'", "two shards"});
}

TEST(Checkpoint, MalformedIndexIsAnError) {
  TempDir dir;
  write_text_atomic(dir.file("model.safetensors.index.json"), R"({"weight_map": [1]})");
  expect_error([&] { Checkpoint::open(dir.path().string()); }, {"model.safetensors.index.json", "weight_map"});
  write_text_atomic(dir.file("model.safetensors.index.json"), R"({"weight_map": {"x": 3}})");
  expect_error([&] { Checkpoint::open(dir.path().string()); }, {"'x'", "not a file name"});
  write_text_atomic(dir.file("model.safetensors.index.json"), R"({"weight_map": )");
  expect_error([&] { Checkpoint::open(dir.path().string()); }, {"model.safetensors.index.json", "invalid JSON"});
}

TEST(Checkpoint, SingleFileAndFolderLayouts) {
  TempDir dir;
  save_safetensors(dir.file("model.safetensors"), {{"w", Tensor::full({2}, 1.0)}});
  EXPECT_EQ(Checkpoint::open(dir.file("model.safetensors")).names(), std::vector<std::string>{"w"});
  EXPECT_EQ(Checkpoint::open(dir.path().string()).names(), std::vector<std::string>{"w"});
  // diffusers' name wins over transformers' when both are present.
  save_safetensors(dir.file("diffusion_pytorch_model.safetensors"), {{"d", Tensor::full({2}, 1.0)}});
  EXPECT_EQ(Checkpoint::open(dir.path().string()).names(), std::vector<std::string>{"d"});
}

TEST(Checkpoint, FolderWithoutCheckpointIsAnError) {
  TempDir dir;
  expect_error([&] { Checkpoint::open(dir.path().string()); }, {"holds no model", "diffusion_pytorch_model"});
}
