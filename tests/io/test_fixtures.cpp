// Every fixture file loads, with the names, dtypes and shapes its README documents.
#include "io_test_util.hpp"

#include <cpdit/io/json.hpp>
#include <cpdit/io/safetensors.hpp>

#include <gtest/gtest.h>

#include <filesystem>

using namespace cpdit;
using namespace cpdit::io;

namespace {

const std::string kFixtures = std::string(CPDIT_TEST_DATA) + "/fixtures";

void expect_tensor(const SafetensorsFile& file, const std::string& name, const std::string& dtype, const Shape& shape) {
  ASSERT_TRUE(file.contains(name)) << file.path() << " lacks " << name;
  EXPECT_EQ(file.info(name).dtype, dtype) << name;
  EXPECT_EQ(file.info(name).shape, shape) << name;
  EXPECT_EQ(file.get(name).shape(), shape) << name;
}

}  // namespace

TEST(Fixtures, EveryFileLoadsCompletely) {
  int files = 0;
  for (const auto& entry : std::filesystem::recursive_directory_iterator(kFixtures)) {
    if (entry.path().extension() == ".json") {
      EXPECT_NO_THROW(read_json(entry.path().string())) << entry.path();
      continue;
    }
    if (entry.path().extension() != ".safetensors") continue;
    ++files;
    SafetensorsFile file = SafetensorsFile::open(entry.path().string());
    EXPECT_FALSE(file.names().empty()) << entry.path();
    for (const auto& [name, tensor] : load_safetensors(entry.path().string()))
      EXPECT_EQ(tensor.shape(), file.info(name).shape) << entry.path() << " " << name;
  }
  // At least the files committed when this line was written (attention, the model, text, VAE,
  // tokenizer and scheduler fixtures): a fixture folder that goes missing fails here.
  EXPECT_GE(files, 35);
}

TEST(Fixtures, AttentionTensorsAsDocumented) {
  struct Case {
    const char* file;
    int64_t b, s, h, d;
    bool mask;
  };
  for (Case c :
       {Case{"attention_b1_s64_h2_d16", 1, 64, 2, 16, false}, Case{"attention_b2_s100_h4_d32", 2, 100, 4, 32, false},
        Case{"attention_b2_s100_h4_d32_keymask", 2, 100, 4, 32, true},
        Case{"attention_b1_s257_h3_d64", 1, 257, 3, 64, false}}) {
    SCOPED_TRACE(c.file);
    SafetensorsFile file = SafetensorsFile::open(kFixtures + "/attention/" + c.file + ".safetensors");
    for (const char* name : {"q", "k", "v", "out"}) expect_tensor(file, name, "F32", {c.b, c.s, c.h, c.d});
    expect_tensor(file, "out_f64", "F64", {c.b, c.s, c.h, c.d});
    expect_tensor(file, "lse", "F32", {c.b, c.h, c.s});
    expect_tensor(file, "lse_f64", "F64", {c.b, c.h, c.s});
    // F64 loads as f32: the float64 reference rounds to within float32 precision of `out`.
    EXPECT_EQ(file.get("out_f64").dtype(), DType::f32);
    EXPECT_LT(max_abs_diff(file.get("out"), file.get("out_f64")), 1e-5);
    EXPECT_EQ(file.metadata().at("layout_qkv_out"), "B,S,H,D");
    EXPECT_EQ(file.contains("key_mask"), c.mask);
    if (!c.mask) continue;
    expect_tensor(file, "key_mask", "BOOL", {c.b, c.s});
    // README: valid lengths [100, 61], true = attended.
    Tensor mask = file.get("key_mask");
    const bool* m = mask.data<bool>();
    for (int64_t k = 0; k < c.s; ++k) {
      EXPECT_TRUE(m[k]) << k;
      EXPECT_EQ(m[c.s + k], k < 61) << k;
    }
  }
}

