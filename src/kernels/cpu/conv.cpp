// Convolution through oneDNN's convolution primitive. The primitive picks its own layouts (channels
// last, or nChw16c for Winograd); the input, weights and output are reordered into them and back on
// each call. Measured on the VAE decoders' 3x3 shapes at one thread (`cpdit bench conv`,
// bench/README.md), direct convolution in its own layout beats im2col + sgemm by about 1.2x in CPU
// time even with the reorders, and oneDNN's NCHW variant by more; on the wide layers Winograd beats
// direct (see use_winograd). Buffers come from Tensor::empty, so the caching allocator reuses them
// and the rank's memory accounting sees them.
#include "kernels/cpu/checks.hpp"
#include "kernels/cpu/dnnl_engine.hpp"

#include <cpdit/kernels/image.hpp>

#include <oneapi/dnnl/dnnl.hpp>

#include <atomic>
#include <optional>
#include <unordered_map>

namespace cpdit::kernels {
namespace {

using dnnl::memory;

int64_t out_size(int64_t in, int64_t kernel, int64_t stride, int64_t before, int64_t after, const char* what,
                 const Tensor& x) {
  CPDIT_CHECK(stride > 0 && before >= 0 && after >= 0, invalid_argument, "conv3d: ", what,
              " stride must be positive and padding non-negative");
  CPDIT_CHECK(in + before + after >= kernel, invalid_argument, "conv3d: input ", x.describe(), " is smaller in ", what,
              " (", in + before + after, " with padding) than the kernel (", kernel, ")");
  return (in + before + after - kernel) / stride + 1;
}

memory::desc plain(const Shape& shape, memory::format_tag tag) {
  return memory::desc(memory::dims(shape.begin(), shape.end()), memory::data_type::f32, tag);
}
memory::desc any(const Shape& shape) { return plain(shape, memory::format_tag::any); }

// `user` itself when the primitive wants its layout, else a reordered copy in a fresh buffer.
memory in_layout(const memory& user, const memory::desc& wanted, dnnl::stream& stream, Tensor& holder) {
  if (user.get_desc() == wanted) return user;
  holder = Tensor::empty({int64_t(wanted.get_size() / sizeof(float))});
  memory blocked(wanted, cpu_engine(), holder.data<float>());
  dnnl::reorder(user, blocked).execute(stream, const_cast<memory&>(user), blocked);
  return blocked;
}

// The primitive for `algorithm` on these layouts, or nothing where oneDNN has no implementation.
std::optional<dnnl::convolution_forward::primitive_desc> primitive_for(
    dnnl::algorithm algorithm, const memory::desc& src, const memory::desc& weights, const Tensor& bias,
    const memory::desc& dst, const ConvGeometry& g, int spatial_dims) {
  // The last `spatial_dims` of (frames, rows, columns).
  const auto tail = [&](const std::array<int64_t, 3>& a) { return memory::dims(a.end() - spatial_dims, a.end()); };
  const memory::desc bias_md = plain({dst.dims()[1]}, memory::format_tag::x);
  const auto kind = dnnl::prop_kind::forward_inference;
  try {
    const auto desc = bias.defined() ? dnnl::convolution_forward::desc(kind, algorithm, src, weights, bias_md, dst,
                                                                       tail(g.stride), tail(g.pad_before),
                                                                       tail(g.pad_after))
                                     : dnnl::convolution_forward::desc(kind, algorithm, src, weights, dst,
                                                                       tail(g.stride), tail(g.pad_before),
                                                                       tail(g.pad_after));
    return dnnl::convolution_forward::primitive_desc(desc, cpu_engine());
  } catch (const dnnl::error&) {
    return std::nullopt;
  }
}

// Runs `pd` on the caller's buffers, reordering into the primitive's layouts and back; `weights` are
// already in the primitive's layout (weights_for), so a loop over batch elements reorders them once.
void execute(const dnnl::convolution_forward::primitive_desc& pd, const memory& user_src, const memory& weights,
             const Tensor& bias, memory& user_dst) {
  const auto& engine = cpu_engine();
  dnnl::stream stream(engine);
  Tensor src_holder, dst_holder;
  memory src = in_layout(user_src, pd.src_desc(), stream, src_holder);
  memory dst = user_dst;
  if (pd.dst_desc() != user_dst.get_desc()) {
    dst_holder = Tensor::empty({int64_t(pd.dst_desc().get_size() / sizeof(float))});
    dst = memory(pd.dst_desc(), engine, dst_holder.data<float>());
  }
  std::unordered_map<int, memory> args{{DNNL_ARG_SRC, src}, {DNNL_ARG_WEIGHTS, weights}, {DNNL_ARG_DST, dst}};
  // oneDNN reads the inputs only; its memory objects take non-const pointers.
  if (bias.defined())
    args.emplace(DNNL_ARG_BIAS, memory(plain({bias.numel()}, memory::format_tag::x), engine,
                                       const_cast<float*>(bias.data<float>())));
  dnnl::convolution_forward(pd).execute(stream, args);
  if (dst_holder.defined()) dnnl::reorder(dst, user_dst).execute(stream, dst, user_dst);
  stream.wait();
}

// The weights, stored as `stored` describes them, in `pd`'s layout; `holder` keeps a reordered copy.
memory weights_for(const dnnl::convolution_forward::primitive_desc& pd, const Tensor& weight,
                   const memory::desc& stored, Tensor& holder) {
  dnnl::stream stream(cpu_engine());
  const memory user(stored, cpu_engine(), const_cast<float*>(weight.data<float>()));
  memory laid_out = in_layout(user, pd.weights_desc(), stream, holder);
  stream.wait();
  return laid_out;
}

// Winograd's F(4x4, 3x3) (oneDNN's jit_wino_4x3) does a quarter of direct convolution's
// multiplications on 3x3, stride-1 layers, but first transforms the weights in a serial reorder that
// takes about as long as the convolution of 8192 output pixels (both scale with in x out channels,
// so the break-even is a pixel count). Measured at one thread (`bench conv`: cpdit_direct against
// cpdit_winograd, reorders and transform included): 512 channels at 128x128, 0.74 s direct against
// 0.44 s; at 64x128, 0.32 against 0.44; at 64x64 Winograd loses more. Below 256 channels oneDNN
// switches to its F(2x2, 3x3) variant, which measured 0.9-1.2x, so those layers stay direct. Its
// rounding differs from a direct sum's by ~1e-6 of the output's range (tests bound it).
bool winograd_pays(const Tensor& x, const Tensor& weight, const Shape& out_shape) {
  constexpr int64_t kMinChannels = 256, kMinPixels = 128 * 128;
  return x.size(1) >= kMinChannels && weight.size(0) >= kMinChannels &&
         out_shape[2] * out_shape[3] * out_shape[4] >= kMinPixels;
}

// The shapes winograd_conv takes: a 3x3 kernel one frame deep, stride 1, no frame padding.
bool winograd_shape(const Tensor& weight, const ConvGeometry& g) {
  return weight.size(2) == 1 && weight.size(3) == 3 && weight.size(4) == 3 &&
         g.stride == std::array<int64_t, 3>{1, 1, 1} && g.pad_before[0] == 0 && g.pad_after[0] == 0;
}

// A kernel one frame deep as a 2-D Winograd convolution with the frames of one batch element as its
// batch: NCDHW's (frames, channels, rows, columns) described by strides, no copy. False where
// oneDNN has no Winograd implementation for the shape.
bool winograd_conv(const Tensor& x, const Tensor& weight, const Tensor& bias, const ConvGeometry& g, Tensor& out) {
  const int64_t frames = x.size(2), c = x.size(1), h = x.size(3), w = x.size(4);
  const int64_t o = out.size(1), ho = out.size(3), wo = out.size(4);
  const memory::desc src_md({frames, c, h, w}, memory::data_type::f32, {h * w, frames * h * w, w, 1});
  const memory::desc dst_md({frames, o, ho, wo}, memory::data_type::f32, {ho * wo, frames * ho * wo, wo, 1});
  const auto pd = primitive_for(dnnl::algorithm::convolution_winograd, any({frames, c, h, w}), any({o, c, 3, 3}),
                                bias, any({frames, o, ho, wo}), g, 2);
  if (!pd) return false;
  Tensor weights_holder;
  const memory weights = weights_for(*pd, weight, plain({o, c, 3, 3}, memory::format_tag::oihw), weights_holder);
  for (int64_t b = 0; b < x.size(0); ++b) {
    const memory user_src(src_md, cpu_engine(), const_cast<float*>(x.data<float>()) + b * c * frames * h * w);
    memory user_dst(dst_md, cpu_engine(), out.data<float>() + b * o * frames * ho * wo);
    execute(*pd, user_src, weights, bias, user_dst);
  }
  return true;
}

std::atomic<ConvAlgorithm> process_default{ConvAlgorithm::fastest};

}  // namespace

void set_default_conv_algorithm(ConvAlgorithm algorithm) { process_default = algorithm; }
ConvAlgorithm default_conv_algorithm() { return process_default; }

Tensor conv3d(const Tensor& x_in, const Tensor& weight_in, const Tensor& bias_in, const ConvGeometry& g,
              ConvAlgorithm algorithm) {
  CPDIT_CHECK(x_in.defined() && x_in.dim() == 5, invalid_argument, "conv3d: x must be (B, C, F, H, W), got ",
              x_in.defined() ? x_in.describe() : "undefined");
  CPDIT_CHECK(weight_in.defined() && weight_in.dim() == 5 && weight_in.size(1) == x_in.size(1), invalid_argument,
              "conv3d: weight must be (O, ", x_in.size(1), ", kf, kh, kw), got ",
              weight_in.defined() ? weight_in.describe() : "undefined");
  Tensor x = detail::f32_input(x_in, "conv3d", "x");
  Tensor weight = detail::f32_input(weight_in, "conv3d", "weight");
  Tensor bias = detail::optional_vector(bias_in, weight.size(0), "conv3d", "bias");
  const Shape out_shape{x.size(0), weight.size(0),
                        out_size(x.size(2), weight.size(2), g.stride[0], g.pad_before[0], g.pad_after[0], "frames", x),
                        out_size(x.size(3), weight.size(3), g.stride[1], g.pad_before[1], g.pad_after[1], "rows", x),
                        out_size(x.size(4), weight.size(4), g.stride[2], g.pad_before[2], g.pad_after[2], "columns", x)};
  CPDIT_CHECK(x.size(1) > 0, invalid_argument, "conv3d: x ", x.describe(), " has no channels");
  Tensor out = Tensor::empty(out_shape);
  if (out.numel() == 0) return out;
  if (algorithm == ConvAlgorithm::winograd) {
    CPDIT_CHECK(winograd_shape(weight, g) && winograd_conv(x, weight, bias, g, out), unsupported,
                "conv3d: no Winograd convolution for x ", x.describe(), " and weight ", weight.describe());
    return out;
  }
  if (algorithm == ConvAlgorithm::fastest && winograd_shape(weight, g) && winograd_pays(x, weight, out_shape) &&
      winograd_conv(x, weight, bias, g, out))
    return out;

  const auto pd = primitive_for(dnnl::algorithm::convolution_direct, any(x.shape()), any(weight.shape()), bias,
                                any(out_shape), g, 3);
  CPDIT_CHECK(pd.has_value(), unsupported, "conv3d: oneDNN has no convolution for x ", x.describe(), " and weight ",
              weight.describe());
  const memory user_src(plain(x.shape(), memory::format_tag::ncdhw), cpu_engine(), const_cast<float*>(x.data<float>()));
  Tensor weights_holder;
  const memory weights = weights_for(*pd, weight, plain(weight.shape(), memory::format_tag::oidhw), weights_holder);
  memory user_dst(plain(out_shape, memory::format_tag::ncdhw), cpu_engine(), out.data<float>());
  execute(*pd, user_src, weights, bias, user_dst);
  return out;
}

}  // namespace cpdit::kernels
