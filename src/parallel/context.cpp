// The router: Ulysses exchange in the row, ring over the column, inverse exchange.
#include <cpdit/parallel/context.hpp>

#include "parallel/ring.hpp"
#include "parallel/ulysses.hpp"

#include <cpdit/parallel/shard.hpp>

#include <cpdit/core/error.hpp>

#include <vector>

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
  return {q.size(2), k.size(2), mask.kind, q.dtype(), backward, mask.rule};
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

// The mask for the tokens this rank holds after the Ulysses exchange: the row's gathered key mask
// and the position rule as the model states it (the ring sets its offsets per call).
Mask exchanged_mask(const UlyssesExchange& exchange, const Mask& mask) {
  Mask m = mask;
  if (mask.kind == MaskKind::key_padding) m.tensor = exchange.gather_key_mask(mask.tensor);
  return m;
}

// Where, for a position rule, the queries of this rank's Ulysses row and the keys of every row sit
// in the global sequence (what a row holds after the exchange: its ranks' tokens in rank order).
// Every rank's lengths are gathered on every call with a rule, on every rank alike. Contiguous
// shards may have any lengths; zigzag ones must be what the layout gives, since tokens split
// another way would put the rule on wrong positions.
RingPositions rule_positions(comm::Mesh& mesh, TokenLayout layout, const Mask& mask, int64_t q_len, int64_t k_len,
                             CommStats& stats) {
  if (!mask.has_rule()) return {};
  comm::Communicator& flat = mesh.flat();
  const int64_t mine[2] = {q_len, k_len};
  std::vector<int64_t> all(2 * size_t(flat.size()));
  flat.all_gather(mine, sizeof mine, all.data());
  stats.bytes_sent += int64_t(sizeof mine) * (flat.size() - 1);
  const int R = mesh.ring_degree(), U = mesh.ulysses_degree();
  auto length = [&](int rank, int which) { return all[2 * size_t(rank) + size_t(which)]; };
  // Row r's ranges of the queries (which = 0) or keys (1).
  auto row = [&](int r, int which) {
    int64_t before = 0, n = 0, held = 0;
    for (int g = 0; g < flat.size(); ++g) {
      n += length(g, which);
      if (g < r * U) before += length(g, which);
      if (g / U == r) held += length(g, which);
    }
    if (layout == TokenLayout::contiguous) return std::vector<TokenRange>{{before, held}};
    for (int g = 0; g < flat.size(); ++g) {
      const int64_t expected = total_length(rank_ranges(n, R, U, g, layout));
      CPDIT_CHECK(length(g, which) == expected, invalid_argument, "context parallel attention: rank ", g, " holds ",
                  length(g, which), which == 0 ? " queries" : " keys", " but the ", token_layout_name(layout),
                  " layout of ", n, " tokens over ", R, " x ", U, " ranks gives it ", expected,
                  "; split the tokens with parallel::shard in that layout");
    }
    return row_ranges(n, R, U, r, layout);
  };
  RingPositions positions;
  positions.queries = row(mesh.ring_rank(), 0);
  for (int r = 0; r < R; ++r) positions.keys.push_back(row(r, 1));
  return positions;
}

// Under context parallelism a rule needs the global positions of its keys: sharded keys have them,
// replicated keys (cross-attention) are the whole sequence on every rank while the queries are not.
void refuse_replicated_rule(const Mask& mask) {
  CPDIT_CHECK(!mask.has_rule(), unsupported, "context parallel attention: a ", attention::mask_rule_name(mask.rule),
              " mask needs sharded keys, but this call's keys are replicated (KvPlacement::replicated); "
              "use KvPlacement::sharded for self-attention");
}

