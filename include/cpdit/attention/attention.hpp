#pragma once
// Attention: the backend contract, the backend registry, and the model-facing dispatcher.
//
// Layouts: q, out (B, S_q, H, D); k, v (B, S_k, H_kv, D), row-major,
// H % H_kv == 0 (grouped-query attention). LSE is float32 (B, H, S_q), natural log of the softmax
// denominator over the keys the call saw. A query row whose keys are all masked has out = 0 and
// lse = -inf (never NaN), and zero gradients in backward.
//
// Backends keep no hidden state between calls, so ring attention can call forward once per KV chunk
// and merge by LSE, and call backward once per KV chunk with the GLOBAL out and lse.
#include <cpdit/core/dtype.hpp>
#include <cpdit/core/tensor.hpp>

#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace cpdit::attention {

enum class MaskKind {
  none,
  key_padding,  // bool (B, S_k), true = attend
  boolean,      // bool (B|1, H|1, S_q, S_k), true = attend
  additive,     // f32, same shape as boolean, 0 / -inf (any finite bias is also honoured)
};
const char* mask_kind_name(MaskKind kind);

// A rule on global token positions, evaluated where the scores are computed, so no S x S tensor
// ever exists (and a rank of a context-parallel group never needs one):
//   causal        query i sees key j iff j <= i
//   block_causal  query i sees key j iff j / block <= i / block, with `block` tokens per block. For
//                 video laid out frame-major (SkyReels-V2 diffusion forcing), block =
//                 num_frame_per_block * tokens per frame, so a frame block sees itself and the past.
// Causal is block-causal with blocks of one token; both reduce to "j <= last_visible_key(i)".
enum class MaskRule { none, causal, block_causal };
const char* mask_rule_name(MaskRule rule);

struct Mask {
  MaskKind kind = MaskKind::none;
  Tensor tensor;
  // The position rule (none, or combined with kind none or key_padding). Query row r of the call is
  // global token q_offset + r and key column c is global token k_offset + c: a backend called on one
  // KV chunk (ring attention) knows which global (i, j) every score is. Models leave the offsets 0;
  // the context-parallel router sets them from the shard layout.
  MaskRule rule = MaskRule::none;
  int64_t block = 1;  // tokens per block; 1 for causal
  int64_t q_offset = 0, k_offset = 0;

  static Mask none() { return {}; }
  static Mask key_padding(Tensor keep) { return {MaskKind::key_padding, std::move(keep)}; }
  static Mask boolean(Tensor keep) { return {MaskKind::boolean, std::move(keep)}; }
  static Mask additive(Tensor bias) { return {MaskKind::additive, std::move(bias)}; }
  static Mask causal();
  static Mask block_causal(int64_t tokens_per_block);  // tokens_per_block >= 1
  // This rule together with a key-padding mask bool (B, S_k): a key is seen iff both allow it.
  Mask with_key_padding(Tensor keep) const;

  bool has_rule() const { return rule != MaskRule::none; }
  // The last global key position global query i may see (rule != none): the end of i's block.
  int64_t last_visible_key(int64_t i) const { return (i / block + 1) * block - 1; }
  // Whether query row r of this call may see key column c under the rule (key padding aside).
  bool rule_allows(int64_t r, int64_t c) const {
    return !has_rule() || k_offset + c <= last_visible_key(q_offset + r);
  }
  // Whether the rule hides every key of the call from every one of its `rows` >= 1 query rows.
  bool rule_hides_all(int64_t rows) const {
    return has_rule() && k_offset > last_visible_key(q_offset + rows - 1);
  }
};

struct Capabilities {
  bool returns_lse = false;
  bool backward = false;
  bool key_padding_mask = false;
  bool full_mask = false;      // MaskKind::boolean
  bool additive_mask = false;  // MaskKind::additive
  bool causal_mask = false;        // MaskRule::causal
  bool block_causal_mask = false;  // MaskRule::block_causal
  bool gqa = false;
  bool ring = false;  // context-parallel modes the backend can serve
  bool ulysses = false;
  bool unified = false;
  std::vector<DType> dtypes;  // input dtypes accepted (computation is f32)
};

struct Result {
  Tensor out;  // (B, S_q, H, D), dtype of q
  Tensor lse;  // f32 (B, H, S_q), natural log; -inf for fully masked rows (out = 0 there)
};

