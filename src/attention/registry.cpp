// Backend registry, the process-wide default and the thread-local override, and capability checks.
#include "attention/detail.hpp"

#include <cpdit/core/error.hpp>

#include <atomic>
#include <cstdlib>
#include <map>
#include <mutex>

namespace cpdit::attention {

Backend::~Backend() = default;

namespace {

// Backends are never removed, so references handed out stay valid for the life of the process.
struct Registry {
  std::mutex mutex;
  std::map<std::string, std::shared_ptr<const Backend>> backends;
  std::atomic<const Backend*> default_backend{nullptr};

  Registry() {
    for (auto b : {detail::make_native_backend(), detail::make_flash_backend()})
      backends.emplace(b->name(), b);
  }
};

Registry& registry() {
  static Registry r;
  return r;
}

thread_local const Backend* scoped_backend = nullptr;

std::string joined_names() {
  std::string names;
  for (const std::string& n : backend_names()) names += (names.empty() ? "" : ", ") + n;
  return names;
}

}  // namespace

void register_backend(std::shared_ptr<const Backend> backend) {
  CPDIT_CHECK(backend != nullptr, invalid_argument, "register_backend: null backend");
  Registry& r = registry();
  std::lock_guard lock(r.mutex);
  const std::string name = backend->name();
  CPDIT_CHECK(r.backends.emplace(name, std::move(backend)).second, invalid_argument,
              "attention backend '", name, "' is already registered; pick another name");
}

const Backend& backend(const std::string& name) {
  Registry& r = registry();
  {
    std::lock_guard lock(r.mutex);
    auto it = r.backends.find(name);
    if (it != r.backends.end()) return *it->second;
  }
  fail(ErrorKind::invalid_argument, "unknown attention backend '", name, "'; available: ",
       joined_names());
}

std::vector<std::string> backend_names() {
  Registry& r = registry();
  std::lock_guard lock(r.mutex);
  std::vector<std::string> names;
  for (const auto& entry : r.backends) names.push_back(entry.first);
  return names;
}

void set_attention_backend(const std::string& name) {
  registry().default_backend.store(&backend(name));
}

ScopedBackend::ScopedBackend(const std::string& name) : previous_(scoped_backend) {
  scoped_backend = &backend(name);
}
ScopedBackend::~ScopedBackend() { scoped_backend = previous_; }

const Backend& current_backend() {
  if (scoped_backend) return *scoped_backend;
  Registry& r = registry();
  const Backend* chosen = r.default_backend.load();
  if (!chosen) {  // first use: the environment names the default
    const char* env = std::getenv("CPDIT_ATTENTION_BACKEND");
    const std::string name = env && *env ? env : "flash";
    try {
      chosen = &backend(name);
    } catch (const Error& e) {
      fail(ErrorKind::invalid_argument, "CPDIT_ATTENTION_BACKEND: ", e.what());
    }
    const Backend* expected = nullptr;
    if (!r.default_backend.compare_exchange_strong(expected, chosen)) chosen = expected;
  }
  return *chosen;
}

namespace {

const char* mode_name(Requirements::Mode mode) {
  switch (mode) {
    case Requirements::Mode::local: return "local attention";
    case Requirements::Mode::ring: return "ring attention";
    case Requirements::Mode::ulysses: return "Ulysses attention";
    case Requirements::Mode::unified: return "unified attention";
  }
  return "?";
}

void refuse_unless(bool supported, const Backend& b, const std::string& feature,
                   const std::string& fix) {
  CPDIT_CHECK(supported, unsupported, "attention backend '", b.name(), "' does not support ",
              feature, "; ", fix);
}

}  // namespace

void check_supports(const Backend& b, const Requirements& needs) {
  const Capabilities c = b.capabilities();
  const std::string others = "choose another backend (available: " + joined_names() + ")";
  switch (needs.mask) {
    case MaskKind::none: break;
    case MaskKind::key_padding: refuse_unless(c.key_padding_mask, b, "key_padding masks", others); break;
    case MaskKind::boolean:
      refuse_unless(c.full_mask, b, "boolean (S_q, S_k) masks", "use backend 'native'");
      break;
    case MaskKind::additive:
      refuse_unless(c.additive_mask, b, "additive masks", "use backend 'native'");
      break;
  }
  switch (needs.rule) {
    case MaskRule::none: break;
    case MaskRule::causal: refuse_unless(c.causal_mask, b, "causal masks", others); break;
    case MaskRule::block_causal: refuse_unless(c.block_causal_mask, b, "block-causal masks", others); break;
  }
  refuse_unless(!needs.lse || c.returns_lse, b, "returning the LSE", others);
  refuse_unless(!needs.backward || c.backward, b, "backward (training)", others);
  refuse_unless(!needs.gqa || c.gqa, b, "grouped-query attention (H_kv < H)", others);
  bool dtype_ok = false;
  for (DType t : c.dtypes) dtype_ok |= t == needs.dtype;
  refuse_unless(dtype_ok, b, std::string(dtype_name(needs.dtype)) + " inputs", others);
  const bool mode_ok = needs.mode == Requirements::Mode::local ||
                       (needs.mode == Requirements::Mode::ring && c.ring) ||
                       (needs.mode == Requirements::Mode::ulysses && c.ulysses) ||
                       (needs.mode == Requirements::Mode::unified && c.unified);
  refuse_unless(mode_ok, b, mode_name(needs.mode), others);
  // Ring and unified merge partial results by LSE.
  const bool merges = needs.mode == Requirements::Mode::ring || needs.mode == Requirements::Mode::unified;
  refuse_unless(!merges || c.returns_lse, b, std::string("returning the LSE, which ") +
                mode_name(needs.mode) + " needs to merge chunks", others);
}

}  // namespace cpdit::attention
