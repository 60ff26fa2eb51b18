// The model-facing entry point: picks the backend, checks it once per (backend, requirements,
// shapes), and sends sharded-KV calls to the context-parallel router bound on this thread.
#include "attention/detail.hpp"

#include <cmath>

namespace cpdit::attention {

Router::~Router() = default;

namespace {

thread_local Router* bound_router = nullptr;

// The last call shape this thread validated; a repeat costs a few comparisons.
struct Validated {
  const Backend* backend = nullptr;
  bool backward = false;
  MaskKind mask = MaskKind::none;
  MaskRule rule = MaskRule::none;
  DType dtype = DType::f32;
  Shape q, k, mask_shape;

  bool operator==(const Validated&) const = default;
};
thread_local Validated last_validated;

void check_once(const Backend& b, const Tensor& q, const Tensor& k, const Options& opts,
                bool backward) {
  Validated now{&b, backward, opts.mask.kind, opts.mask.rule, q.dtype(), q.shape(), k.shape(),
                opts.mask.tensor.defined() ? opts.mask.tensor.shape() : Shape{}};
  if (now == last_validated) return;
  Requirements needs;
  needs.mask = opts.mask.kind;
  needs.rule = opts.mask.rule;
  needs.backward = backward;
  needs.gqa = q.dim() == 4 && k.dim() == 4 && k.size(2) != q.size(2);
  needs.dtype = q.dtype();
  check_supports(b, needs);
  last_validated = now;
}

bool routed(const Options& opts) { return bound_router && opts.kv == KvPlacement::sharded; }

}  // namespace

// A non-positive head dim (a malformed q) gets scale 1 here; the backend then refuses the shape
// with a message naming the tensor.
float resolve_scale(const Options& opts, int64_t head_dim) {
  if (opts.scale) return *opts.scale;
  return head_dim > 0 ? float(1.0 / std::sqrt(double(head_dim))) : 1.0f;
}

// Routed calls are checked by the router, which knows the mode (ring / Ulysses / unified).
Result dispatch(const Tensor& q, const Tensor& k, const Tensor& v, const Options& opts) {
  const Backend& b = current_backend();
  if (routed(opts)) return bound_router->forward(b, q, k, v, opts);
  check_once(b, q, k, opts, false);
  return b.forward(q, k, v, opts.mask, resolve_scale(opts, q.dim() == 4 ? q.size(3) : 0));
}

Grads dispatch_backward(const Tensor& dout, const Tensor& q, const Tensor& k, const Tensor& v,
                        const Result& fwd, const Options& opts) {
  const Backend& b = current_backend();
  if (routed(opts)) return bound_router->backward(b, dout, q, k, v, fwd, opts);
  check_once(b, q, k, opts, true);
  return b.backward(dout, q, k, v, fwd.out, fwd.lse, opts.mask,
                    resolve_scale(opts, q.dim() == 4 ? q.size(3) : 0));
}

ScopedRouter::ScopedRouter(Router* router) : previous_(bound_router) { bound_router = router; }
ScopedRouter::~ScopedRouter() { bound_router = previous_; }

Router* current_router() { return bound_router; }

}  // namespace cpdit::attention
