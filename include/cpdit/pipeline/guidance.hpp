#pragma once
// Classifier-free guidance: how a pipeline combines the prediction for the prompt (cond) with the
// one for the negative prompt (uncond), in one place for every pipeline and for CFG-parallel runs
// (which compute the two predictions on two rank groups and combine them here).
//
//   Wan, FLUX.1 true CFG:  v = uncond + scale · (cond − uncond)
//   Qwen-Image true CFG:   the same, then rescaled per token to the conditional prediction's norm,
//                          v · ‖cond‖ / ‖v‖ over the last (channel) dimension.
//
// Both are token-wise over every dimension but the last, so each rank may combine its own shard.
//
// The two predictions, serial or CFG-parallel (predict_cond_uncond): serially (no CFG communicator,
// or one of size 1) this rank's group runs the conditional pass, then the unconditional one. On
// comm::Mesh::cfg() of size 2, CFG group 0 runs only the conditional pass and group 1 only the
// unconditional one, and each rank swaps its prediction with its peer in the other group, which holds
// the same shard. Either way every rank ends with the same (cond, uncond) pair and combines it the
// same way, so CFG-parallel gives the serial result bit for bit, whichever combine a pipeline uses.
#include <cpdit/comm/communicator.hpp>
#include <cpdit/core/tensor.hpp>

#include <functional>

namespace cpdit::pipeline {

struct GuidanceCombine {
  float scale = 1.0f;
  bool rescale_to_cond_norm = false;  // Qwen-Image
};

// f32 arithmetic in diffusers' order: difference, product, sum each rounded once; the norms are
// accumulated in double (PyTorch's own reduction order is not reproduced) and rounded to f32 before
// their quotient. A token whose combined prediction is all zeros stays zero (diffusers divides 0 by
// 0 there). cond and uncond must have the same shape; the result is f32.
Tensor combine_guidance(const Tensor& cond, const Tensor& uncond, const GuidanceCombine& how);

struct GuidancePair {
  Tensor cond, uncond;  // the noise predictions with the prompt and with the negative prompt
};

// `cfg`: this rank's CFG communicator, or null for serial guidance. Collective over `cfg`.
GuidancePair predict_cond_uncond(const std::function<Tensor()>& predict_cond,
                                 const std::function<Tensor()>& predict_uncond, comm::Communicator* cfg);

}  // namespace cpdit::pipeline
