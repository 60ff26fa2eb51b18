#include <cpdit/attention/attention.hpp>
#include <cpdit/core/error.hpp>
#include <cpdit/kernels/cpu.hpp>
#include <cpdit/models/common/adaptive_norm.hpp>
#include <cpdit/models/common/attention.hpp>
#include <cpdit/nn/text_kv_cache.hpp>

#include <tuple>

namespace cpdit::models::common {

namespace {

int64_t inner(const AttentionShape& s) { return s.heads * s.head_dim; }
int64_t norm_width(const AttentionShape& s) { return qk_norm_width(s.qk_norm, s.heads, s.head_dim); }

struct Qkv {
  Tensor q, k, v;  // (B, S, H, Dh)
};

// k and v from `source`, k rotated by `rope` when given.
std::pair<Tensor, Tensor> project_kv(const StreamProjections& p, const AttentionShape& shape, const Tensor& source,
                                     const RopeTables* rope = nullptr) {
  return {project_heads(p.k, &p.norm_k, shape.qk_norm, shape.heads, source, rope),
          project_heads(p.v, nullptr, shape.qk_norm, shape.heads, source)};
}

// q from the tokens x, k and v from `source` (x itself for self-attention); q and k rotated by `rope`
// when given.
Qkv project(const StreamProjections& p, const AttentionShape& shape, const Tensor& x, const Tensor& source,
            const RopeTables* rope = nullptr) {
  Tensor q = project_heads(p.q, &p.norm_q, shape.qk_norm, shape.heads, x, rope);
  auto [k, v] = project_kv(p, shape, source, rope);
  return {q, k, v};
}

// softmax(q kᵀ / √Dh) v over the heads, back to (B, S, H·Dh).
Tensor attend_heads(const Qkv& qkv, attention::KvPlacement kv, attention::Mask mask = {}) {
  attention::Options options;
  options.kv = kv;
  options.mask = std::move(mask);
  Tensor o = attention::dispatch(qkv.q, qkv.k, qkv.v, options).out;
  return o.reshape({o.size(0), o.size(1), o.size(2) * o.size(3)});
}

// The text keys up to the last one `keep` (bool (B, L)) keeps in any batch, at least one. The padding
// after it is hidden from every query, so attending without it changes no output (a hidden score
// weighs exactly 0) and saves its key and value projections and its scores. Under context
// parallelism `keep` is this rank's share, so only keys hidden on this rank are left out; a share
// that is all padding keeps one hidden key, as an empty chunk would be a special case everywhere.
int64_t kept_text_length(const Tensor& keep) {
  const Tensor k = keep.contiguous();
  const bool* kept = k.data<bool>();
  const int64_t batch = k.size(0), length = k.size(1);
  int64_t n = 1;
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t j = length - 1; j >= n; --j)
      if (kept[b * length + j]) {
        n = j + 1;
        break;
      }
  return n;
}

// Rows [first, first + count) of every batch of `joint` (B, L, C), filled by `fill` with a contiguous
// (B, count, C) tensor: the view itself when one batch makes it contiguous, else a copy written back.
template <class Fill>
void write_rows(const Tensor& joint, int64_t first, int64_t count, const Fill& fill) {
  Tensor rows = joint.narrow(1, first, count);
  if (rows.is_contiguous()) return fill(rows);
  Tensor own = Tensor::empty(rows.shape());
  fill(own);
  rows.copy_(own);
}

// The arguments of both attention layers by name, as their hooks see them.
nn::TensorMap attention_inputs(const Tensor& hidden_states, const Tensor& encoder_hidden_states, const Tensor& cos,
                               const Tensor& sin, const Tensor& text_keep) {
  return {{"hidden_states", hidden_states}, {"encoder_hidden_states", encoder_hidden_states}, {"cos", cos},
          {"sin", sin}, {"text_keep", text_keep}};
}

}  // namespace

Attention::Attention(const AttentionShape& shape)
    : shape_(shape),
      projections_{add_module<nn::Linear>("to_q", shape.dim, inner(shape)),
                   add_module<nn::Linear>("to_k", shape.dim, inner(shape)),
                   add_module<nn::Linear>("to_v", shape.dim, inner(shape)),
                   add_module<nn::RMSNorm>("norm_q", norm_width(shape), shape.eps),
                   add_module<nn::RMSNorm>("norm_k", norm_width(shape), shape.eps)},
      to_out_(shape.output_projection
                  ? &add_module<nn::Container>("to_out").add_module<nn::Linear>("0", inner(shape), shape.dim)
                  : nullptr) {
  if (shape.image_keys)
    image_.emplace(ImageKeys{add_module<nn::Linear>("add_k_proj", shape.dim, inner(shape)),
                             add_module<nn::Linear>("add_v_proj", shape.dim, inner(shape)),
                             add_module<nn::RMSNorm>("norm_added_k", norm_width(shape), shape.eps)});
}

