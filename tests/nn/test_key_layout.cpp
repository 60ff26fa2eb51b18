// The shared mechanics of reading other checkpoint layouts (nn/key_layout.hpp): the prefix, the rename
// tables, the cut of fused rows.
#include <cpdit/core/error.hpp>
#include <cpdit/nn/key_layout.hpp>

#include <gtest/gtest.h>

namespace cpdit::nn {
namespace {

Weight rows_of(int64_t rows) {
  std::vector<float> v(size_t(rows) * 2);
  for (size_t i = 0; i < v.size(); ++i) v[i] = float(i);
  return Tensor::from_vector(v, {rows, 2});
}

std::vector<std::string> keys(const StateDict& state) {
  std::vector<std::string> out;
  for (const auto& [name, w] : state) out.push_back(name);
  return out;
}

TEST(KeyLayout, ThePrefixKeepsOnlyTheDiffusionModel) {
  // A whole-pipeline file: the diffusion model behind the prefix, a VAE and a text encoder beside it.
  const StateDict file = {{"model.diffusion_model.a.weight", rows_of(1)},
                          {"first_stage_model.decoder.weight", rows_of(1)},
                          {"text_encoders.t5.weight", rows_of(1)}};
  EXPECT_EQ(keys(without_prefix(file)), std::vector<std::string>{"a.weight"});
  EXPECT_TRUE(contains_key(file, "a.weight"));
  const StateDict bare = {{"a.weight", rows_of(1)}, {"b.bias", rows_of(1)}};
  EXPECT_EQ(keys(without_prefix(bare)), keys(bare));
  EXPECT_TRUE(contains_key(bare, "b.bias"));
  EXPECT_FALSE(contains_key(bare, "c.bias"));
}

// A file holding a tensor both behind the prefix and bare (#40: the bare one was dropped in silence):
// which is the model's cannot be told, so it is refused naming both.
TEST(KeyLayout, OneTensorUnderBothNamesIsRefused) {
  const StateDict both = {{"model.diffusion_model.a.weight", rows_of(1)}, {"a.weight", rows_of(1)}};
  try {
    without_prefix(both);
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::format);
    EXPECT_NE(std::string(e.what()).find("holds both model.diffusion_model.a.weight and a.weight"), std::string::npos)
        << e.what();
  }
}

TEST(KeyLayout, StemsRenameWithTheirSuffixInsideAndOutsideBlocks) {
  const KeyLayout layout = {
      {{"head.head", "proj_out"}, {"head.modulation", "scale_shift_table"}},
      {{"blocks", "transformer_blocks", {{"self_attn.q", "attn1.to_q"}, {"modulation", "table"}}}}};
  EXPECT_EQ(renamed_key("head.head.weight", layout), "proj_out.weight");
  EXPECT_EQ(renamed_key("head.head.bias", layout), "proj_out.bias");
  EXPECT_EQ(renamed_key("head.modulation", layout), "scale_shift_table");
  EXPECT_EQ(renamed_key("blocks.12.self_attn.q.weight", layout), "transformer_blocks.12.attn1.to_q.weight");
  EXPECT_EQ(renamed_key("blocks.3.modulation", layout), "transformer_blocks.3.table");
  // a stem only starting like a listed one, another suffix, or a name no table lists: not renamed
  EXPECT_EQ(renamed_key("blocks.3.self_attn.q_norm.weight", layout), std::nullopt);
  EXPECT_EQ(renamed_key("head.head.scale", layout), std::nullopt);
  EXPECT_EQ(renamed_key("modulation", layout), std::nullopt);
  const StateDict renamed = renamed_keys({{"head.head.weight", rows_of(1)}, {"other.weight", rows_of(1)}}, layout);
  EXPECT_EQ(keys(renamed), (std::vector<std::string>{"other.weight", "proj_out.weight"}));
}

TEST(KeyLayout, FusedRowsAreCutIntoViewsOrRefused) {
  const Weight fused = rows_of(5);
  StateDict out;
  cut_rows(out, fused, {"q", "kv"}, {2, 3}, "qkv");
  EXPECT_EQ(out.at("q").shape(), (Shape{2, 2}));
  EXPECT_EQ(out.at("kv").values().data<float>()[0], 4.0f);  // row 2's first value
  EXPECT_EQ(out.at("q").values().data<float>(), fused.values().data<float>());  // a view, not a copy
  try {
    cut_rows(out, fused, {"q", "kv"}, {2, 2}, "blocks.0.qkv");
    FAIL() << "4 rows of 5 were accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("blocks.0.qkv has 5 rows, expected 4"), std::string::npos) << e.what();
  }
  EXPECT_THROW(cut_rows(out, fused, {"q", "kv"}, {6, -1}, "qkv"), Error);  // adds up, but a part is negative
}

// The inverse of the tables: a diffusers module's original name, a fused stem's part with its index.
TEST(KeyLayout, OriginalNamesOfModulesAndOfFusedParts) {
  const KeyLayout layout = {{{"final_layer.linear", "proj_out"}},
                            {{"double_blocks",
                              "transformer_blocks",
                              {{"img_attn.proj", "attn.to_out.0"}},
                              {{"img_attn.qkv", {"attn.to_q", "attn.to_k", "attn.to_v"}}}}}};
  const auto proj = original_name("transformer_blocks.4.attn.to_out.0", layout);
  ASSERT_TRUE(proj);
  EXPECT_EQ(proj->name, "double_blocks.4.img_attn.proj");
  EXPECT_EQ(proj->part, -1);
  const auto k = original_name("transformer_blocks.0.attn.to_k", layout);
  ASSERT_TRUE(k);
  EXPECT_EQ(k->name, "double_blocks.0.img_attn.qkv");
  EXPECT_EQ(k->part, 1);
  EXPECT_EQ(k->parts, 3);
  EXPECT_EQ(original_name("proj_out", layout)->name, "final_layer.linear");
  EXPECT_EQ(original_name("transformer_blocks.0.attn.to_k_extra", layout), std::nullopt);
  EXPECT_EQ(original_name("single_transformer_blocks.0.attn.to_q", layout), std::nullopt);
}

}  // namespace
}  // namespace cpdit::nn