struct Grads {
  Tensor dq, dk, dv;  // f32, shapes of q, k, v
};

class Backend {
 public:
  virtual ~Backend();
  virtual std::string name() const = 0;
  virtual Capabilities capabilities() const = 0;
  // q (B,S_q,H,D); k,v (B,S_k,H_kv,D), H % H_kv == 0 (GQA). scale > 0. Re-entrant per KV chunk.
  virtual Result forward(const Tensor& q, const Tensor& k, const Tensor& v, const Mask& mask,
                         float scale) const = 0;
  // out/lse are the GLOBAL (fully merged) ones: P = exp(scale q.k - lse), Dv = rowsum(dout*out),
  // dS = P*(dP - Dv). Exact per KV chunk.
  virtual Grads backward(const Tensor& dout, const Tensor& q, const Tensor& k, const Tensor& v,
                         const Tensor& out, const Tensor& lse, const Mask& mask, float scale) const = 0;
};

// ---- Registry -------------------------------------------------------------------------------------
void register_backend(std::shared_ptr<const Backend> backend);  // names must be unique
const Backend& backend(const std::string& name);  // unknown -> Error listing the available names
std::vector<std::string> backend_names();

// Process-wide default. CPDIT_ATTENTION_BACKEND in the environment sets the initial default
// ("flash" otherwise). Unknown names are refused.
void set_attention_backend(const std::string& name);

// Thread-local override (ranks are threads); nests.
class ScopedBackend {
 public:
  explicit ScopedBackend(const std::string& name);
  ~ScopedBackend();
  ScopedBackend(const ScopedBackend&) = delete;
  ScopedBackend& operator=(const ScopedBackend&) = delete;

 private:
  const Backend* previous_;
};

const Backend& current_backend();  // the scoped override, else the process-wide default

// ---- Capability checks ----------------------------------------------------------------------------
struct Requirements {
  MaskKind mask = MaskKind::none;
  MaskRule rule = MaskRule::none;
  bool lse = false;
  bool backward = false;
  bool gqa = false;
  DType dtype = DType::f32;
  enum class Mode { local, ring, ulysses, unified } mode = Mode::local;
};
// Throws Error(unsupported) naming the backend, the feature and the fix.
void check_supports(const Backend& backend, const Requirements& needs);

// ---- Dispatcher -----------------------------------------------------------------------------------
// kv says whether keys/values are sharded across context-parallel ranks (self-attention) or
// replicated on every rank (cross-attention to text).
enum class KvPlacement { sharded, replicated };

struct Options {
  Mask mask;
  std::optional<float> scale;  // unset: 1/sqrt(D); a value given is checked (positive, finite), never replaced
  KvPlacement kv = KvPlacement::sharded;
};

float resolve_scale(const Options& opts, int64_t head_dim);  // opts.scale, else 1/sqrt(head_dim)

// Runs attention on the current backend; sharded calls go to the router bound on this thread, if any.
// The capability check runs on the first call of a (backend, requirements, shape) and is cached.
Result dispatch(const Tensor& q, const Tensor& k, const Tensor& v, const Options& opts = {});
Grads dispatch_backward(const Tensor& dout, const Tensor& q, const Tensor& k, const Tensor& v,
                        const Result& fwd, const Options& opts = {});

// Context parallelism plugs in here (the parallel layer implements it; attention does not depend on
// parallel).
class Router {
 public:
  virtual ~Router();
  virtual Result forward(const Backend& backend, const Tensor& q, const Tensor& k, const Tensor& v,
                         const Options& opts) = 0;
  virtual Grads backward(const Backend& backend, const Tensor& dout, const Tensor& q,
                         const Tensor& k, const Tensor& v, const Result& fwd,
                         const Options& opts) = 0;
};

// Thread-local binding: dispatch sends sharded calls to the bound router, and runs replicated-KV calls
// and unbound calls locally on the current backend. Nests; nullptr unbinds.
class ScopedRouter {
 public:
  explicit ScopedRouter(Router* router);
  ~ScopedRouter();
  ScopedRouter(const ScopedRouter&) = delete;
  ScopedRouter& operator=(const ScopedRouter&) = delete;

 private:
  Router* previous_;
};

Router* current_router();  // nullptr when none is bound on this thread

}  // namespace cpdit::attention
