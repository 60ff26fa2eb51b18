// The router: Ulysses exchange in the row, ring over the column, inverse exchange (spec §7).
#include <cpdit/parallel/context.hpp>

#include "parallel/ring.hpp"
#include "parallel/ulysses.hpp"

#include <cpdit/core/error.hpp>

namespace cpdit::parallel {
namespace {

using attention::Mask;
using attention::MaskKind;
using Mode = attention::Requirements::Mode;

std::shared_ptr<comm::Communicator> checked(std::shared_ptr<comm::Communicator> world,
                                            const ContextParallelConfig& config) {
  CPDIT_CHECK(world, invalid_argument, "context parallel: no communicator given");
  validate_degrees(config, world->size());
  return world;
}

// The layout checks the chunk kernels cannot make: they only ever see a part of the sequence.
CallShape local_call(const Tensor& q, const Tensor& k, const Tensor& v, const Mask& mask,
                     bool backward) {
  CPDIT_CHECK(q.dim() == 4 && k.dim() == 4 && k.shape() == v.shape() && k.size(0) == q.size(0) &&
                  k.size(3) == q.size(3),
              invalid_argument, "context parallel attention: expected q (B, s, H, D) and k, v (B, s_k, "
              "H_kv, D) of one batch and head dim, got q ", q.describe(), " k ", k.describe(), " v ",
              v.describe());
  const Shape mask_shape{k.size(0), k.size(1)};
  if (mask.kind == MaskKind::key_padding)
    CPDIT_CHECK(mask.tensor.defined() && mask.tensor.dtype() == DType::boolean &&
                    mask.tensor.shape() == mask_shape,
                invalid_argument, "context parallel attention: the key mask must be this rank's "
                "part, bool (B, s_k) = ", shape_string(mask_shape), ", got ",
                mask.tensor.defined() ? mask.tensor.describe() : "none");
  return {q.size(2), k.size(2), mask.kind, q.dtype(), backward};
}

// Counts the Ulysses-exchanged k, v (when they are new tensors) in the KV working set while the
// ring runs on them.
class ExchangedKv {
 public:
  ExchangedKv(CommStats& stats, const Tensor& kh, const Tensor& vh, const Tensor& k) : stats_(stats) {
    stats_.kv_bytes_held = kh.same_storage(k) ? 0 : int64_t(kh.nbytes() + vh.nbytes());
    stats_.hold_kv(0);
  }
  ~ExchangedKv() { stats_.kv_bytes_held = 0; }
  ExchangedKv(const ExchangedKv&) = delete;
  ExchangedKv& operator=(const ExchangedKv&) = delete;

 private:
  CommStats& stats_;
};

Mask gathered_mask(const UlyssesExchange& exchange, const Mask& mask) {
  if (mask.kind != MaskKind::key_padding) return mask;
  return Mask::key_padding(exchange.gather_key_mask(mask.tensor));
}

}  // namespace

ParallelContext::ParallelContext(std::shared_ptr<comm::Communicator> world,
                                 ContextParallelConfig config)
    : config_(config),
      mesh_(checked(std::move(world), config), config.ring_degree, config.ulysses_degree) {}

void ParallelContext::validate(const attention::Backend& backend, const CallShape& call) const {
  validate_call(config_, backend, call);
}

attention::Result ParallelContext::forward(const attention::Backend& backend, const Tensor& q,
                                           const Tensor& k, const Tensor& v,
                                           const attention::Options& opts) {
  const float scale = attention::resolve_scale(opts, q.size(3));
  if (opts.kv == attention::KvPlacement::replicated || config_.mode() == Mode::local)
    return backend.forward(q, k, v, opts.mask, scale);
  validate(backend, local_call(q, k, v, opts.mask, false));
  UlyssesExchange exchange(mesh_.ulysses(), q.size(2), k.size(2), q.size(1), k.size(1), stats_);
  const RingSetup ring{backend, mesh_.ring(), config_.rotate_method, config_.convert_to_fp32, scale,
                       stats_};
  const Tensor kh = exchange.keys_to_heads(k), vh = exchange.keys_to_heads(v);
  const ExchangedKv held(stats_, kh, vh, k);
  const attention::Result part =
      ring_forward(ring, exchange.queries_to_heads(q), kh, vh, gathered_mask(exchange, opts.mask));
  // The output is cast to the model dtype once, before the (value-preserving) inverse exchange.
  return {exchange.queries_to_tokens(part.out.to(q.dtype())), exchange.lse_to_tokens(part.lse)};
}

attention::Grads ParallelContext::backward(const attention::Backend& backend, const Tensor& dout,
                                           const Tensor& q, const Tensor& k, const Tensor& v,
                                           const attention::Result& fwd,
                                           const attention::Options& opts) {
  const float scale = attention::resolve_scale(opts, q.size(3));
  if (opts.kv == attention::KvPlacement::replicated || config_.mode() == Mode::local)
    return backend.backward(dout, q, k, v, fwd.out, fwd.lse, opts.mask, scale);
  validate(backend, local_call(q, k, v, opts.mask, true));
  UlyssesExchange exchange(mesh_.ulysses(), q.size(2), k.size(2), q.size(1), k.size(1), stats_);
  const RingSetup ring{backend, mesh_.ring(), config_.rotate_method, config_.convert_to_fp32, scale,
                       stats_};
  // The router keeps no state between calls, so the forward's head-split tensors are exchanged
  // again here (q, k, v, out, lse as well as dout).
  const attention::Grads part = ring_backward(
      ring, exchange.queries_to_heads(dout), exchange.queries_to_heads(q), exchange.keys_to_heads(k),
      exchange.keys_to_heads(v), exchange.queries_to_heads(fwd.out), exchange.lse_to_heads(fwd.lse),
      gathered_mask(exchange, opts.mask));
  return {exchange.queries_to_tokens(part.dq), exchange.keys_to_tokens(part.dk),
          exchange.keys_to_tokens(part.dv)};
}

}  // namespace cpdit::parallel
