// `cpdit bench text --model t5-xxl-shaped | qwen2.5-vl-7b-shaped`: a text encoder at its released widths
// with 2 blocks, random bf16 weights from a fixed seed, 512 tokens:
//   t5-xxl-shaped: T5EncoderModel at T5-v1.1-XXL's (d_model 4096, 64 heads of 64, gated FFN 10240, vocab 32128);
//   qwen2.5-vl-7b-shaped: Qwen2.5-VL-7B's language model (hidden 3584, 28 query heads of 128 over 4
//     key/value heads, SwiGLU 18944, vocab 152064), Qwen-Image's text encoder.
// Reports GFLOP/s (wall and CPU time, min and median of the repeats) and the resident weight bytes
// beside the checkpoint's bf16 bytes: the bf16 matrices are kept as bf16, never widened to a whole f32
// copy. bench/text_torch.py runs transformers' model on the same shapes.
#include "command.hpp"
#include "measure.hpp"

#include <cpdit/core/error.hpp>
#include <cpdit/core/memory.hpp>
#include <cpdit/core/threads.hpp>
#include <cpdit/core/weight.hpp>
#include <cpdit/kernels/cpu.hpp>
#include <cpdit/models/text/qwen2_5_vl.hpp>
#include <cpdit/models/text/t5.hpp>
#include <cpdit/nn/load.hpp>
#include <cpdit/pipeline/random.hpp>

#include <cmath>

