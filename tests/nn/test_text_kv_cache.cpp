// TextKvCache's rule: a module's keys and values are reused while the tokens they were projected from
// are bitwise the call's (the same tensor or an equal copy), per guidance pass and per source; other
// tokens make them again.
#include <cpdit/nn/step_cache.hpp>
#include <cpdit/nn/text_kv_cache.hpp>

#include <gtest/gtest.h>

namespace cpdit::nn {
namespace {

TEST(TextKvCache, ReusesWhileTheTokensAreBitwiseTheSame) {
  TextKvCache cache;
  int projections = 0;
  auto project = [&] {
    ++projections;
    return TextKvCache::KeysValues{Tensor::full({1, 2}, double(projections)), Tensor::full({1, 2}, 0.0)};
  };
  const int module_a = 0, module_b = 0;
  const Tensor text = Tensor::from_vector({1, 2, 3, 4}, {1, 2, 2});
  EXPECT_EQ(cache.keys_values(&module_a, 0, text, project).first.data<float>()[0], 1.0f);
  EXPECT_EQ(cache.keys_values(&module_a, 0, text, project).first.data<float>()[0], 1.0f);  // the same tensor
  EXPECT_EQ(cache.keys_values(&module_a, 0, text.clone(), project).first.data<float>()[0], 1.0f);  // an equal copy
  EXPECT_EQ(projections, 1);
  cache.keys_values(&module_b, 0, text, project);  // another module: its own projection
  EXPECT_EQ(projections, 2);
  cache.keys_values(&module_a, 1, text, project);  // another source (image tokens): its own
  EXPECT_EQ(projections, 3);
  {
    const ScopedCacheBranch uncond(1);  // the other guidance pass: its own
    cache.keys_values(&module_a, 0, text, project);
    EXPECT_EQ(projections, 4);
  }
  const Tensor changed = Tensor::from_vector({1, 2, 3, 5}, {1, 2, 2});
  EXPECT_EQ(cache.keys_values(&module_a, 0, changed, project).first.data<float>()[0], 5.0f);
  EXPECT_EQ(cache.keys_values(&module_b, 0, changed, project).first.data<float>()[0], 6.0f);  // stale as well
  EXPECT_EQ(cache.keys_values(&module_a, 0, text.reshape({1, 4}), project).first.data<float>()[0], 7.0f);
  EXPECT_EQ(cache.reused(), 2);
  EXPECT_EQ(cache.projected(), 7);
}

TEST(TextKvCache, IsBoundOnItsThreadOnly) {
  EXPECT_EQ(bound_text_kv_cache(), nullptr);
  TextKvCache cache;
  {
    const ScopedTextKvCache bound(&cache);
    EXPECT_EQ(bound_text_kv_cache(), &cache);
  }
  EXPECT_EQ(bound_text_kv_cache(), nullptr);
}

}  // namespace
}  // namespace cpdit::nn
