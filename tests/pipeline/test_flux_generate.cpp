// The FLUX.1 denoising loop across ranks: deterministic, equal to one rank under every layout
// (uneven token counts included), and `cpdit generate` refusing bad input with one line, exit
// code 2 and nothing written.
#include "support/run_cli.hpp"

#include <cpdit/comm/local.hpp>
#include <cpdit/core/error.hpp>
#include <cpdit/io/safetensors.hpp>
#include <cpdit/pipeline/flux_pipeline.hpp>
#include <cpdit/pipeline/presets.hpp>

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <filesystem>
#include <fstream>
#include <mutex>

namespace cpdit::pipeline {
namespace {

using cpdit::testing::run_cli;
using cpdit::testing::TempDir;

struct Layout {
  int ring, ulysses;
  parallel::RotateMethod rotate = parallel::RotateMethod::p2p;
};

// flux-tiny, generated on ring x ulysses local ranks exactly as `cpdit generate` does it.
Tensor generate_tiny(Layout layout, int64_t height, int64_t width, int64_t text_tokens) {
  static const models::flux::FluxCheckpoint checkpoint = flux_preset("flux-tiny", 11);
  const FluxConditioning conditioning = random_flux_conditioning(checkpoint.config, 1, text_tokens, 5);
  FluxGenerateOptions options;
  options.steps = 3;
  options.height = height;
  options.width = width;
  options.seed = 42;
  parallel::ContextParallelConfig config;
  config.ring_degree = layout.ring;
  config.ulysses_degree = layout.ulysses;
  config.rotate_method = layout.rotate;

  Tensor latents;
  std::mutex mutex;
  comm::LocalOptions local;
  local.threads_per_rank = 1;
  comm::run_local(
      layout.ring * layout.ulysses,
      [&](comm::Communicator& world) {
        std::shared_ptr<comm::Communicator> group = world.split(0, world.rank());
        auto model = models::flux::load_flux(checkpoint);
        if (group->size() > 1) model->enable_parallelism(group, config, flux_sharded_latents_plan());
        FlowMatchEulerScheduler scheduler(flux_preset_scheduler("flux-tiny"));
        FluxGenerateResult result =
            generate_flux(*model, model->config(), scheduler, conditioning, options, group.get());
        std::lock_guard<std::mutex> lock(mutex);
        if (world.rank() == 0) latents = result.latents;
      },
      local);
  return latents;
}

TEST(FluxGenerate, SameSeedGivesBitwiseIdenticalLatents) {
  Tensor a = generate_tiny({1, 1}, 64, 96, 9);
  Tensor b = generate_tiny({1, 1}, 64, 96, 9);
  EXPECT_EQ(a.shape(), (Shape{1, 16, 8, 12}));
  EXPECT_EQ(max_abs_diff(a, b), 0.0);
  Tensor p = generate_tiny({2, 2}, 64, 96, 9);
  Tensor q = generate_tiny({2, 2}, 64, 96, 9);
  EXPECT_EQ(max_abs_diff(p, q), 0.0);
}

TEST(FluxGenerate, EveryLayoutMatchesOneRank) {
  // 64 x 96 px: 4 x 6 = 24 image tokens (divides 2 and 4); 80 x 48 px: 5 x 3 = 15 (divides neither),
  // with 9 and 7 text tokens.
  struct Size {
    int64_t height, width, text;
  };
  for (Size size : {Size{64, 96, 8}, Size{80, 48, 7}}) {
    Tensor single = generate_tiny({1, 1}, size.height, size.width, size.text);
    for (Layout layout : {Layout{2, 1}, Layout{1, 2}, Layout{2, 2}, Layout{4, 1},
                          Layout{2, 1, parallel::RotateMethod::allgather}}) {
      Tensor split = generate_tiny(layout, size.height, size.width, size.text);
      EXPECT_LT(max_abs_diff(split, single), 1e-4)
          << "ring " << layout.ring << " x ulysses " << layout.ulysses << " at " << size.height << "x" << size.width;
    }
  }
}

// Forwards every call to `inner` and counts the token gathers (all_gather_v, what parallel::gather
// runs) on it and on every communicator split from it, since the mesh splits its groups off the
// group it is given.
class GatherCounter : public comm::Communicator {
 public:
  struct Counts {
    std::atomic<int> gathers{0};
    std::atomic<int64_t> bytes{0};  // received, summed over the gathers
  };
  GatherCounter(std::shared_ptr<comm::Communicator> inner, std::shared_ptr<Counts> counts)
      : Communicator(comm::CommOptions{inner->timeout()}), inner_(std::move(inner)), counts_(std::move(counts)) {}

