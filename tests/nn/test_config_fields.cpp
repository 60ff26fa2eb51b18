// Config fields read from a config.json: an integer field takes a whole number it can hold (not
// 1.5 truncated to 1, nor 1e30 wrapped), the fields written back as config.json keys read the same,
// and a config asking for more blocks than the checkpoint's tensors hold is refused before any
// module is built.
#include <cpdit/core/error.hpp>
#include <cpdit/nn/config_inference.hpp>

#include <gtest/gtest.h>

#include <array>
#include <string>
#include <vector>

namespace cpdit::nn {
namespace {

int64_t read_int64(const char* text) {
  int64_t value = -7;
  read_config_field(nlohmann::json::parse(text), "num_layers", value);
  return value;
}

TEST(ConfigFields, IntegersTakeOnlyWholeNumbersTheyCanHold) {
  EXPECT_EQ(read_int64(R"({"num_layers": 19})"), 19);
  EXPECT_EQ(read_int64(R"({"num_layers": 19.0})"), 19);  // a whole number written as a float
  EXPECT_EQ(read_int64(R"({"num_layers": null})"), -7);  // null: keep the default
  EXPECT_EQ(read_int64(R"({})"), -7);
  for (const char* text : {R"({"num_layers": 1.5})", R"({"num_layers": 1e30})", R"({"num_layers": -1e300})",
                           R"({"num_layers": 18446744073709551615})"}) {
    EXPECT_THROW(read_int64(text), Error) << text;
  }
  int32_t narrow = 0;
  EXPECT_THROW(read_config_field(nlohmann::json::parse(R"({"n": 4294967296})"), "n", narrow), Error);
  uint32_t count = 0;
  EXPECT_THROW(read_config_field(nlohmann::json::parse(R"({"n": -1})"), "n", count), Error);
  double real = 0;  // floats are not whole-number fields
  read_config_field(nlohmann::json::parse(R"({"x": 1.5})"), "x", real);
  EXPECT_EQ(real, 1.5);
}

TEST(ConfigFields, TheMessageNamesTheConfigAndTheField) {
  int64_t layers = 0;
  try {
    read_config_fields(nlohmann::json::parse(R"({"num_layers": 1.5})"), "FLUX", {{"num_layers", layers}});
    FAIL() << "1.5 layers accepted";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "FLUX config: num_layers must be a whole number, got 1.5");
  }
}

// A config as families write theirs: fields() lists every field from_json reads.
struct ToyConfig {
  int64_t num_layers = 1;
  float eps = 1e-6f;
  std::string qk_norm = "rms_norm";
  std::array<int64_t, 3> patch_size{1, 2, 2};
  bool guidance_embeds = false;
  std::vector<ConfigField> fields() {
    return {{"num_layers", num_layers}, {"eps", eps}, {"qk_norm", qk_norm}, {"patch_size", patch_size},
            {"guidance_embeds", guidance_embeds}};
  }
};

TEST(ConfigFields, ConfigJsonWritesBackWhatTheFieldsRead) {
  ToyConfig c;
  c.num_layers = 7, c.eps = 1e-5f, c.qk_norm = "layer_norm", c.patch_size = {1, 4, 4}, c.guidance_embeds = true;
  const nlohmann::json j = config_json(c);
  // every field under its config.json key; a float as the shortest decimal of its value
  EXPECT_EQ(j.dump(),
            R"({"eps":1e-05,"guidance_embeds":true,"num_layers":7,"patch_size":[1,4,4],"qk_norm":"layer_norm"})");
  ToyConfig back;
  read_config_fields(j, "Toy", back.fields());
  EXPECT_EQ(back.num_layers, 7);
  EXPECT_EQ(back.eps, 1e-5f);
  EXPECT_EQ(back.qk_norm, "layer_norm");
  EXPECT_EQ(back.patch_size, c.patch_size);
  EXPECT_TRUE(back.guidance_embeds);
}

struct Layers {
  int64_t num_layers = 2, num_single_layers = 4;
};

TEST(ConfigFields, LayerCountsAboveTheCheckpointAreRefused) {
  const Layers checkpoint;
  EXPECT_NO_THROW(check_layer_counts("config.json", Layers{2, 4}, checkpoint));
  EXPECT_NO_THROW(check_layer_counts("config.json", Layers{1, 0}, checkpoint));  // fewer: the loader names the rest
  try {
    check_layer_counts("config.json", Layers{1000000000, 4}, checkpoint);
    FAIL() << "a billion layers accepted";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "config.json: num_layers is 1000000000 but the checkpoint has weights for 2");
  }
  EXPECT_THROW(check_layer_counts("config.json", Layers{2, 5}, checkpoint), Error);
}

}  // namespace
}  // namespace cpdit::nn
