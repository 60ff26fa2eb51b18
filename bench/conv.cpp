// cpdit bench conv: the VAE decoders' 3x3 convolutions, cpdit's kernel (oneDNN's primitive in its own
// layout, with the reorders of input, weights and output on every call; as it chooses, and forced
// direct and Winograd) against oneDNN's
// primitive on the same shapes in the same run: in the plain NCHW layout the models keep, and blocked
// without any reorder (the best case: a model that kept every activation blocked). Every line carries GFLOP/s
// (2 O C 9 H W / time) over the minimum and the median, and per second of process CPU time.
#include "command.hpp"
#include "measure.hpp"

#include <cpdit/core/error.hpp>
#include <cpdit/core/threads.hpp>
#include <cpdit/kernels/image.hpp>

#include <oneapi/dnnl/dnnl.hpp>

#include <memory>
#include <random>
#include <sstream>

namespace cpdit::bench {
namespace {

struct ConvBenchArgs {
  // in x out x height x width: FLUX.1's VAE decoder widths at a quarter of their 1024x1024 sizes
  // (each about 10-40 GFLOP, so one repeat takes seconds on one core), and the RGB output conv.
  std::vector<std::string> shapes{"512x512x32x32", "512x512x64x64", "256x256x128x128", "128x128x256x256",
                                  "128x3x256x256"};
  std::vector<int> threads{1};
  int repeats = 3;
};

struct ConvShape {
  int64_t in, out, height, width;
};

ConvShape parse_shape(const std::string& text) {
  ConvShape s{};
  char x[3] = {};
  std::istringstream stream(text);
  stream >> s.in >> x[0] >> s.out >> x[1] >> s.height >> x[2] >> s.width;
  CPDIT_CHECK(stream && stream.eof() && x[0] == 'x' && x[1] == 'x' && x[2] == 'x' && s.in > 0 && s.out > 0 &&
                  s.height > 0 && s.width > 0,
              invalid_argument, "bench conv: shape '", text, "' must be INxOUTxHxW, e.g. 512x512x64x64");
  return s;
}

Tensor random_tensor(const Shape& shape, uint32_t seed) {
  Tensor t = Tensor::empty(shape);
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  float* p = t.data<float>();
  for (int64_t i = 0; i < t.numel(); ++i) p[i] = dist(gen);
  return t;
}

void run(const ConvBenchArgs& args) {
  using dnnl::memory;
  dnnl::engine engine(dnnl::engine::kind::cpu, 0);
  dnnl::stream stream(engine);
  for (const std::string& text : args.shapes) {
    const ConvShape s = parse_shape(text);
    const double flops = 2.0 * double(s.out) * double(s.in) * 9.0 * double(s.height) * double(s.width);
    Tensor x = random_tensor({1, s.in, 1, s.height, s.width}, 1);
    Tensor w = random_tensor({s.out, s.in, 1, 3, 3}, 2), b = random_tensor({s.out}, 3);
    Tensor y = Tensor::empty({1, s.out, s.height, s.width});

    const memory::dims src_dims{1, s.in, s.height, s.width}, w_dims{s.out, s.in, 3, 3}, b_dims{s.out},
        dst_dims{1, s.out, s.height, s.width};
    auto md = [](const memory::dims& d, memory::format_tag tag) {
      return memory::desc(d, memory::data_type::f32, tag);
    };
    auto primitive = [&](memory::format_tag data, memory::format_tag weights) {
      const dnnl::convolution_forward::desc desc(
          dnnl::prop_kind::forward_inference, dnnl::algorithm::convolution_direct, md(src_dims, data),
          md(w_dims, weights), md(b_dims, memory::format_tag::x), md(dst_dims, data), {1, 1}, {1, 1}, {1, 1});
      return dnnl::convolution_forward::primitive_desc(desc, engine);
    };
    memory user_src(md(src_dims, memory::format_tag::nchw), engine, x.data<float>());
    memory user_w(md(w_dims, memory::format_tag::oihw), engine, w.data<float>());
    memory user_b(md(b_dims, memory::format_tag::x), engine, b.data<float>());
    memory user_dst(md(dst_dims, memory::format_tag::nchw), engine, y.data<float>());

    for (int threads : args.threads) {
      ScopedComputeThreads budget(threads);
      const Timing cpdit =
          measure([&] { kernels::conv3d(x, w, b, kernels::ConvGeometry::same(0, 1, 1)); }, args.repeats);
      auto report = [&](const std::string& impl, const Timing& t) {
        nlohmann::json j = line("conv");
        j.update({{"impl", impl}, {"in", s.in}, {"out", s.out}, {"height", s.height}, {"width", s.width},
                  {"threads", threads}, {"repeats", args.repeats}, {"min_s", t.min_s}, {"median_s", t.median_s},
                  {"cpu_min_s", t.cpu_min_s}, {"gflops_min", flops / t.min_s / 1e9},
                  {"gflops_median", flops / t.median_s / 1e9}, {"gflops_per_cpu_s", flops / t.cpu_min_s / 1e9},
                  {"cpdit_over_this_cpu", t.cpu_min_s / cpdit.cpu_min_s}});
        print(j);
      };
      report("cpdit_conv3d", cpdit);
      // The two ways conv3d chooses between, each forced (Winograd only on the 3x3 shapes it takes;
      // both include every reorder, the Winograd weight transform among them).
      for (const auto& [impl, algorithm] : {std::pair{"cpdit_direct", kernels::ConvAlgorithm::direct},
                                            std::pair{"cpdit_winograd", kernels::ConvAlgorithm::winograd}}) {
        try {
          report(impl, measure([&, algorithm = algorithm] {
            kernels::conv3d(x, w, b, kernels::ConvGeometry::same(0, 1, 1), algorithm);
          }, args.repeats));
        } catch (const Error&) {  // no Winograd for this shape: nothing to report
        }
      }

      // oneDNN on the models' layout: NCHW in and out, OIHW weights.
      const auto plain_pd = primitive(memory::format_tag::nchw, memory::format_tag::oihw);
      dnnl::convolution_forward plain(plain_pd);
      report("onednn_nchw", measure([&] {
        plain.execute(stream, {{DNNL_ARG_SRC, user_src}, {DNNL_ARG_WEIGHTS, user_w}, {DNNL_ARG_BIAS, user_b},
                               {DNNL_ARG_DST, user_dst}});
        stream.wait();
      }, args.repeats));

      // oneDNN's own layout, weights reordered once outside the timing.
      const auto best_pd = primitive(memory::format_tag::any, memory::format_tag::any);
      dnnl::convolution_forward best(best_pd);
      memory src(best_pd.src_desc(), engine), weights(best_pd.weights_desc(), engine), dst(best_pd.dst_desc(), engine);
      dnnl::reorder(user_w, weights).execute(stream, user_w, weights);
      stream.wait();
      report("onednn_blocked", measure([&] {
        best.execute(stream, {{DNNL_ARG_SRC, src}, {DNNL_ARG_WEIGHTS, weights}, {DNNL_ARG_BIAS, user_b},
                              {DNNL_ARG_DST, dst}});
        stream.wait();
      }, args.repeats));
    }
  }
}

void add_conv_bench(CLI::App& parent) {
  auto args = std::make_shared<ConvBenchArgs>();
  CLI::App* cmd =
      parent.add_subcommand("conv", "3x3 convolutions of the VAE decoders: cpdit against oneDNN's primitive");
  cmd->add_option("--shape", args->shapes, "INxOUTxHxW shapes (default: FLUX.1 VAE widths at a quarter size)");
  cmd->add_option("--threads", args->threads, "thread counts (default 1)");
  cmd->add_option("--repeats", args->repeats, "timed repeats after one warm-up (default 3)");
  cmd->callback([args] { run(*args); });
}

const bool registered = app::register_bench("conv", add_conv_bench);

}  // namespace
}  // namespace cpdit::bench
