#include <cpdit/nn/step_cache.hpp>
#include <cpdit/nn/text_kv_cache.hpp>

#include "nn/step_cache_state.hpp"

#include <cstring>

namespace cpdit::nn {

namespace {

thread_local TextKvCache* t_text_kv = nullptr;

// Whether `a` and `b` hold bitwise the same elements: the same view of one storage, or equal bytes.
bool same_tokens(const Tensor& a, const Tensor& b) {
  if (!a.defined() || a.dtype() != b.dtype() || a.shape() != b.shape()) return false;
  if (a.raw() == b.raw() && a.strides() == b.strides()) return true;
  const Tensor x = a.contiguous(), y = b.contiguous();
  return std::memcmp(x.raw(), y.raw(), x.nbytes()) == 0;
}

}  // namespace

TextKvCache::KeysValues TextKvCache::keys_values(const void* module, int source, const Tensor& tokens,
                                                 const std::function<KeysValues()>& project) {
  const int pass = cache_detail::bound_branch();
  Tokens& seen = tokens_[{pass, source}];
  if (!same_tokens(seen.tensor, tokens)) ++seen.version;  // other tokens: this pass's entries are stale
  // Held, so that no other tensor can take its memory while an entry depends on it; the newest of
  // equal tensors, so that the next call's (usually this very tensor) compares as the same view.
  seen.tensor = tokens;
  Entry& entry = entries_[{module, pass, source}];
  if (entry.version == seen.version) {
    ++reused_;
    return entry.kv;
  }
  entry.kv = project();
  entry.version = seen.version;
  ++projected_;
  return entry.kv;
}

ScopedTextKvCache::ScopedTextKvCache(TextKvCache* cache) : previous_(t_text_kv) { t_text_kv = cache; }
ScopedTextKvCache::~ScopedTextKvCache() { t_text_kv = previous_; }

TextKvCache* bound_text_kv_cache() { return t_text_kv; }

}  // namespace cpdit::nn
