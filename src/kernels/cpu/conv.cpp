// Convolution through oneDNN's convolution primitive. The primitive picks its own layouts (channels
// last, or nChw16c for Winograd); the input, weights and output are reordered into them and back on
// each call. Measured on the VAE decoders' 3x3 shapes at one thread (`cpdit bench conv`,
// bench/README.md), direct convolution in its own layout beats im2col + sgemm by about 1.2x in CPU
// time even with the reorders, and oneDNN's NCHW variant by more; on the wide layers Winograd beats
// direct (see use_winograd). Buffers come from Tensor::empty, so the caching allocator reuses them
// and the rank's memory accounting sees them.
#include "kernels/cpu/checks.hpp"
#include "kernels/cpu/dnnl_engine.hpp"
#include "kernels/cpu/signals_held.hpp"

#include <cpdit/core/threads.hpp>
#include <cpdit/core/weight.hpp>

#include <cpdit/kernels/image.hpp>

#include <oneapi/dnnl/dnnl.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <map>
#include <mutex>
#include <optional>
#include <sstream>
#include <string>
#include <unordered_map>

namespace cpdit::kernels {
namespace {

using dnnl::memory;

int64_t out_size(int64_t in, int64_t kernel, int64_t stride, int64_t before, int64_t after, const char* what,
                 const std::string& x) {
  CPDIT_CHECK(stride > 0 && before >= 0 && after >= 0, invalid_argument, "conv3d: ", what,
              " stride must be positive and padding non-negative");
  CPDIT_CHECK(in + before + after >= kernel, invalid_argument, "conv3d: input ", x, " is smaller in ", what,
              " (", in + before + after, " with padding) than the kernel (", kernel, ")");
  return (in + before + after - kernel) / stride + 1;
}

memory::desc plain(const Shape& shape, memory::format_tag tag) {
  return memory::desc(memory::dims(shape.begin(), shape.end()), memory::data_type::f32, tag);
}
memory::desc any(const Shape& shape) { return plain(shape, memory::format_tag::any); }

// A reorder whose scratch space comes from our allocator: Winograd's weight transform needs one as
// large as its result (tens of MB), which oneDNN would otherwise take fresh from the system, and
// fresh pages are slow to touch, on every transform.
void reorder_into(const memory& from, memory& to, dnnl::stream& stream) {
  dnnl::primitive_attr attr;
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  const dnnl::reorder::primitive_desc pd(from, to, attr);
  const Tensor scratch = Tensor::empty({int64_t(pd.scratchpad_desc().get_size())}, DType::boolean);
  // oneDNN reads `from` only; its memory objects take non-const handles.
  dnnl::reorder(pd).execute(stream, {{DNNL_ARG_FROM, const_cast<memory&>(from)},
                                     {DNNL_ARG_TO, to},
                                     {DNNL_ARG_SCRATCHPAD, memory(pd.scratchpad_desc(), cpu_engine(), scratch.raw())}});
}

// The parts stacked along dim `axis` in the layout `wanted`: the one part itself when it is in that
// layout, else each part reordered straight into its place in a fresh buffer (so a band and its halo
// rows are never copied together first).
memory in_layout(const std::vector<memory>& parts, int axis, const memory::desc& wanted, dnnl::stream& stream,
                 Tensor& holder) {
  if (parts.size() == 1 && parts[0].get_desc() == wanted) return parts[0];
  holder = Tensor::empty({int64_t(wanted.get_size() / sizeof(float))});
  // A blocked layout pads the channels to whole blocks; a reorder of the whole zeroes the padding,
  // reorders of parts do not, and the convolution multiplies it by zero-padded weights (0 x NaN is NaN).
  const auto& d = wanted.data;
  if (parts.size() > 1 && !std::equal(d.dims, d.dims + d.ndims, d.padded_dims))
    std::memset(holder.raw(), 0, holder.nbytes());
  memory laid_out(wanted, cpu_engine(), holder.data<float>());
  int64_t start = 0;
  for (const memory& part : parts) {
    const memory::dims dims = part.get_desc().dims();
    memory::dims offsets(dims.size(), 0);
    offsets[size_t(axis)] = start;
    start += dims[size_t(axis)];
    // One part fills the whole (Winograd's weights have a layout of their own, which has no parts).
    memory place = parts.size() == 1 ? laid_out
                                     : memory(wanted.submemory_desc(dims, offsets), cpu_engine(), holder.data<float>());
    reorder_into(part, place, stream);
  }
  return laid_out;
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
    // The primitive's scratch space (Winograd's transformed tiles: hundreds of MB on a VAE's widest
    // layers) comes from our allocator (execute), so it is counted and reused, not held by oneDNN.
    dnnl::primitive_attr attr;
    attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
    return dnnl::convolution_forward::primitive_desc(desc, attr, cpu_engine());
  } catch (const dnnl::error&) {
    return std::nullopt;
  }
}

// Runs `pd` on the caller's buffers, reordering into the primitive's layouts and back; `weights` are
// already in the primitive's layout (weights_for), so a loop over batch elements reorders them once.
// The source comes as row parts stacked along dim `rows_axis` (in_layout).
void execute(const dnnl::convolution_forward::primitive_desc& pd, const std::vector<memory>& user_src, int rows_axis,
             const memory& weights, const Tensor& bias, memory& user_dst) {
  const auto& engine = cpu_engine();
  dnnl::stream stream(engine);
  Tensor src_holder, dst_holder;
  memory src = in_layout(user_src, rows_axis, pd.src_desc(), stream, src_holder);
  memory dst = user_dst;
  if (pd.dst_desc() != user_dst.get_desc()) {
    dst_holder = Tensor::empty({int64_t(pd.dst_desc().get_size() / sizeof(float))});
    dst = memory(pd.dst_desc(), engine, dst_holder.data<float>());
  }
  const Tensor scratch = Tensor::empty({int64_t(pd.scratchpad_desc().get_size())}, DType::boolean);
  std::unordered_map<int, memory> args{{DNNL_ARG_SRC, src}, {DNNL_ARG_WEIGHTS, weights}, {DNNL_ARG_DST, dst},
                                       {DNNL_ARG_SCRATCHPAD, memory(pd.scratchpad_desc(), engine, scratch.raw())}};
  // oneDNN reads the inputs only; its memory objects take non-const pointers.
  if (bias.defined())
    args.emplace(DNNL_ARG_BIAS, memory(plain({bias.numel()}, memory::format_tag::x), engine,
                                       const_cast<float*>(bias.data<float>())));
  {
    const detail::SignalsHeld held;  // a gemm-based convolution runs the JIT GEMM kernels
    dnnl::convolution_forward(pd).execute(stream, args);
    stream.wait();
  }
  if (dst_holder.defined()) reorder_into(dst, user_dst, stream);
  stream.wait();
}

// The weights, stored as `stored` describes them, in `pd`'s layout; `holder` keeps a reordered copy.
memory weights_for(const dnnl::convolution_forward::primitive_desc& pd, const Tensor& weight,
                   const memory::desc& stored, Tensor& holder) {
  dnnl::stream stream(cpu_engine());
  const memory user(stored, cpu_engine(), const_cast<float*>(weight.data<float>()));
  memory laid_out = in_layout({user}, 0, pd.weights_desc(), stream, holder);
  stream.wait();
  return laid_out;
}

// Winograd's F(4x4, 3x3) (oneDNN's jit_wino_4x3) does a quarter of direct convolution's
// multiplications on 3x3, stride-1 layers, but first transforms the weights, a reorder that
// takes about as long as the convolution of 8192 output pixels (both scale with in x out channels).
// A decode makes it once per layer (ConvWeightScope), and FLUX.1's decoder calls each layer once, so
// the break-even counts it. Measured at one thread (`bench conv`: cpdit_direct against
// cpdit_winograd, transform included): 512 channels at 128x128, 0.74 s direct against 0.44 s; at
// 64x128, 0.32 against 0.44; at 64x64 Winograd loses more (with the transform kept, it won 1.6x at
// 32x32: most of its cost is the transform). Below 256 channels oneDNN switches to its
// F(2x2, 3x3) variant, which measured 0.9-1.2x, so those layers stay direct. Its rounding differs
// from a direct sum's by ~1e-6 of the output's range (tests bound it).
constexpr int64_t kWinogradMinChannels = 256, kWinogradMinPixels = 128 * 128;

// Winograd's transformed weights, by weight and layout (oneDNN may block them differently for other
// image sizes), kept while a ConvWeightScope lives. Each entry holds its weight, so that no other
// weight can come to lie at the same address meanwhile; kept weights are counted with the weights,
// not on any rank.
struct TransformedWeights {
  Tensor weight, transformed;
};
struct WinogradCache {
  std::mutex mutex;
  int scopes = 0;
  int scope_threads = 0;  // the compute threads of the threads holding a scope, together
  std::map<std::string, TransformedWeights> entries;
};
WinogradCache& winograd_cache() {
  static WinogradCache cache;
  return cache;
}

struct TransformTotals {
  std::mutex mutex;
  WeightTransformStats stats;
};
TransformTotals& transform_totals() {
  static TransformTotals totals;
  return totals;
}

// `weight` (O, C, 1, 3, 3) in `pd`'s layout, transformed by an OpenMP team of `threads`. oneDNN's
// Winograd reorder gives each (input channel, output-channel block) to one thread, which computes it
// whole, so the bytes are the same for any team size.
Tensor transform_weights(const dnnl::convolution_forward::primitive_desc& pd, const Tensor& weight, int threads) {
  const ScopedComputeThreads team(threads);
  const auto start = std::chrono::steady_clock::now();
  Tensor transformed;
  const Shape& s = weight.shape();
  weights_for(pd, weight, plain({s[0], s[1], 3, 3}, memory::format_tag::oihw), transformed);
  CPDIT_CHECK(transformed.defined(), internal, "conv3d: Winograd's weights came in the plain layout");
  const std::chrono::duration<double> took = std::chrono::steady_clock::now() - start;
  TransformTotals& totals = transform_totals();
  const std::lock_guard<std::mutex> lock(totals.mutex);
  ++totals.stats.transforms;
  totals.stats.seconds += took.count();
  totals.stats.last_threads = threads;
  return transformed;
}

// `weight` (O, C, 1, 3, 3) in `pd`'s transformed layout: the kept copy inside a ConvWeightScope (made
// by the first caller; a rank asking while another transforms waits for it), else a fresh one.
Tensor winograd_weights(const dnnl::convolution_forward::primitive_desc& pd, const Tensor& weight) {
  const memory::desc& wanted = pd.weights_desc();
  WinogradCache& cache = winograd_cache();
  std::unique_lock<std::mutex> lock(cache.mutex);
  if (cache.scopes == 0) {
    lock.unlock();
    return transform_weights(pd, weight, compute_threads());
  }
  std::ostringstream key;
  key << weight.raw() << shape_string(weight.shape());
  key.write(reinterpret_cast<const char*>(&wanted.data), sizeof wanted.data);
  TransformedWeights& entry = cache.entries[key.str()];
  if (!entry.transformed.defined()) {
    // The other local ranks run the same layers in step (halo exchanges between them), so they are
    // about to wait here for this entry with their cores idle: the transform runs on their threads too.
    entry.transformed = transform_weights(pd, weight, std::max(cache.scope_threads, compute_threads()));
    entry.transformed.charge_to(weight_memory_counter());
    entry.weight = weight;
  }
  return entry.transformed;
}

// The shapes winograd_conv takes: a 3x3 kernel one frame deep, stride 1, no frame padding.
bool winograd_shape(const Shape& weight, const ConvGeometry& g) {
  return weight[2] == 1 && weight[3] == 3 && weight[4] == 3 &&
         g.stride == std::array<int64_t, 3>{1, 1, 1} && g.pad_before[0] == 0 && g.pad_after[0] == 0;
}

// A kernel one frame deep as a 2-D Winograd convolution with the frames of one batch element as its
// batch: NCDHW's (frames, channels, rows, columns) described by strides, no copy. False where
// oneDNN has no Winograd implementation for the shape.
bool winograd_conv(const std::vector<Tensor>& parts, const Shape& x, const Tensor& weight, const Tensor& bias,
                   const ConvGeometry& g, Tensor& out) {
  const int64_t frames = x[2], c = x[1], w = x[4];
  const int64_t o = out.size(1), ho = out.size(3), wo = out.size(4);
  const memory::desc dst_md({frames, o, ho, wo}, memory::data_type::f32, {ho * wo, frames * ho * wo, wo, 1});
  const auto pd = primitive_for(dnnl::algorithm::convolution_winograd, any({frames, c, x[3], w}), any({o, c, 3, 3}),
                                bias, any({frames, o, ho, wo}), g, 2);
  if (!pd) return false;
  const Tensor transformed = winograd_weights(*pd, weight);
  const memory weights(pd->weights_desc(), cpu_engine(), transformed.data<float>());
  for (int64_t b = 0; b < x[0]; ++b) {
    std::vector<memory> src;
    for (const Tensor& part : parts) {
      const int64_t h = part.size(3);
      const memory::desc md({frames, c, h, w}, memory::data_type::f32, {h * w, frames * h * w, w, 1});
      src.emplace_back(md, cpu_engine(), const_cast<float*>(part.data<float>()) + b * c * frames * h * w);
    }
    memory user_dst(dst_md, cpu_engine(), out.data<float>() + b * o * frames * ho * wo);
    execute(*pd, src, 2, weights, bias, user_dst);
  }
  return true;
}

std::atomic<ConvAlgorithm> process_default{ConvAlgorithm::fastest};

}  // namespace

