// The contiguous and zigzag token layouts as lists of global ranges.
#include <cpdit/core/error.hpp>
#include <cpdit/core/tensor.hpp>
#include <cpdit/parallel/layout.hpp>

#include <algorithm>

namespace cpdit::parallel {
namespace {

// Appends [start, start + length) to `ranges`, joined to the last range where they touch.
void append_range(std::vector<TokenRange>& ranges, int64_t start, int64_t length) {
  if (length == 0) return;
  if (!ranges.empty() && ranges.back().start + ranges.back().length == start) {
    ranges.back().length += length;
    return;
  }
  ranges.push_back({start, length});
}

// Elements [from, from + length) of the sequence the ranges make when read one after another.
std::vector<TokenRange> sub_ranges(const std::vector<TokenRange>& ranges, int64_t from, int64_t length) {
  std::vector<TokenRange> out;
  for (const TokenRange& r : ranges) {
    const int64_t begin = std::max<int64_t>(from, 0), end = std::min(from + length, r.length);
    if (begin < end) append_range(out, r.start + begin, end - begin);
    from -= r.length;
  }
  return out;
}

// Ring row r's part of the zigzag layout before its U ranks split it: ranges r and 2R-1-r of 2R.
std::vector<TokenRange> zigzag_row(int64_t n, int ring, int row) {
  const int parts = 2 * ring, late = parts - 1 - row;
  const std::vector<int64_t> sizes = split_sizes(n, parts);
  std::vector<TokenRange> ranges;
  append_range(ranges, split_offset(n, parts, row), sizes[size_t(row)]);
  append_range(ranges, split_offset(n, parts, late), sizes[size_t(late)]);
  return ranges;
}

}  // namespace

const char* token_layout_name(TokenLayout layout) {
  return layout == TokenLayout::contiguous ? "contiguous" : "zigzag";
}

int64_t total_length(const std::vector<TokenRange>& ranges) {
  int64_t n = 0;
  for (const TokenRange& r : ranges) n += r.length;
  return n;
}

std::vector<TokenRange> rank_ranges(int64_t n, int ring, int ulysses, int rank, TokenLayout layout) {
  CPDIT_CHECK(n >= 0 && ring >= 1 && ulysses >= 1 && rank >= 0 && rank < ring * ulysses, invalid_argument,
              "token layout: rank ", rank, " of ", ring, " x ", ulysses, " ranks over ", n, " tokens");
  std::vector<TokenRange> ranges;
  if (layout == TokenLayout::contiguous) {
    const int ranks = ring * ulysses;
    append_range(ranges, split_offset(n, ranks, rank), split_sizes(n, ranks)[size_t(rank)]);
    return ranges;
  }
  const std::vector<TokenRange> row = zigzag_row(n, ring, rank / ulysses);
  const int64_t row_length = total_length(row);
  const int u = rank % ulysses;
  return sub_ranges(row, split_offset(row_length, ulysses, u), split_sizes(row_length, ulysses)[size_t(u)]);
}

std::vector<TokenRange> row_ranges(int64_t n, int ring, int ulysses, int row, TokenLayout layout) {
  std::vector<TokenRange> ranges;
  for (int u = 0; u < ulysses; ++u)
    for (const TokenRange& r : rank_ranges(n, ring, ulysses, row * ulysses + u, layout))
      append_range(ranges, r.start, r.length);
  return ranges;
}

}  // namespace cpdit::parallel
