#pragma once
// The attention layers of the DiT families, named as diffusers names them (to_q, to_k, to_v, norm_q,
// norm_k, to_out.0; for joint attention also add_{q,k,v}_proj, norm_added_{q,k}, to_add_out). Each calls
// attention::dispatch and says where its keys live: keys from the tokens being split across ranks
// are sharded (ring / Ulysses route them), keys from text every rank holds whole are replicated
// (attended locally). Activations (B, S, D) f32.
#include <cpdit/attention/attention.hpp>
#include <cpdit/models/common/qk_norm.hpp>
#include <cpdit/models/common/rope.hpp>
#include <cpdit/nn/layers.hpp>
#include <optional>


namespace cpdit::models::common {

struct AttentionShape {
  int64_t dim;  // width of the tokens in and out, and of the text a cross-attention attends to
  int64_t heads;
  int64_t head_dim;
  QkNorm qk_norm;
  float eps;                      // of the q/k RMSNorm
  bool output_projection = true;  // to_out.0; false for FLUX.1's single blocks (pre_only)
  // Where cross-attention's text keys live under the family's plan: whole on every rank (Wan: the
  // plan splits only the video tokens), or split with the tokens (LTX-Video's plan splits the text
  // too, so a rank holds a share of the keys, of another length than its queries).
  attention::KvPlacement text_keys = attention::KvPlacement::replicated;
  // Wan's image-to-video cross-attention: a second set of keys and values from the image tokens
  // (add_k_proj, add_v_proj, norm_added_k), attended with the same queries.
  bool image_keys = false;
};

// One stream's query, key and value projections with their q/k norms (named by the module that
// holds them: to_q / norm_q for the tokens, add_q_proj / norm_added_q for FLUX.1's and Qwen-Image's text).
struct StreamProjections {
  nn::Linear& q;
  nn::Linear& k;
  nn::Linear& v;
  nn::RMSNorm& norm_q;
  nn::RMSNorm& norm_k;
};

// Self-attention (RoPE when tables are given, sharded keys) when encoder_hidden_states is undefined;
// cross-attention to encoder_hidden_states (no RoPE, keys placed as shape.text_keys) otherwise.
// text_keep (B, L) bool, when given, hides the padded text keys of cross-attention (true = attend);
// it is the share of the mask that belongs to this rank's keys; the hidden keys after the last kept
// one are left out before the key/value projections. `self_mask` is handed to
// attention::dispatch for self-attention as is: a position rule on global token positions
// (block-causal video frames), never S x S. encoder_hidden_states_image (B, L_img, dim), for a layer
// built with shape.image_keys, is attended on its own (keys whole on every rank, unmasked) and its
// output added to the text's before to_out, as diffusers' WanAttnProcessor does. Returns (B, S, dim),
// or (B, S, heads·head_dim) without an output projection.
class Attention : public nn::Module {
 public:
  explicit Attention(const AttentionShape& shape);
  Tensor forward(const Tensor& hidden_states, const Tensor& encoder_hidden_states, const Tensor& cos,
                 const Tensor& sin, const Tensor& text_keep = {}, const attention::Mask& self_mask = {},
                 const Tensor& encoder_hidden_states_image = {}) const;
  // residual + forward(...) · gate as a new tensor (gate undefined: residual + forward(...)), the
  // block's residual branch: to_out.0's product runs without its bias, and bias, gate and residual
  // finish in one pass over it (projected_residual). With a hook on this module it runs as forward.
  Tensor forward_residual(const Tensor& residual, const Tensor& gate, const Tensor& hidden_states,
                          const Tensor& encoder_hidden_states, const Tensor& cos, const Tensor& sin,
                          const Tensor& text_keep = {}, const Tensor& encoder_hidden_states_image = {}) const;

 private:
  // The attention's heads joined, (B, S, heads·head_dim), before the output projection.
  Tensor attend(const nn::TensorMap& in, const attention::Mask& self_mask) const;
  // The image tokens' keys and values: (add_k_proj, norm_added_k) and add_v_proj.
  struct ImageKeys {
    nn::Linear& k;
    nn::Linear& v;
    nn::RMSNorm& norm_k;
  };

  AttentionShape shape_;
  StreamProjections projections_;
  std::optional<ImageKeys> image_;
  nn::Linear* to_out_ = nullptr;
};

// Joint attention over [text; image] (FLUX.1 double blocks, Qwen-Image): each stream has its own
// projections and q/k norms, one attention runs over both (text first,
// keys sharded), and each stream's output goes through its own projection. forward returns
// (image output, text output). text_keep (B, L) bool, when given, hides the padded text keys (true =
// attend; every image key is kept); under context parallelism it is this rank's share of the text,
// so the key mask follows the keys it belongs to.
class JointAttention : public nn::Module {
 public:
  explicit JointAttention(const AttentionShape& shape);
  std::vector<Tensor> forward(const Tensor& hidden_states, const Tensor& encoder_hidden_states, const Tensor& cos,
                              const Tensor& sin, const Tensor& text_keep = {}) const;
  // (residual + image output · gate, context_residual + text output · context_gate) as new tensors,
  // the block's two residual branches: each output projection runs without its bias, and bias, gate
  // and residual finish in one pass over its product (projected_residual). With a hook on this module
  // it runs as forward.
  std::vector<Tensor> forward_residual(const Tensor& residual, const Tensor& gate, const Tensor& context_residual,
                                       const Tensor& context_gate, const Tensor& hidden_states,
                                       const Tensor& encoder_hidden_states, const Tensor& cos, const Tensor& sin,
                                       const Tensor& text_keep = {}) const;

 private:
  // The heads of both streams joined, (B, L_text + S, heads·head_dim), before the output projections:
  // each stream's q, k and v are written straight into its rows of the joint buffers.
  Tensor attend(const nn::TensorMap& in) const;

  AttentionShape shape_;
  StreamProjections image_;  // to_q, to_k, to_v, norm_q, norm_k
  StreamProjections text_;   // add_q_proj, add_k_proj, add_v_proj, norm_added_q, norm_added_k
  nn::Linear& to_out_;
  nn::Linear& to_add_out_;
};

}  // namespace cpdit::models::common