Tensor Attention::forward(const Tensor& hidden_states, const Tensor& encoder_hidden_states, const Tensor& cos,
                          const Tensor& sin, const Tensor& text_keep, const attention::Mask& self_mask,
                          const Tensor& encoder_hidden_states_image) const {
  nn::TensorMap args = attention_inputs(hidden_states, encoder_hidden_states, cos, sin, text_keep);
  args["encoder_hidden_states_image"] = encoder_hidden_states_image;
  return with_hooks(std::move(args), [&](const nn::TensorMap& in) {
    const Tensor o = attend(in, self_mask);
    return std::vector<Tensor>{to_out_ ? to_out_->forward(o) : o};
  })[0];
}

Tensor Attention::forward_residual(const Tensor& residual, const Tensor& gate, const Tensor& hidden_states,
                                   const Tensor& encoder_hidden_states, const Tensor& cos, const Tensor& sin,
                                   const Tensor& text_keep, const Tensor& encoder_hidden_states_image) const {
  if (has_hooks() || !to_out_) {  // the hooks must see this module's own output
    return gated_residual(
        residual, forward(hidden_states, encoder_hidden_states, cos, sin, text_keep, {}, encoder_hidden_states_image),
        gate);
  }
  nn::TensorMap args = attention_inputs(hidden_states, encoder_hidden_states, cos, sin, text_keep);
  args["encoder_hidden_states_image"] = encoder_hidden_states_image;
  const Tensor o = attend(args, {});
  return projected_residual(residual, *to_out_, {o}, gate);
}

Tensor Attention::attend(const nn::TensorMap& in, const attention::Mask& self_mask) const {
  const Tensor& x = in.at("hidden_states");
  Tensor text = in.at("encoder_hidden_states");
  const bool cross = text.defined();
  attention::Mask mask = cross ? attention::Mask::none() : self_mask;
  if (const Tensor& keep_in = in.at("text_keep"); keep_in.defined()) {
    CPDIT_CHECK(cross && keep_in.dim() == 2 && keep_in.size(0) == text.size(0) && keep_in.size(1) == text.size(1),
                invalid_argument, "cross-attention: the text mask must be (B, L) of encoder_hidden_states ",
                cross ? text.describe() : "(none given)", ", got ", keep_in.describe());
    Tensor keep = keep_in.to(DType::boolean);
    if (const int64_t kept = kept_text_length(keep); kept < keep.size(1)) {
      text = text.narrow(1, 0, kept);
      keep = keep.narrow(1, 0, kept).contiguous();
    }
    mask = attention::Mask::key_padding(keep);
  }
  // RoPE on q and k when the caller passed tables (the text's keys of cross-attention have none).
  const RopeTables rope{in.at("cos"), in.at("sin")};
  const bool rotated = !cross && rope.cos.defined();
  Qkv qkv;
  if (nn::TextKvCache* cache = nn::bound_text_kv_cache(); cross && cache != nullptr) {
    // Text keys carry no rotation: their projections depend on the text alone.
    qkv.q = project_heads(projections_.q, &projections_.norm_q, shape_.qk_norm, shape_.heads, x);
    std::tie(qkv.k, qkv.v) = cache->keys_values(this, 0, text, [&] { return project_kv(projections_, shape_, text); });
  } else {
    qkv = project(projections_, shape_, x, cross ? text : x, rotated ? &rope : nullptr);
  }
  // Replicated text keys are attended locally, never through the ring; sharded ones (and the
  // tokens' own keys) go to the router with the mask share that follows them.
  Tensor o = attend_heads(qkv, cross ? shape_.text_keys : attention::KvPlacement::sharded, std::move(mask));
  if (const Tensor& image = in.at("encoder_hidden_states_image"); image.defined()) {
    CPDIT_CHECK(cross && image_, invalid_argument,
                "attention: image tokens go with a cross-attention that has add_k_proj / add_v_proj");
    auto image_kv = [&] {
      return std::pair{project_heads(image_->k, &image_->norm_k, shape_.qk_norm, shape_.heads, image),
                       project_heads(image_->v, nullptr, shape_.qk_norm, shape_.heads, image)};
    };
    nn::TextKvCache* cache = nn::bound_text_kv_cache();
    const auto [k, v] = cache != nullptr ? cache->keys_values(this, 1, image, image_kv) : image_kv();
    const Qkv image_qkv{qkv.q, k, v};
    // Every rank holds all the image tokens (no plan splits them): attended locally.
    kernels::add_(o, attend_heads(image_qkv, attention::KvPlacement::replicated));
  }
  return o;
}

JointAttention::JointAttention(const AttentionShape& shape)
    : shape_(shape),
      image_{add_module<nn::Linear>("to_q", shape.dim, inner(shape)), add_module<nn::Linear>("to_k", shape.dim, inner(shape)),
             add_module<nn::Linear>("to_v", shape.dim, inner(shape)),
             add_module<nn::RMSNorm>("norm_q", norm_width(shape), shape.eps),
             add_module<nn::RMSNorm>("norm_k", norm_width(shape), shape.eps)},
      text_{add_module<nn::Linear>("add_q_proj", shape.dim, inner(shape)),
            add_module<nn::Linear>("add_k_proj", shape.dim, inner(shape)),
            add_module<nn::Linear>("add_v_proj", shape.dim, inner(shape)),
            add_module<nn::RMSNorm>("norm_added_q", norm_width(shape), shape.eps),
            add_module<nn::RMSNorm>("norm_added_k", norm_width(shape), shape.eps)},
      to_out_(add_module<nn::Container>("to_out").add_module<nn::Linear>("0", inner(shape), shape.dim)),
      to_add_out_(add_module<nn::Linear>("to_add_out", inner(shape), shape.dim)) {}