ConvAlgorithm resolve_conv_algorithm(ConvAlgorithm algorithm, const Shape& x_shape, const Shape& weight_shape,
                                     const ConvGeometry& geometry, int64_t out_rows) {
  if (algorithm != ConvAlgorithm::fastest) return algorithm;
  const int64_t out_columns = x_shape[4] + geometry.pad_before[2] + geometry.pad_after[2] - weight_shape[4] + 1;
  const bool pays = x_shape[1] >= kWinogradMinChannels && weight_shape[0] >= kWinogradMinChannels &&
                    x_shape[2] * out_rows * out_columns >= kWinogradMinPixels;
  return winograd_shape(weight_shape, geometry) && pays ? ConvAlgorithm::winograd : ConvAlgorithm::direct;
}

ConvWeightScope::ConvWeightScope() : threads_(compute_threads()) {
  std::lock_guard<std::mutex> lock(winograd_cache().mutex);
  ++winograd_cache().scopes;
  winograd_cache().scope_threads += threads_;
}

ConvWeightScope::~ConvWeightScope() {
  std::lock_guard<std::mutex> lock(winograd_cache().mutex);
  winograd_cache().scope_threads -= threads_;
  if (--winograd_cache().scopes == 0) winograd_cache().entries.clear();
}

WeightTransformStats weight_transform_stats() {
  TransformTotals& totals = transform_totals();
  const std::lock_guard<std::mutex> lock(totals.mutex);
  return totals.stats;
}

