#pragma once
// An exact cache of cross-attention keys and values: where the tokens a cross-attention attends to (the
// text, and Wan's image tokens) are the same at every step of a run — Wan's, SkyReels-V2's and
// LTX-Video's, each guidance pass its own — their key and value projections are made once and reused.
// Nothing is approximated: a module's entry is used only while the tokens it was projected from are
// bitwise those of the call (the same tensor, or one compared equal), so a run with the cache is
// bitwise the run without. FLUX.1's and Qwen-Image's joint attention projects text that the blocks
// modulate at every step, so it never reaches this cache.
//
// The pipeline binds one per rank for a run (ScopedTextKvCache); the guidance pass is the step cache's
// (ScopedCacheBranch, nn/step_cache.hpp).
#include <cpdit/core/tensor.hpp>

#include <functional>
#include <map>
#include <tuple>
#include <utility>

namespace cpdit::nn {

class TextKvCache {
 public:
  using KeysValues = std::pair<Tensor, Tensor>;
  // `module`'s keys and values of `tokens` (its `source`: 0 the text, 1 image tokens) on this thread's
  // guidance pass: the cached ones while `tokens` are bitwise those they were made from, else made by
  // `project` and kept.
  KeysValues keys_values(const void* module, int source, const Tensor& tokens,
                         const std::function<KeysValues()>& project);
  int64_t reused() const { return reused_; }
  int64_t projected() const { return projected_; }

 private:
  // The tokens a pass's entries of one source were made from, and a count that changes with them.
  struct Tokens {
    Tensor tensor;
    int64_t version = 0;
  };
  struct Entry {
    KeysValues kv;
    int64_t version = -1;
  };
  std::map<std::pair<int, int>, Tokens> tokens_;              // by (pass, source)
  std::map<std::tuple<const void*, int, int>, Entry> entries_;  // by (module, pass, source)
  int64_t reused_ = 0, projected_ = 0;
};

// Binds `cache` on the calling thread (the rank's) while it lives; null unbinds.
class ScopedTextKvCache {
 public:
  explicit ScopedTextKvCache(TextKvCache* cache);
  ~ScopedTextKvCache();
  ScopedTextKvCache(const ScopedTextKvCache&) = delete;
  ScopedTextKvCache& operator=(const ScopedTextKvCache&) = delete;

 private:
  TextKvCache* previous_;
};

// The cache bound on this thread, or null.
TextKvCache* bound_text_kv_cache();

}  // namespace cpdit::nn
