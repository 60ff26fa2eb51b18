#pragma once
// Which tokens of a sequence each rank of a context-parallel group holds. The plan's splits and
// gathers (shard.hpp) and the router's position rules (context.hpp) read the same layout, so a
// causal or block-causal rule is evaluated on the global positions a rank really holds.
//   contiguous  tensor_split over the flat group: flat rank g = r*U + u holds the g-th range.
//   zigzag      the sequence cut into 2R ranges by tensor_split; ring row r holds ranges r and
//               2R-1-r (one early, one late), and its U ranks split that pair by tensor_split. Under
//               a causal rule a contiguous ring gives row 0 only its own keys to see and row R-1
//               every key; zigzag gives every row the same number of visible (query, key) pairs
//               (exactly, for causal with 2R dividing S) so no rank waits for the slowest. With
//               R = 1 it is the contiguous layout.
#include <cstdint>
#include <string>
#include <vector>

namespace cpdit::parallel {

enum class TokenLayout { contiguous, zigzag };
const char* token_layout_name(TokenLayout layout);

struct TokenRange {
  int64_t start = 0, length = 0;  // global positions [start, start + length)
};

// The ranges of a sequence of n tokens that flat rank `rank` (r*U + u) holds, in the order it holds
// them; empty ranges left out, adjacent ones joined.
std::vector<TokenRange> rank_ranges(int64_t n, int ring, int ulysses, int rank, TokenLayout layout);

// What Ulysses row r holds after its exchange: its U ranks' ranges in rank order, joined.
std::vector<TokenRange> row_ranges(int64_t n, int ring, int ulysses, int row, TokenLayout layout);

int64_t total_length(const std::vector<TokenRange>& ranges);

}  // namespace cpdit::parallel