TEST(Fixtures, FluxTinyInputsAsDocumented) {
  SafetensorsFile inputs = SafetensorsFile::open(kFixtures + "/flux_tiny/inputs.safetensors");
  expect_tensor(inputs, "hidden_states", "F32", {1, 16, 4});
  expect_tensor(inputs, "encoder_hidden_states", "F32", {1, 8, 32});
  expect_tensor(inputs, "pooled_projections", "F32", {1, 32});
  expect_tensor(inputs, "timestep", "F32", {1});
  expect_tensor(inputs, "img_ids", "F32", {16, 3});
  expect_tensor(inputs, "txt_ids", "F32", {8, 3});
  EXPECT_FLOAT_EQ(inputs.get("timestep").data<float>()[0], 0.7f);
  // img_ids: row-major over the 4x4 grid, columns (0, row, col).
  const float* ids = inputs.get("img_ids").data<float>();
  for (int token = 0; token < 16; ++token) {
    EXPECT_EQ(ids[3 * token + 0], 0.0f);
    EXPECT_EQ(ids[3 * token + 1], float(token / 4));
    EXPECT_EQ(ids[3 * token + 2], float(token % 4));
  }
  expect_tensor(SafetensorsFile::open(kFixtures + "/flux_tiny/expected.safetensors"), "sample", "F32", {1, 16, 4});
  SafetensorsFile intermediates = SafetensorsFile::open(kFixtures + "/flux_tiny/intermediates.safetensors");
  expect_tensor(intermediates, "pos_embed.0", "F32", {24, 16});
  expect_tensor(intermediates, "proj_out", "F32", {1, 16, 4});
}

TEST(Fixtures, WanTinyInputsAsDocumented) {
  SafetensorsFile inputs = SafetensorsFile::open(kFixtures + "/wan_tiny/inputs.safetensors");
  expect_tensor(inputs, "hidden_states", "F32", {1, 4, 2, 16, 16});
  expect_tensor(inputs, "encoder_hidden_states", "F32", {1, 12, 16});
  expect_tensor(inputs, "timestep", "F32", {1});
  EXPECT_EQ(inputs.get("timestep").data<float>()[0], 700.0f);
  SafetensorsFile intermediates = SafetensorsFile::open(kFixtures + "/wan_tiny/intermediates.safetensors");
  expect_tensor(intermediates, "rope.0", "F32", {1, 128, 1, 12});
  expect_tensor(intermediates, "patch_embedding", "F32", {1, 24, 2, 8, 8});
  expect_tensor(intermediates, "proj_out", "F32", {1, 128, 16});
}

TEST(Fixtures, UniPCRolloutHasIntTimesteps) {
  SafetensorsFile rollout = SafetensorsFile::open(kFixtures + "/scheduler_unipc/rollout.safetensors");
  const std::string prefix = "wan21_flow_shift3/steps10/";
  expect_tensor(rollout, prefix + "timesteps", "I64", {10});
  expect_tensor(rollout, prefix + "sigmas", "F32", {11});
  expect_tensor(rollout, prefix + "samples", "F32", {11, 1, 16, 2, 4, 4});
  EXPECT_EQ(rollout.get(prefix + "timesteps").data<int64_t>()[0], 999);  // README: first is 999
}

TEST(Fixtures, WeightsAreZeroCopyViewsOfTheMapping) {
  SafetensorsFile weights = SafetensorsFile::open(kFixtures + "/flux_tiny/weights.safetensors");
  Tensor a = weights.get(weights.names()[0]);
  Tensor b = weights.get(weights.names()[0]);
  EXPECT_EQ(a.raw(), b.raw());  // both point into the one mapping
  // The view outlives the SafetensorsFile object (it holds the mapping).
  Tensor survivor;
  std::vector<float> expected;
  {
    SafetensorsFile file = SafetensorsFile::open(kFixtures + "/flux_tiny/expected.safetensors");
    survivor = file.get("sample");
    expected.assign(survivor.data<float>(), survivor.data<float>() + survivor.numel());
  }
  EXPECT_EQ(std::vector<float>(survivor.data<float>(), survivor.data<float>() + survivor.numel()), expected);
}