bool winograd_available() {
  static const bool available = [] {
    return primitive_for(dnnl::algorithm::convolution_winograd, any({1, 64, 16, 16}), any({64, 64, 3, 3}), Tensor(),
                         any({1, 64, 16, 16}), ConvGeometry::same(0, 1, 1), 2)
        .has_value();
  }();
  return available;
}

void set_default_conv_algorithm(ConvAlgorithm algorithm) { process_default = algorithm; }
ConvAlgorithm default_conv_algorithm() { return process_default; }

Tensor conv3d(const Tensor& x, const Tensor& weight, const Tensor& bias, const ConvGeometry& g,
              ConvAlgorithm algorithm) {
  return conv3d_row_parts({x}, weight, bias, g, algorithm);
}

Tensor conv3d_row_parts(const std::vector<Tensor>& parts_in, const Tensor& weight_in, const Tensor& bias_in,
                        const ConvGeometry& g, ConvAlgorithm algorithm) {
  CPDIT_CHECK(!parts_in.empty(), invalid_argument, "conv3d: no input");
  std::vector<Tensor> parts;
  Shape shape;
  for (const Tensor& part : parts_in) {
    CPDIT_CHECK(part.defined() && part.dim() == 5, invalid_argument, "conv3d: x must be (B, C, F, H, W), got ",
                part.defined() ? part.describe() : "undefined");
    if (shape.empty()) {
      shape = part.shape();
    } else {
      CPDIT_CHECK(part.size(0) == shape[0] && part.size(1) == shape[1] && part.size(2) == shape[2] &&
                      part.size(4) == shape[4],
                  invalid_argument, "conv3d: row parts must differ in rows only, got ", part.describe(), " after ",
                  parts.back().describe());
      shape[3] += part.size(3);
    }
    if (part.size(3) > 0) parts.push_back(detail::f32_input(part, "conv3d", "x"));
  }
  const std::string x = "f32" + shape_string(shape);
  CPDIT_CHECK(weight_in.defined() && weight_in.dim() == 5 && weight_in.size(1) == shape[1], invalid_argument,
              "conv3d: weight must be (O, ", shape[1], ", kf, kh, kw), got ",
              weight_in.defined() ? weight_in.describe() : "undefined");
  Tensor weight = detail::f32_input(weight_in, "conv3d", "weight");
  Tensor bias = detail::optional_vector(bias_in, weight.size(0), "conv3d", "bias");
  const Shape out_shape{shape[0], weight.size(0),
                        out_size(shape[2], weight.size(2), g.stride[0], g.pad_before[0], g.pad_after[0], "frames", x),
                        out_size(shape[3], weight.size(3), g.stride[1], g.pad_before[1], g.pad_after[1], "rows", x),
                        out_size(shape[4], weight.size(4), g.stride[2], g.pad_before[2], g.pad_after[2], "columns", x)};
  CPDIT_CHECK(shape[1] > 0, invalid_argument, "conv3d: x ", x, " has no channels");
  Tensor out = Tensor::empty(out_shape);
  if (out.numel() == 0) return out;
  if (algorithm == ConvAlgorithm::winograd) {
    CPDIT_CHECK(winograd_shape(weight.shape(), g) && winograd_conv(parts, shape, weight, bias, g, out), unsupported,
                "conv3d: no Winograd convolution for x ", x, " and weight ", weight.describe());
    return out;
  }
  // Where oneDNN has no Winograd implementation for the shape, `fastest` sums directly.
  if (resolve_conv_algorithm(algorithm, shape, weight.shape(), g, out_shape[3]) == ConvAlgorithm::winograd &&
      winograd_conv(parts, shape, weight, bias, g, out))
    return out;

  const auto pd = primitive_for(dnnl::algorithm::convolution_direct, any(shape), any(weight.shape()), bias,
                                any(out_shape), g, 3);
  CPDIT_CHECK(pd.has_value(), unsupported, "conv3d: oneDNN has no convolution for x ", x, " and weight ",
              weight.describe());
  std::vector<memory> src;
  for (const Tensor& part : parts)
    src.emplace_back(plain(part.shape(), memory::format_tag::ncdhw), cpu_engine(), const_cast<float*>(part.data<float>()));
  Tensor weights_holder;
  const memory weights = weights_for(*pd, weight, plain(weight.shape(), memory::format_tag::oidhw), weights_holder);
  memory user_dst(plain(out_shape, memory::format_tag::ncdhw), cpu_engine(), out.data<float>());
  execute(*pd, src, 3, weights, bias, user_dst);
  return out;
}

}  // namespace cpdit::kernels
