#include <cpdit/core/error.hpp>
#include <cpdit/kernels/cpu.hpp>
#include <cpdit/models/common/adaptive_norm.hpp>
#include <cpdit/parallel/shared_linear.hpp>

namespace cpdit::models::common {

namespace k = kernels;

namespace {
// (B, D) -> (B, 1, D): a per-batch vector broadcast over the tokens; other shapes pass unchanged.
Tensor over_tokens(const Tensor& v) { return v.dim() == 2 ? v.contiguous().reshape({v.size(0), 1, v.size(1)}) : v; }

// linear(SiLU(emb)) (B, chunks·D) cut into `chunks` vectors (B, D), in checkpoint order. emb holds one
// vector per sample, the same on every rank of a context-parallel group, so the ranks share the
// product's output features out (a hooked layer must see its own input and output, and a layer with a
// low-rank delta adds it: both run whole).
std::vector<Tensor> chunked(const nn::Linear& linear, const Tensor& emb, int chunks) {
  CPDIT_CHECK(emb.dim() == 2, invalid_argument, "modulation: embedding must be (B, D), got ", emb.describe());
  const Tensor e = k::silu(emb);
  Tensor m = linear.plain() ? parallel::shared_linear(e, linear.weight(), linear.bias()) : linear.forward(e);
  const int64_t dim = m.size(1) / chunks;
  std::vector<Tensor> out;
  for (int i = 0; i < chunks; ++i) out.push_back(m.narrow(1, i * dim, dim));
  return out;
}
}  // namespace

AdaLayerNormZero::AdaLayerNormZero(int64_t dim, int chunks, const std::string& linear_name)
    : linear_(add_module<nn::Linear>(linear_name, dim, chunks * dim)), chunks_(chunks) {}

std::vector<Tensor> AdaLayerNormZero::forward(const Tensor& emb) const {
  return with_hooks({{"emb", emb}}, [&](const nn::TensorMap& in) { return chunked(linear_, in.at("emb"), chunks_); });
}

AdaLayerNormContinuous::AdaLayerNormContinuous(int64_t dim, int64_t conditioning_dim, float eps)
    : linear_(add_module<nn::Linear>("linear", conditioning_dim, 2 * dim)), eps_(eps) {}

Tensor AdaLayerNormContinuous::forward(const Tensor& x, const Tensor& conditioning_embedding) const {
  return with_hooks({{"x", x}, {"conditioning_embedding", conditioning_embedding}}, [&](const nn::TensorMap& in) {
    auto m = chunked(linear_, in.at("conditioning_embedding"), 2);  // scale, shift: in this order
    return std::vector<Tensor>{norm_modulate(in.at("x"), m[0], m[1], eps_)};
  })[0];
}

AdaLayerNormSingle::AdaLayerNormSingle(int64_t dim)
    // emb is diffusers' PixArtAlphaCombinedTimestepSizeEmbeddings without size conditioning: only its
    // timestep_embedder has weights.
    : timestep_embedder_(add_module<nn::Container>("emb").add_module<MlpEmbedder>("timestep_embedder", 256, dim,
                                                                                  Activation::silu)),
      linear_(add_module<nn::Linear>("linear", dim, 6 * dim)) {}

std::vector<Tensor> AdaLayerNormSingle::forward(const Tensor& timestep) const {
  return with_hooks({{"timestep", timestep}}, [&](const nn::TensorMap& in) {
    Tensor embedded = timestep_embedder_.forward(timestep_sinusoid(in.at("timestep"), 256));
    return std::vector<Tensor>{linear_.forward(k::silu(embedded)), embedded};
  });
}

std::vector<Tensor> scale_shift_modulation(const Weight& table_weight, const Tensor& emb) {
  const Tensor table = table_weight.values("scale-shift modulation").to(DType::f32);
  CPDIT_CHECK(table.dim() == 2 || (table.dim() == 3 && table.size(0) == 1), invalid_argument,
              "scale_shift_table must be [n, D] or [1, n, D], got ", table.describe());
  const int64_t n = table.size(-2), dim = table.size(-1);
  CPDIT_CHECK((emb.dim() == 3 || emb.dim() == 4) && (emb.size(-2) == n || emb.size(-2) == 1) && emb.size(-1) == dim,
              invalid_argument, "modulation: embedding must be (B, ", n, " or 1, ", dim, ") or (B, S, ", n, " or 1, ",
              dim, ") for table ", table.describe(), ", got ", emb.describe());
  // One row for all n (an output head adds the embedded timestep itself to each row of its table).
  const Tensor rows = emb.size(-2) == n ? emb : cat(std::vector<Tensor>(size_t(n), emb), emb.dim() - 2);
  Tensor sum = k::add(rows, table.reshape({n, dim}));
  std::vector<Tensor> out;
  for (int64_t i = 0; i < n; ++i)
    out.push_back(emb.dim() == 3 ? sum.narrow(1, i, 1) : sum.select(2, i));  // (B, 1, D) or (B, S, D)
  return out;
}

Tensor norm_modulate(const Tensor& x, const Tensor& scale, const Tensor& shift, float eps) {
  return k::layer_norm_modulate(x, over_tokens(scale), over_tokens(shift), eps);
}

void add_gated_(Tensor& x, const Tensor& y, const Tensor& gate) { k::add_mul_(x, y, over_tokens(gate)); }

Tensor gated_residual(const Tensor& x, const Tensor& y, const Tensor& gate) {
  if (!gate.defined()) return k::add(x, y);
  Tensor out = x.clone();
  add_gated_(out, y, gate);
  return out;
}

Tensor projected_residual(const Tensor& x, const nn::Linear& proj, const std::vector<Tensor>& o, const Tensor& gate) {
  if (proj.has_hooks()) {  // a hook may hold proj's output: a new tensor
    return gated_residual(x, proj.forward(o.size() == 1 ? o[0] : cat(o, -1)), gate);
  }
  Tensor y = k::linear_cat(o, proj.weight());
  proj.add_delta_(o, y);
  k::bias_residual_(y, x, proj.bias(), gate.defined() ? over_tokens(gate) : Tensor());
  return y;
}

}  // namespace cpdit::models::common
