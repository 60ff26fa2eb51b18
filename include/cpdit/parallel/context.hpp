#pragma once
// The context-parallel attention of one rank: a (ring, Ulysses) mesh, a configuration, and the
// attention::Router that `attention::dispatch` sends sharded-KV calls to while it is bound
// (attention::ScopedRouter). Every mode is one composition: Ulysses exchange inside the
// row (contiguous ranks), ring over the column on the head share, inverse exchange. A degree of 1
// turns its stage off, so ring (U = 1), Ulysses (R = 1) and unified (both > 1) share the code.
//
// Calls with replicated keys (KvPlacement::replicated: cross-attention to text) run locally with no
// communication. Inputs are this rank's tokens: q (B, s, H, D), k, v (B, s_k, H_kv, D), key
// mask (B, s_k); lengths may differ between ranks (tensor_split rule, see shard.hpp). The keys may
// be another sequence than the queries, split on its own (LTX-Video's cross-attention to text that
// its plan splits with the video tokens): every stage tracks query and key lengths apart.
#include <cpdit/attention/attention.hpp>
#include <cpdit/comm/mesh.hpp>
#include <cpdit/parallel/config.hpp>
#include <cpdit/parallel/kv_rotation.hpp>

#include <memory>

namespace cpdit::parallel {

class ParallelContext : public attention::Router {
 public:
  // Collective over `world` (builds the mesh). Validates the degrees against the world size.
  ParallelContext(std::shared_ptr<comm::Communicator> world, ContextParallelConfig config);

  const ContextParallelConfig& config() const { return config_; }
  comm::Mesh& mesh() { return mesh_; }
  // Communication cost of this rank since the last stats().reset().
  CommStats& stats() { return stats_; }

  // This rank's part of `full` along `dim` in the configured token layout, and the whole sequence
  // back from every rank's part (collective): how tokens must be split for this context's attention.
  Tensor shard(const Tensor& full, int dim);
  Tensor gather(const Tensor& part, int dim);

  // Setup-time check of a call shape against this configuration and a backend (validate_call).
  void validate(const attention::Backend& backend, const CallShape& call) const;

  attention::Result forward(const attention::Backend& backend, const Tensor& q, const Tensor& k,
                            const Tensor& v, const attention::Options& opts) override;
  attention::Grads backward(const attention::Backend& backend, const Tensor& dout, const Tensor& q,
                            const Tensor& k, const Tensor& v, const attention::Result& fwd,
                            const attention::Options& opts) override;

 private:
  ContextParallelConfig config_;
  comm::Mesh mesh_;
  CommStats stats_;
};

// The context bound on this thread: nn::Model binds its own beside the attention router for its forward,
// so the layers that split work other than attention (the VAEs' rows and frames, shared_linear) find
// their rank group. Nests; nullptr unbinds (a part of a forward that runs unsplit).
class ScopedContext {
 public:
  explicit ScopedContext(ParallelContext* context);
  ~ScopedContext();
  ScopedContext(const ScopedContext&) = delete;
  ScopedContext& operator=(const ScopedContext&) = delete;

 private:
  ParallelContext* previous_;
};

ParallelContext* current_context();  // nullptr when none is bound on this thread

}  // namespace cpdit::parallel