  int rank() const override { return inner_->rank(); }
  int size() const override { return inner_->size(); }
  std::string engine() const override { return inner_->engine(); }
  std::shared_ptr<Communicator> split(int color, int key) override {
    auto child = inner_->split(color, key);
    return child ? std::make_shared<GatherCounter>(child, counts_) : nullptr;
  }
  void send(const void* d, size_t n, int peer, int tag) override { inner_->send(d, n, peer, tag); }
  void recv(void* d, size_t n, int peer, int tag) override { inner_->recv(d, n, peer, tag); }
  std::unique_ptr<comm::Request> isend(const void* d, size_t n, int peer, int tag) override {
    return inner_->isend(d, n, peer, tag);
  }
  std::unique_ptr<comm::Request> irecv(void* d, size_t n, int peer, int tag) override {
    return inner_->irecv(d, n, peer, tag);
  }
  void all_gather(const void* send, size_t n, void* recv) override { inner_->all_gather(send, n, recv); }
  void all_gather_v(const void* send, size_t n, void* recv, const std::vector<size_t>& per_rank) override {
    ++counts_->gathers;
    for (size_t b : per_rank) counts_->bytes += int64_t(b);
    inner_->all_gather_v(send, n, recv, per_rank);
  }
  void all_to_all(const void* send, void* recv, size_t n) override { inner_->all_to_all(send, recv, n); }
  void all_to_all_v(const void* send, const std::vector<size_t>& sb, void* recv,
                    const std::vector<size_t>& rb) override {
    inner_->all_to_all_v(send, sb, recv, rb);
  }
  void all_reduce(void* d, size_t count, DType t, comm::ReduceOp op) override { inner_->all_reduce(d, count, t, op); }
  void reduce_scatter(const void* send, void* recv, size_t count, DType t, comm::ReduceOp op) override {
    inner_->reduce_scatter(send, recv, count, t, op);
  }
  void broadcast(void* d, size_t n, int root) override { inner_->broadcast(d, n, root); }
  void barrier() override { inner_->barrier(); }

