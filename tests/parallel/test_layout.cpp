// Token layouts: every token held by exactly one rank, shard / gather inverse to each other, and
// the zigzag layout giving every ring row the same attention work under a causal rule, where the
// contiguous one does not (counted in visible (query, key) pairs, not timed).
#include <cpdit/comm/local.hpp>
#include <cpdit/parallel/context.hpp>
#include <cpdit/parallel/layout.hpp>
#include <cpdit/parallel/shard.hpp>

#include <gtest/gtest.h>

#include <algorithm>

namespace cpdit::parallel {
namespace {

const std::pair<int, int> kMeshes[] = {{1, 1}, {2, 1}, {3, 1}, {4, 1}, {1, 2}, {2, 2}, {3, 2}, {2, 3}};

TEST(TokenLayout, EveryTokenIsHeldByOneRank) {
  for (TokenLayout layout : {TokenLayout::contiguous, TokenLayout::zigzag})
    for (auto [R, U] : kMeshes)
      for (int64_t n : {0, 1, 5, 97, 10200}) {
        std::vector<int> holders(size_t(n), 0);
        for (int g = 0; g < R * U; ++g)
          for (const TokenRange& r : rank_ranges(n, R, U, g, layout))
            for (int64_t i = r.start; i < r.start + r.length; ++i) ++holders[size_t(i)];
        EXPECT_TRUE(std::all_of(holders.begin(), holders.end(), [](int h) { return h == 1; }))
            << token_layout_name(layout) << " R" << R << "U" << U << " n " << n;
      }
}

TEST(TokenLayout, ZigzagIsContiguousWithoutARing) {
  for (int U : {1, 2, 3})
    for (int g = 0; g < U; ++g) {
      const auto zigzag = rank_ranges(97, 1, U, g, TokenLayout::zigzag);
      const auto contiguous = rank_ranges(97, 1, U, g, TokenLayout::contiguous);
      ASSERT_EQ(zigzag.size(), 1u);
      EXPECT_EQ(zigzag[0].start, contiguous[0].start);
      EXPECT_EQ(zigzag[0].length, contiguous[0].length);
    }
}

// Visible (query, key) pairs of ring row r: its queries against every key of the sequence under
// the rule. The U ranks of a row split its heads evenly, so equal rows mean equal ranks.
int64_t visible_pairs(int64_t n, int R, int U, int row, TokenLayout layout, const attention::Mask& rule) {
  int64_t pairs = 0;
  for (const TokenRange& r : row_ranges(n, R, U, row, layout))
    for (int64_t i = r.start; i < r.start + r.length; ++i) pairs += std::min(n, rule.last_visible_key(i) + 1);
  return pairs;
}

std::vector<int64_t> rows_work(int64_t n, int R, int U, TokenLayout layout, const attention::Mask& rule) {
  std::vector<int64_t> work;
  for (int r = 0; r < R; ++r) work.push_back(visible_pairs(n, R, U, r, layout, rule));
  return work;
}

TEST(TokenLayout, ZigzagGivesEveryRingRowEqualCausalWork) {
  for (auto [R, U] : {std::pair{2, 1}, std::pair{3, 1}, std::pair{4, 1}, std::pair{2, 2}}) {
    const int64_t n = 2 * R * 25;  // 2R ranges of 25 tokens: an early and a late one per row
    const auto zigzag = rows_work(n, R, U, TokenLayout::zigzag, attention::Mask::causal());
    EXPECT_TRUE(std::all_of(zigzag.begin(), zigzag.end(), [&](int64_t w) { return w == zigzag[0]; }))
        << "R" << R << "U" << U;
    const auto contiguous = rows_work(n, R, U, TokenLayout::contiguous, attention::Mask::causal());
    EXPECT_GT(contiguous.back(), 2 * contiguous.front()) << "the contiguous ring is unbalanced";
  }
}

TEST(TokenLayout, ZigzagBalancesSkyReelsBlockCausalFramesOnTwoRanks) {
  // A 540p clip: 544x960 x 17 frames = 5 latent frames of 34 x 60 = 2040 tokens, blocks of one
  // frame. Contiguous: rank 0 holds frames 0-2.5 (sees 1-3 frames each), rank 1 frames 2.5-5.
  const int64_t frame = 34 * 60, n = 5 * frame;
  const attention::Mask rule = attention::Mask::block_causal(frame);
  const auto zigzag = rows_work(n, 2, 1, TokenLayout::zigzag, rule);
  EXPECT_EQ(zigzag[0], zigzag[1]);
  EXPECT_EQ(zigzag[0] + zigzag[1], 15 * frame * frame);  // frame f sees f + 1 frames: 1 + ... + 5
  const auto contiguous = rows_work(n, 2, 1, TokenLayout::contiguous, rule);
  EXPECT_GT(double(contiguous[1]) / double(contiguous[0]), 2.0);
}

Tensor iota(const Shape& shape) {
  std::vector<float> values(size_t(shape_numel(shape)));
  for (size_t i = 0; i < values.size(); ++i) values[i] = float(i);
  return Tensor::from_vector(values, shape);
}

TEST(TokenLayout, ZigzagShardAndGatherRoundTrip) {
  for (auto [R, U] : {std::pair{2, 1}, std::pair{3, 1}, std::pair{2, 2}})
    for (int64_t n : {97, 3}) {
      const Tensor full = iota({2, n, 3});
      comm::run_local(R * U, [&](comm::Communicator& world) {
        ContextParallelConfig config;
        config.ring_degree = R;
        config.ulysses_degree = U;
        config.token_layout = TokenLayout::zigzag;
        ParallelContext context(std::shared_ptr<comm::Communicator>(&world, [](comm::Communicator*) {}), config);
        const Tensor part = context.shard(full, 1);
        const auto ranges = rank_ranges(n, R, U, world.rank(), TokenLayout::zigzag);
        ASSERT_EQ(part.size(1), total_length(ranges));
        // Each held token is the global one its range names (batch 0, column 0).
        int64_t local = 0;
        for (const TokenRange& r : ranges)
          for (int64_t i = 0; i < r.length; ++i, ++local)
            EXPECT_EQ(part.data<float>()[local * 3], float((r.start + i) * 3));
        EXPECT_EQ(max_abs_diff(context.gather(part, 1), full), 0.0);
      });
    }
}

}  // namespace
}  // namespace cpdit::parallel