// What a call on sharded keys sets up before its ring runs, the forward's and the backward's alike:
// the Ulysses exchange of the call's shapes, the ring, the mask as the exchanged heads see it, and the
// global positions a rule is evaluated at.
struct ShardedCall {
  ShardedCall(comm::Mesh& mesh, const ContextParallelConfig& config, CommStats& stats,
              const attention::Backend& backend, const Tensor& q, const Tensor& k, const Mask& given, float scale)
      : exchange(mesh.ulysses(), q.size(2), k.size(2), q.size(1), k.size(1), stats),
        ring{backend, mesh.ring(), config.rotate_method, config.convert_to_fp32, scale, stats},
        mask(exchanged_mask(exchange, given)),
        positions(rule_positions(mesh, config.token_layout, given, q.size(1), k.size(1), stats)) {}
  UlyssesExchange exchange;
  const RingSetup ring;
  const Mask mask;
  const RingPositions positions;
};

}  // namespace

ParallelContext::ParallelContext(std::shared_ptr<comm::Communicator> world,
                                 ContextParallelConfig config)
    : config_(config),
      mesh_(checked(std::move(world), config), config.ring_degree, config.ulysses_degree) {}

Tensor ParallelContext::shard(const Tensor& full, int dim) {
  return parallel::shard(full, dim, mesh_, config_.token_layout);
}

Tensor ParallelContext::gather(const Tensor& part, int dim) {
  return parallel::gather(part, dim, mesh_, config_.token_layout);
}

void ParallelContext::validate(const attention::Backend& backend, const CallShape& call) const {
  validate_call(config_, backend, call);
}

attention::Result ParallelContext::forward(const attention::Backend& backend, const Tensor& q,
                                           const Tensor& k, const Tensor& v,
                                           const attention::Options& opts) {
  const float scale = attention::resolve_scale(opts, q.size(3));
  if (config_.mode() == Mode::local) return backend.forward(q, k, v, opts.mask, scale);
  if (opts.kv == attention::KvPlacement::replicated) {
    refuse_replicated_rule(opts.mask);
    return backend.forward(q, k, v, opts.mask, scale);
  }
  validate(backend, local_call(q, k, v, opts.mask, false));
  const ShardedCall call(mesh_, config_, stats_, backend, q, k, opts.mask, scale);
  const Tensor kh = call.exchange.keys_to_heads(k), vh = call.exchange.keys_to_heads(v);
  const ExchangedKv held(stats_, kh, vh, k);
  const attention::Result part =
      ring_forward(call.ring, call.exchange.queries_to_heads(q), kh, vh, call.mask, call.positions);
  // The output is cast to the model dtype once, before the (value-preserving) inverse exchange.
  return {call.exchange.queries_to_tokens(part.out.to(q.dtype())), call.exchange.lse_to_tokens(part.lse)};
}

attention::Grads ParallelContext::backward(const attention::Backend& backend, const Tensor& dout,
                                           const Tensor& q, const Tensor& k, const Tensor& v,
                                           const attention::Result& fwd,
                                           const attention::Options& opts) {
  const float scale = attention::resolve_scale(opts, q.size(3));
  if (config_.mode() == Mode::local)
    return backend.backward(dout, q, k, v, fwd.out, fwd.lse, opts.mask, scale);
  if (opts.kv == attention::KvPlacement::replicated) {
    refuse_replicated_rule(opts.mask);
    return backend.backward(dout, q, k, v, fwd.out, fwd.lse, opts.mask, scale);
  }
  validate(backend, local_call(q, k, v, opts.mask, true));
  const ShardedCall call(mesh_, config_, stats_, backend, q, k, opts.mask, scale);
  const UlyssesExchange& exchange = call.exchange;
  // The router keeps no state between calls, so the forward's head-split tensors are exchanged
  // again here (q, k, v, out, lse as well as dout).
  const attention::Grads part = ring_backward(
      call.ring, exchange.queries_to_heads(dout), exchange.queries_to_heads(q), exchange.keys_to_heads(k),
      exchange.keys_to_heads(v), exchange.queries_to_heads(fwd.out), exchange.lse_to_heads(fwd.lse), call.mask,
      call.positions);
  return {exchange.queries_to_tokens(part.dq), exchange.keys_to_tokens(part.dk), exchange.keys_to_tokens(part.dv)};
}

}  // namespace cpdit::parallel
