// Convolution through oneDNN's convolution primitive. The primitive picks its own blocked layouts
// (nCdhw16c on AVX-512); the input, weights and output are reordered into them and back on each
// call. Measured on the VAE decoders' 3x3 shapes at one thread (`cpdit bench conv`, bench/README.md),
// this beats im2col + sgemm by about 1.2x in CPU time even with the reorders, and oneDNN's NCHW
// variant by more. Buffers come from Tensor::empty, so the caching allocator reuses them and the
// rank's memory accounting sees them.
#include "kernels/cpu/checks.hpp"

#include <cpdit/kernels/image.hpp>

#include <oneapi/dnnl/dnnl.hpp>

#include <unordered_map>

namespace cpdit::kernels {
namespace {

using dnnl::memory;

const dnnl::engine& cpu_engine() {
  static const dnnl::engine engine(dnnl::engine::kind::cpu, 0);
  return engine;
}

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

// `user` itself when the primitive wants its layout, else a reordered copy in a fresh buffer.
memory in_layout(const memory& user, const memory::desc& wanted, dnnl::stream& stream, Tensor& holder) {
  if (user.get_desc() == wanted) return user;
  holder = Tensor::empty({int64_t(wanted.get_size() / sizeof(float))});
  memory blocked(wanted, cpu_engine(), holder.data<float>());
  dnnl::reorder(user, blocked).execute(stream, const_cast<memory&>(user), blocked);
  return blocked;
}

}  // namespace

Tensor conv3d(const Tensor& x_in, const Tensor& weight_in, const Tensor& bias_in, const ConvGeometry& g) {
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

  const auto& engine = cpu_engine();
  dnnl::stream stream(engine);
  const memory::desc any_src(memory::dims(x.shape().begin(), x.shape().end()), memory::data_type::f32,
                             memory::format_tag::any);
  const memory::desc any_weights(memory::dims(weight.shape().begin(), weight.shape().end()), memory::data_type::f32,
                                 memory::format_tag::any);
  const memory::desc any_dst(memory::dims(out_shape.begin(), out_shape.end()), memory::data_type::f32,
                             memory::format_tag::any);
  const memory::desc bias_md = plain({out_shape[1]}, memory::format_tag::x);
  const memory::dims strides(g.stride.begin(), g.stride.end()), before(g.pad_before.begin(), g.pad_before.end()),
      after(g.pad_after.begin(), g.pad_after.end());
  const auto desc = bias.defined()
                        ? dnnl::convolution_forward::desc(dnnl::prop_kind::forward_inference,
                                                          dnnl::algorithm::convolution_direct, any_src, any_weights,
                                                          bias_md, any_dst, strides, before, after)
                        : dnnl::convolution_forward::desc(dnnl::prop_kind::forward_inference,
                                                          dnnl::algorithm::convolution_direct, any_src, any_weights,
                                                          any_dst, strides, before, after);
  const dnnl::convolution_forward::primitive_desc pd(desc, engine);

  // oneDNN reads the inputs only; its memory objects take non-const pointers.
  const memory user_src(plain(x.shape(), memory::format_tag::ncdhw), engine, const_cast<float*>(x.data<float>()));
  const memory user_weights(plain(weight.shape(), memory::format_tag::oidhw), engine,
                            const_cast<float*>(weight.data<float>()));
  memory user_dst(plain(out_shape, memory::format_tag::ncdhw), engine, out.data<float>());
  Tensor src_holder, weights_holder, dst_holder;
  memory src = in_layout(user_src, pd.src_desc(), stream, src_holder);
  memory weights = in_layout(user_weights, pd.weights_desc(), stream, weights_holder);
  memory dst = user_dst;
  if (pd.dst_desc() != user_dst.get_desc()) {
    dst_holder = Tensor::empty({int64_t(pd.dst_desc().get_size() / sizeof(float))});
    dst = memory(pd.dst_desc(), engine, dst_holder.data<float>());
  }
  std::unordered_map<int, memory> args{{DNNL_ARG_SRC, src}, {DNNL_ARG_WEIGHTS, weights}, {DNNL_ARG_DST, dst}};
  if (bias.defined()) args.emplace(DNNL_ARG_BIAS, memory(bias_md, engine, const_cast<float*>(bias.data<float>())));
  dnnl::convolution_forward(pd).execute(stream, args);
  if (dst_holder.defined()) dnnl::reorder(dst, user_dst).execute(stream, dst, user_dst);
  stream.wait();
  return out;
}

}  // namespace cpdit::kernels
