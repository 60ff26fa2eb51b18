// cpdit attention: runs one attention call on tensors from a safetensors file and writes out / lse.
// The steps are separate functions so context-parallel flags only have to replace `compute`.
#include "command.hpp"
#include "option_checks.hpp"
#include "output_paths.hpp"
#include "cp_flags.hpp"

#include <cpdit/attention/attention.hpp>
#include <cpdit/core/error.hpp>
#include <cpdit/core/threads.hpp>
#include <cpdit/io/safetensors.hpp>

#include <cmath>
#include <memory>
#include <optional>

namespace cpdit::app {
namespace {

struct AttentionArgs {
  std::string inputs, output, backend;
  std::string mask_rule = "none";  // none | causal | block-causal
  int64_t block_tokens = 0;        // block-causal: tokens per block
  int threads = 0;
  CpFlags cp;
};

struct AttentionInputs {
  Tensor q, k, v;
  attention::Mask mask;
  std::string path;  // for messages
};

Tensor required_tensor(const io::SafetensorsFile& file, const std::string& name) {
  CPDIT_CHECK(file.contains(name), invalid_argument, file.path(), " has no tensor '", name,
              "'; attention needs q, k, v (B,S,H,D) and optionally key_mask (B,S_k)");
  // Integer tensors are widened to i64 on load; name the dtype the file holds, not that one.
  const std::string& stored = file.info(name).dtype;
  CPDIT_CHECK(stored.front() == 'F' || stored == "BF16", invalid_argument, file.path(), ": ", name, " is ", stored,
              "; attention takes floating-point q, k, v (F32, BF16 or F16)");
  return file.get(name);
}

// The position rule the flags ask for (none without --mask).
attention::Mask rule_of(const AttentionArgs& args) {
  CPDIT_CHECK(args.block_tokens == 0 || args.mask_rule == "block-causal", invalid_argument,
              "attention: --block-tokens applies only to --mask block-causal");
  if (args.mask_rule == "causal") return attention::Mask::causal();
  if (args.mask_rule != "block-causal") return attention::Mask::none();
  CPDIT_CHECK(args.block_tokens >= 1, invalid_argument,
              "attention: --mask block-causal needs --block-tokens N (tokens per block, >= 1)");
  return attention::Mask::block_causal(args.block_tokens);
}

AttentionInputs load_inputs(const AttentionArgs& args) {
  const std::string& path = args.inputs;
  const io::SafetensorsFile file = io::SafetensorsFile::open(path);
  AttentionInputs in{required_tensor(file, "q"), required_tensor(file, "k"), required_tensor(file, "v"), rule_of(args),
                     path};
  if (file.contains("key_mask")) in.mask = in.mask.with_key_padding(file.get("key_mask"));
  return in;  // shapes are checked by the backend, which names the offending tensor
}

// Local attention on one backend; context parallelism swaps this step.
attention::Result compute(const AttentionInputs& in, const attention::Backend& backend) {
  attention::Requirements needs;
  needs.mask = in.mask.kind;
  needs.rule = in.mask.rule;
  needs.dtype = in.q.dtype();
  needs.gqa = in.q.dim() == 4 && in.k.dim() == 4 && in.q.size(2) != in.k.size(2);
  attention::check_supports(backend, needs);
  attention::Options opts;
  opts.mask = in.mask;
  return backend.forward(in.q, in.k, in.v, in.mask,
                         attention::resolve_scale(opts, in.q.dim() == 4 ? in.q.size(3) : 0));
}

void run(const AttentionArgs& args) {
  refuse_overwrite({{"--output", args.output}}, {{"--inputs", args.inputs}});
  std::optional<ScopedComputeThreads> threads;
  if (args.threads > 0) threads.emplace(args.threads);
  const attention::Backend& backend =
      args.backend.empty() ? attention::current_backend() : attention::backend(args.backend);
  const AttentionInputs in = load_inputs(args);
  const attention::Result r =
      cp_requested(args.cp)
          ? run_context_parallel(args.cp, in.q, in.k, in.v, in.mask, backend, args.threads)
          : compute(in, backend);
  if (!r.out.defined()) return;  // an MPI rank other than 0: rank 0 writes the file
  io::save_safetensors(args.output, {{"out", r.out.to(DType::f32)}, {"lse", r.lse}},
                       {{"backend", backend.name()}, {"layout_out", "B,S,H,D"}, {"layout_lse", "B,H,S"}});
}

void add_attention(CLI::App& parent) {
  auto args = std::make_shared<AttentionArgs>();
  CLI::App* cmd = parent.add_subcommand(
      "attention", "Scaled dot-product attention on q, k, v (B,S,H,D) [and key_mask (B,S_k), true = "
                   "attend] from a safetensors file; writes out (B,S,H,D) and lse (B,H,S) as float32");
  cmd->add_option("--inputs", args->inputs, "safetensors file with q, k, v [, key_mask]")->required();
  cmd->add_option("-o,--out,--output", args->output, "safetensors file to write (atomically)")->required()->check(output_name());
  cmd->add_option("--backend", args->backend,
                  "attention backend (default: $CPDIT_ATTENTION_BACKEND, else flash)");
  cmd->add_option("--mask", args->mask_rule,
                  "position rule on global token positions, with key_mask when the file has one "
                  "(default none)")
      ->check(CLI::IsMember({"none", "causal", "block-causal"}));
  cmd->add_option("--block-tokens", args->block_tokens,
                  "block-causal: tokens per block (frames per block x tokens per frame)")
      ->check(whole_number<int64_t>());
  cmd->add_option("--threads", args->threads, "compute threads (default: all)")->check(CLI::Range(1, 1 << 16));
  add_cp_flags(*cmd, args->cp);
  cmd->callback([args] { run(*args); });
}

const bool registered = register_command("attention", add_attention);

}  // namespace
}  // namespace cpdit::app