 private:
  std::shared_ptr<comm::Communicator> inner_;
  std::shared_ptr<Counts> counts_;
};

// Over 3 steps on a ring of 2, the only gather of tokens is the loop's final one of the latents:
// the image tokens stay split from the first step to the last (a plan that gathered the model's
// output would add one per step).
TEST(FluxGenerate, LatentsStaySplitBetweenSteps) {
  static const models::flux::FluxCheckpoint checkpoint = flux_preset("flux-tiny", 11);
  const FluxConditioning conditioning = random_flux_conditioning(checkpoint.config, 1, 7, 5);
  FluxGenerateOptions options;
  options.steps = 3;
  options.height = 64;
  options.width = 96;
  parallel::ContextParallelConfig config;
  config.ring_degree = 2;
  std::vector<std::shared_ptr<GatherCounter::Counts>> counts;
  std::vector<int64_t> latent_bytes(2);
  for (int r = 0; r < 2; ++r) counts.push_back(std::make_shared<GatherCounter::Counts>());
  comm::LocalOptions local;
  local.threads_per_rank = 1;
  comm::run_local(
      2,
      [&](comm::Communicator& world) {
        auto group = std::make_shared<GatherCounter>(world.split(0, world.rank()), counts[size_t(world.rank())]);
        auto model = models::flux::load_flux(checkpoint);
        model->enable_parallelism(group, config, flux_sharded_latents_plan());
        FlowMatchEulerScheduler scheduler(flux_preset_scheduler("flux-tiny"));
        const FluxGenerateResult result =
            generate_flux(*model, model->config(), scheduler, conditioning, options, group.get());
        latent_bytes[size_t(world.rank())] = result.gather_bytes;
      },
      local);
  for (int r = 0; r < 2; ++r) {
    EXPECT_EQ(counts[size_t(r)]->gathers.load(), 1) << "rank " << r;
    EXPECT_EQ(counts[size_t(r)]->bytes.load(), latent_bytes[size_t(r)]) << "rank " << r;
    EXPECT_EQ(latent_bytes[size_t(r)], int64_t(1 * 16 * 8 * 12 * sizeof(float))) << "rank " << r;
  }
}

TEST(FluxGenerateCli, WritesLatentsPreviewAndSummary) {
  TempDir dir("generate_cli");
  auto r = run_cli("generate --preset flux-tiny --height 64 --width 64 --steps 2 --ranks 2 --threads 1 --json --out " +
                   dir.file("a.safetensors") + " --preview " + dir.file("a.png"));
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("\"seconds_per_step\""), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("\"peak_activation_bytes_per_rank\""), std::string::npos) << r.out;
  EXPECT_EQ(io::load_safetensors(dir.file("a.safetensors")).at("latents").shape(), (Shape{1, 16, 8, 8}));
  EXPECT_GT(std::filesystem::file_size(dir.file("a.png")), 100u);
  EXPECT_EQ(r.err.find("step"), std::string::npos) << "--json prints no progress";
}

// A diffusers pipeline folder runs its transformer with its own scheduler: the same latents as the
// transformer folder given that scheduler, and not those of the default it would get alone (flux_tiny has
// no guidance embedding: FLUX.1-schnell's shift 1).
TEST(FluxGenerateCli, APipelineFolderRunsItsTransformerWithItsScheduler) {
  TempDir dir("generate_cli_pipeline");
  const std::filesystem::path fixture = std::string(CPDIT_TEST_DATA) + "/fixtures/flux_tiny";
  std::filesystem::create_directories(dir.path() / "transformer");
  std::filesystem::create_directories(dir.path() / "scheduler");
  std::filesystem::copy_file(fixture / "weights.safetensors",
                             dir.path() / "transformer" / "diffusion_pytorch_model.safetensors");
  std::filesystem::copy_file(fixture / "config.json", dir.path() / "transformer" / "config.json");
  std::ofstream(dir.file("scheduler/scheduler_config.json")) << R"({"shift": 2.0, "use_dynamic_shifting": false})";
  std::ofstream(dir.file("model_index.json"))
      << R"({"_class_name": "FluxPipeline", "transformer": ["diffusers", "FluxTransformer2DModel"],
                                                     "scheduler": ["diffusers", "FlowMatchEulerDiscreteScheduler"]})";
  auto latents = [&](const std::string& model, const std::string& name) {
    auto r = run_cli("generate --model " + model +
                     " --height 64 --width 64 --steps 2 --text-tokens 4 --ranks 1 --threads 1 --random-embeddings --json --out " +
                     dir.file(name));
    EXPECT_EQ(r.code, 0) << r.err;
    return io::load_safetensors(dir.file(name)).at("latents");
  };
  const Tensor pipeline = latents(dir.path().string(), "pipeline.safetensors");
  const Tensor given =
      latents(dir.file("transformer") + " --scheduler-config " + dir.file("scheduler/scheduler_config.json"),
              "given.safetensors");
  const Tensor alone = latents(dir.file("transformer"), "alone.safetensors");
  EXPECT_EQ(max_abs_diff(pipeline, given), 0.0);
  EXPECT_GT(max_abs_diff(pipeline, alone), 0.0);
}

TEST(FluxGenerateCli, BadInputIsOneLineExitTwoAndNothingWritten) {
  TempDir dir("generate_cli_errors");
  const std::string out = dir.file("never.safetensors");
  io::save_safetensors(dir.file("wrong_width.safetensors"), {{"prompt_embeds", Tensor::zeros({1, 4, 31})},
                                                             {"pooled_prompt_embeds", Tensor::zeros({1, 32})}});
  struct Case {
    std::string args, message;
  };
  const std::vector<Case> cases{
      {"--preset flux-tiny --height 72", "multiple of 16"},
      {"--preset flux-tiny --width 100", "multiple of 16"},
      {"--preset flux-huge", "unknown preset"},
      {"--model " + dir.file("missing_dir"), "does not exist"},
      {"--preset flux-tiny --embeddings " + dir.file("missing.safetensors"), "missing.safetensors"},
      {"--preset flux-tiny --embeddings " + dir.file("wrong_width.safetensors"), "prompt_embeds"},
      {"--preset flux-tiny --ring 2 --ranks 3", "ring"},
      {"--preset flux-tiny --dtype f16", "--dtype must be auto"},
      {"--preset flux-tiny --out " + dir.file("no_such_folder/x.safetensors"), "does not exist"},
  };
  for (const Case& c : cases) {
    const bool own_out = c.args.find("--out") != std::string::npos;
    auto r = run_cli("generate " + c.args + " --steps 1" + (own_out ? "" : " --out " + out));
    EXPECT_EQ(r.code, 2) << c.args << "\n" << r.err;
    EXPECT_NE(r.err.find(c.message), std::string::npos) << c.args << "\n" << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << c.args << "\n" << r.err;
    EXPECT_FALSE(std::filesystem::exists(out)) << c.args;
  }
}

}  // namespace
}  // namespace cpdit::pipeline
