// One resolver for every checkpoint layout: model folders (diffusers and transformers names, single
// or sharded), index files, single files with or without a config beside them, and diffusers
// pipeline folders by component; what it cannot find is one clear error.
#include "io_test_util.hpp"

#include <cpdit/io/json.hpp>
#include <cpdit/io/model_files.hpp>
#include <cpdit/io/safetensors.hpp>

#include <gtest/gtest.h>

#include <filesystem>

using namespace cpdit;
using namespace cpdit::io;
using namespace cpdit::io::test;

namespace {

namespace fs = std::filesystem;

// A model folder: `weights` (a file name) holding one tensor, and a config.json unless told not to.
fs::path model_folder(const fs::path& folder, const std::string& weights, bool config = true) {
  fs::create_directories(folder);
  save_safetensors((folder / weights).string(), {{"w", Tensor::full({2}, 1.0)}});
  if (config) write_text_atomic((folder / "config.json").string(), R"({"_class_name": "SomeModel"})");
  return folder;
}

// A diffusers pipeline folder with a transformer, a VAE, a transformers text encoder and a scheduler.
fs::path pipeline_folder(const fs::path& root) {
  model_folder(root / "transformer", "diffusion_pytorch_model.safetensors");
  model_folder(root / "vae", "diffusion_pytorch_model.safetensors");
  model_folder(root / "text_encoder_2", "model.safetensors");
  fs::create_directories(root / "scheduler");
  write_text_atomic((root / "scheduler" / "scheduler_config.json").string(), "{}");
  write_text_atomic((root / "model_index.json").string(),
                    R"({"_class_name": "FluxPipeline", "transformer": ["diffusers", "FluxTransformer2DModel"],
                        "vae": ["diffusers", "AutoencoderKL"], "text_encoder_2": ["transformers", "T5EncoderModel"],
                        "scheduler": ["diffusers", "FlowMatchEulerDiscreteScheduler"]})");
  return root;
}

TEST(ModelFiles, FoldersInTheDiffusersAndTransformersLayouts) {
  for (const std::string weights : {"diffusion_pytorch_model.safetensors", "model.safetensors"}) {
    TempDir dir;
    model_folder(dir.path(), weights);
    ModelFiles files = resolve_model(dir.path().string());
    EXPECT_EQ(files.weights, dir.file(weights));
    EXPECT_EQ(files.config, dir.file("config.json"));
  }
  for (const std::string index : {"diffusion_pytorch_model.safetensors.index.json", "model.safetensors.index.json"}) {
    TempDir dir;
    model_folder(dir.path(), "shard-00001-of-00001.safetensors");
    write_text_atomic(dir.file(index), R"({"weight_map": {"w": "shard-00001-of-00001.safetensors"}})");
    ModelFiles files = resolve_model(dir.path().string());
    EXPECT_EQ(files.weights, dir.file(index));
    EXPECT_EQ(files.config, dir.file("config.json"));
    EXPECT_EQ(Checkpoint::open(dir.path().string()).names(), std::vector<std::string>{"w"});
  }
}

TEST(ModelFiles, SingleFilesAndIndexesTakeTheConfigBesideThemOrTheOneGiven) {
  TempDir dir;
  model_folder(dir.path() / "with", "flux1-dev.safetensors");
  EXPECT_EQ(resolve_model(dir.file("with/flux1-dev.safetensors")).config, dir.file("with/config.json"));
  model_folder(dir.path() / "alone", "flux1-dev.safetensors", false);
  EXPECT_EQ(resolve_model(dir.file("alone/flux1-dev.safetensors")).config, std::nullopt);
  ModelFiles given = resolve_model(dir.file("with/flux1-dev.safetensors"), "transformer", dir.file("mine.json"));
  EXPECT_EQ(given.weights, dir.file("with/flux1-dev.safetensors"));
  EXPECT_EQ(given.config, dir.file("mine.json"));
}

TEST(ModelFiles, APipelineFolderResolvesEachComponentDefaultingToTheTransformer) {
  TempDir dir;
  const fs::path root = pipeline_folder(dir.path());
  EXPECT_EQ(resolve_model(root.string()).weights,
            (root / "transformer" / "diffusion_pytorch_model.safetensors").string());
  EXPECT_EQ(resolve_model(root.string()).config, (root / "transformer" / "config.json").string());
  EXPECT_EQ(resolve_model(root.string(), "vae").weights,
            (root / "vae" / "diffusion_pytorch_model.safetensors").string());
  EXPECT_EQ(resolve_model(root.string(), "text_encoder_2").weights,
            (root / "text_encoder_2" / "model.safetensors").string());
  EXPECT_EQ(pipeline_component(root.string(), "scheduler"), (root / "scheduler").string());
  EXPECT_EQ(pipeline_component((root / "transformer").string(), "scheduler"), std::nullopt);  // not a pipeline
  EXPECT_EQ(Checkpoint::open(root.string()).path(), root.string());  // the checkpoint reader resolves the same way
  EXPECT_EQ(Checkpoint::open(root.string()).shards()[0].path(),
            (root / "transformer" / "diffusion_pytorch_model.safetensors").string());
}

TEST(ModelFiles, WhatCannotBeFoundIsOneClearError) {
  TempDir dir;
  const fs::path root = pipeline_folder(dir.path() / "pipeline");
  expect_error([&] { resolve_model(root.string(), "text_encoder"); },
               {"diffusers pipeline", "no 'text_encoder' folder", "scheduler", "text_encoder_2", "transformer", "vae"});
  fs::create_directories(dir.path() / "empty");
  expect_error([&] { resolve_model(dir.file("empty")); },
               {"empty", "holds no model", "model_index.json", "model.safetensors"});
  expect_error([&] { resolve_model(root.string(), "scheduler"); }, {"scheduler", "holds no model"});
  expect_error([&] { resolve_model(dir.file("missing")); }, {"missing", "does not exist"});
}

}  // namespace