namespace cpdit::bench {
namespace {

struct TextBenchArgs {
  std::string model = "t5-xxl-shaped";
  int64_t tokens = 512;
  int64_t layers = 2;
  int repeats = 3;
  int threads = 0;
  bool quick = false;
};

// The model of --model with `layers` blocks, the GFLOP of a forward on `s` tokens (2 FLOP per
// multiply-add of the projections and the feed-forward for every token, and q.k and p.v over all s x s
// pairs per head, causal or not), and its vocabulary.
struct ShapedModel {
  std::unique_ptr<nn::Model> model;
  double gflop = 0;
  int64_t vocab = 0;
};

ShapedModel shaped_model(const std::string& name, int64_t layers, int64_t s) {
  if (name == "t5-xxl-shaped") {
    models::text::T5Config c;  // the defaults are T5-v1.1-XXL's widths
    c.num_layers = layers;
    const double inner = double(c.num_heads * c.d_kv);
    const double per_token = 2.0 * (4 * c.d_model * inner + 3.0 * c.d_model * c.d_ff);
    return {std::make_unique<models::text::T5EncoderModel>(c), c.num_layers * (s * per_token + 4.0 * s * s * inner) / 1e9,
            c.vocab_size};
  }
  CPDIT_CHECK(name == "qwen2.5-vl-7b-shaped", invalid_argument,
              "bench text: --model must be t5-xxl-shaped or qwen2.5-vl-7b-shaped, got '", name, "'");
  models::text::Qwen2_5_VLTextConfig c;  // the defaults are Qwen2.5-VL-7B's widths
  c.num_hidden_layers = layers;
  const double d = double(c.hidden_size), kv = double(c.num_key_value_heads * c.head_dim());
  const double per_token = 2.0 * (2 * d * d + 2 * d * kv + 3.0 * d * c.intermediate_size);
  return {std::make_unique<models::text::Qwen2_5_VLTextModel>(c), layers * (s * per_token + 4.0 * s * s * d) / 1e9,
          c.vocab_size};
}

// Matrices ~ N(0, 1/fan_in) and tables ~ N(0, 0.25), drawn one tensor at a time and stored as bf16
// at once (a whole f32 copy of the weights is what this benchmark shows is never made); vectors (norm
// weights, biases) 1 (f32, as the model keeps them).
nn::StateDict random_bf16_weights(nn::Module& model) {
  nn::StateDict state;
  uint64_t seed = 1;
  for (auto& [name, p] : model.named_parameters()) {
    if (!p->matrix) {
      state[name] = Tensor::full(p->shape, 1.0);
      continue;
    }
    const bool table =
        name.find("embed") != std::string::npos || name.find("relative_attention_bias") != std::string::npos;
    const double scale = table ? 0.5 : 1.0 / std::sqrt(double(p->shape[1]));
    state[name] = kernels::mul(pipeline::randn(p->shape, seed++), Tensor::full({1}, scale)).to(DType::bf16);
  }
  return state;
}

void run_text_bench(const TextBenchArgs& a) {
  CPDIT_CHECK(a.tokens >= 1 && a.layers >= 1, invalid_argument, "bench text: --tokens and --layers must be positive");
  if (a.threads > 0) set_compute_threads(a.threads);
  const int64_t tokens = a.quick ? 128 : a.tokens;

  const int64_t rss_before = resident_bytes(), live_before = weight_memory_counter().current();
  const ShapedModel shaped = shaped_model(a.model, a.layers, tokens);
  nn::Model& model = *shaped.model;
  int64_t bf16_bytes = 0;
  {
    const nn::StateDict state = random_bf16_weights(model);
    nn::load_state_dict(model, state);  // kept as stored: bf16 tensors are shared, not copied
  }
  int64_t weight_bytes = 0;
  for (auto& [name, p] : model.named_parameters()) {
    weight_bytes += int64_t(p->value.nbytes());
    bf16_bytes += shape_numel(p->value.shape()) * 2;
  }
  // The f32 draws are freed into the allocator's cache; hand them back so the RSS shows the weights.
  memory::release_cache();
  const int64_t rss_weights = resident_bytes() - rss_before,
                live_weights = weight_memory_counter().current() - live_before;

  Tensor ids = Tensor::empty({1, tokens}, DType::i64);
  for (int64_t s = 0; s < tokens; ++s) ids.data<int64_t>()[s] = (s * 7919) % shaped.vocab;
  memory::reset_peak();
  const Timing t = measure([&] { model.forward({{"input_ids", ids}}); }, a.quick ? 1 : a.repeats);
  const int64_t forward_peak = memory::peak_bytes() - memory::current_bytes();

  auto j = line("text");
  j["model"] = a.model;
  j["layers"] = a.layers;
  j["tokens"] = tokens;
  j["threads"] = compute_threads();
  j["min_s"] = t.min_s;
  j["median_s"] = t.median_s;
  j["cpu_min_s"] = t.cpu_min_s;
  j["gflop"] = shaped.gflop;
  j["gflops"] = shaped.gflop / t.min_s;
  j["gflops_per_cpu_s"] = shaped.gflop / t.cpu_min_s;
  j["weight_bytes"] = weight_bytes;        // what the model's parameters hold
  j["bf16_bytes"] = bf16_bytes;            // the same parameters at 2 bytes each
  j["live_weight_tensor_bytes"] = live_weights;  // the process's weight counter once the model is loaded
  j["rss_after_load_bytes"] = rss_weights;        // process growth from building and loading it
  // Activations and the per-GEMM f32 widening of one bf16 weight, above the weights, at the peak.
  j["forward_peak_extra_bytes"] = forward_peak;
  print(j);
}

void add_text_bench(CLI::App& parent) {
  auto a = std::make_shared<TextBenchArgs>();
  CLI::App* cmd = parent.add_subcommand(
      "text", "a text encoder at its released widths (random bf16 weights): GFLOP/s and resident weight bytes");
  cmd->add_option("--model", a->model, "t5-xxl-shaped (T5-v1.1-XXL) or qwen2.5-vl-7b-shaped (Qwen-Image's)")
      ->capture_default_str();
  cmd->add_option("--tokens", a->tokens, "sequence length")->capture_default_str();
  cmd->add_option("--layers", a->layers, "encoder blocks")->capture_default_str();
  cmd->add_option("--repeats", a->repeats, "timed repeats after one warm-up")->capture_default_str();
  cmd->add_option("--threads", a->threads, "compute threads (default: the process default)");
  cmd->add_flag("--quick", a->quick, "128 tokens, one timed run");
  cmd->callback([a] { run_text_bench(*a); });
}

const bool registered = app::register_bench("text", add_text_bench);

}  // namespace
}  // namespace cpdit::bench