std::vector<Tensor> JointAttention::forward(const Tensor& hidden_states, const Tensor& encoder_hidden_states,
                                            const Tensor& cos, const Tensor& sin, const Tensor& text_keep) const {
  return with_hooks(attention_inputs(hidden_states, encoder_hidden_states, cos, sin, text_keep),
                    [&](const nn::TensorMap& in) {
                      const Tensor o = attend(in);
                      const int64_t n_text = in.at("encoder_hidden_states").size(1);
                      return std::vector<Tensor>{to_out_.forward(o.narrow(1, n_text, o.size(1) - n_text)),
                                                 to_add_out_.forward(o.narrow(1, 0, n_text))};
                    });
}

std::vector<Tensor> JointAttention::forward_residual(const Tensor& residual, const Tensor& gate,
                                                     const Tensor& context_residual, const Tensor& context_gate,
                                                     const Tensor& hidden_states, const Tensor& encoder_hidden_states,
                                                     const Tensor& cos, const Tensor& sin,
                                                     const Tensor& text_keep) const {
  if (has_hooks()) {  // the hooks must see this module's own outputs
    const auto out = forward(hidden_states, encoder_hidden_states, cos, sin, text_keep);
    return {gated_residual(residual, out[0], gate), gated_residual(context_residual, out[1], context_gate)};
  }
  const Tensor o = attend(attention_inputs(hidden_states, encoder_hidden_states, cos, sin, text_keep));
  const int64_t n_text = encoder_hidden_states.size(1);
  return {projected_residual(residual, to_out_, {o.narrow(1, n_text, o.size(1) - n_text)}, gate),
          projected_residual(context_residual, to_add_out_, {o.narrow(1, 0, n_text)}, context_gate)};
}

Tensor JointAttention::attend(const nn::TensorMap& in) const {
  const Tensor &x = in.at("hidden_states"), &c = in.at("encoder_hidden_states");
  CPDIT_CHECK(c.defined(), invalid_argument, "joint attention needs encoder_hidden_states");
  CPDIT_CHECK(x.dim() == 3 && c.dim() == 3 && c.size(0) == x.size(0), invalid_argument,
              "joint attention: hidden_states and encoder_hidden_states must be (B, S, D) of one batch, got ",
              x.describe(), " and ", c.describe());
  const int64_t n_text = c.size(1), length = n_text + x.size(1);
  // Text tokens first along the sequence; the tables cover [text; image] in that order.
  const Tensor &cos = in.at("cos"), &sin = in.at("sin");
  const bool rotated = cos.defined();
  auto rows_of = [&](const Tensor& table, int64_t first, int64_t count) {
    return table.contiguous().reshape({length, -1}).narrow(0, first, count);
  };
  Qkv joint;
  for (Tensor* t : {&joint.q, &joint.k, &joint.v}) *t = Tensor::empty({x.size(0), length, inner(shape_)});
  for (const auto& [p, tokens, first] : {std::tuple{&text_, c, int64_t(0)}, std::tuple{&image_, x, n_text}}) {
    RopeTables rope;
    if (rotated) rope = {rows_of(cos, first, tokens.size(1)), rows_of(sin, first, tokens.size(1))};
    const RopeTables* r = rotated ? &rope : nullptr;
    const struct {
      const Tensor& rows;
      const nn::Linear& proj;
      const nn::RMSNorm* norm;
      const RopeTables* rope;
    } parts[] = {{joint.q, p->q, &p->norm_q, r}, {joint.k, p->k, &p->norm_k, r}, {joint.v, p->v, nullptr, nullptr}};
    for (const auto& part : parts)
      write_rows(part.rows, first, tokens.size(1), [&](Tensor& out) {
        project_heads_into(part.proj, part.norm, shape_.qk_norm, shape_.heads, tokens, part.rope, out);
      });
  }
  for (Tensor* t : {&joint.q, &joint.k, &joint.v}) *t = t->reshape({x.size(0), length, shape_.heads, shape_.head_dim});
  attention::Mask mask;
  if (const Tensor& keep = in.at("text_keep"); keep.defined()) {
    CPDIT_CHECK(keep.dim() == 2 && keep.size(0) == c.size(0) && keep.size(1) == n_text, invalid_argument,
                "joint attention: the text mask must be (", c.size(0), ", ", n_text, "), got ", keep.describe());
    mask = attention::Mask::key_padding(
        cat({keep.to(DType::boolean), Tensor::full({x.size(0), x.size(1)}, 1.0, DType::boolean)}, 1));
  }
  return attend_heads(joint, attention::KvPlacement::sharded, std::move(mask));
}

}  // namespace cpdit::models::common
