// The parity check behind every context-parallel test: single-rank flash attention on the full
// tensors is the reference (float64 for position rules); the case runs sharded through
// ParallelContext and is gathered back.
#include "parallel/cp_case.hpp"

#include "support/attention_reference.hpp"
#include "support/random_normal.hpp"

#include <cpdit/attention/attention.hpp>
#include <cpdit/core/memory.hpp>
#include <cpdit/parallel/context.hpp>
#include <cpdit/parallel/shard.hpp>

#include <algorithm>
#include <cmath>
#include <limits>
#include <sstream>
#include <map>
#include <mutex>
#include <random>

namespace cpdit::parallel::test {
namespace {

using attention::Mask;
using cpdit::testing::random_normal;

float scale_of(const CpCase& c) { return float(1.0 / std::sqrt(double(c.dim))); }

// Key mask (B, S) for the case; see MaskCase.
Tensor make_mask(const CpCase& c, std::mt19937& rng) {
  const int ranks = c.ring * c.ulysses;
  // In batch 0 one whole ring chunk (a Ulysses row) is padded: with U = 1 that is rank 1's keys;
  // Ulysses alone pads rank 1's keys.
  const int first = c.ring > 1 ? c.ulysses : 1, count = c.ring > 1 ? c.ulysses : 1;
  const int64_t keys = c.keys();
  const int64_t pad_begin = split_offset(keys, ranks, std::min(first, ranks));
  const int64_t pad_end = split_offset(keys, ranks, std::min(first + count, ranks));
  std::bernoulli_distribution keep(0.7);
  Tensor mask = Tensor::empty({c.batch, keys}, DType::boolean);
  bool* m = mask.data<bool>();
  for (int64_t b = 0; b < c.batch; ++b)
    for (int64_t j = 0; j < keys; ++j) {
      bool attend = keep(rng) || j == 0;
      if (b == 0 && j >= pad_begin && j < pad_end && c.mask == MaskCase::padded) attend = false;
      if (b == 1 && c.mask == MaskCase::all_masked_row) attend = false;
      m[b * keys + j] = attend;
    }
  return mask;
}

double max_abs(const Tensor& t) { return max_abs_diff(t, Tensor::zeros(t.shape())); }

double relative(const Tensor& got, const Tensor& want) {
  return max_abs_diff(got, want) / std::max(max_abs(want), 1e-30);
}

// Largest difference over finite reference entries; infinity when a -inf entry does not match.
double lse_error(const Tensor& got, const Tensor& want) {
  const Tensor g = got.contiguous(), w = want.contiguous();
  const float* gp = g.data<float>();
  const float* wp = w.data<float>();
  double worst = 0;
  for (int64_t i = 0; i < g.numel(); ++i) {
    if (std::isinf(wp[i]) || std::isinf(gp[i]) || std::isnan(gp[i])) {
      if (!(gp[i] == wp[i])) return std::numeric_limits<double>::infinity();
      continue;
    }
    worst = std::max(worst, double(std::fabs(gp[i] - wp[i])));
  }
  return worst;
}

struct Reference {
  Tensor q, k, v, dout;
  Mask mask;
  attention::Result fwd;
  attention::Grads grads;
};

// The full inputs and the single-rank flash results of a case, built once per process: ranks that
// are threads share them instead of each recomputing the whole attention. They are charged to a
// counter that outlives the cache, not to the rank thread that happens to build them (a rank's
// counter ends with its run_local).
// The float64 dense reference: the rule and the key padding as one additive bias on global positions.
void float64_reference(const CpCase& c, Reference& r) {
  namespace ref = attention::testing;
  ref::RefInputs in;
  in.d = {c.batch, c.seq, c.keys(), c.heads, c.kv_heads, c.dim};
  in.q = ref::values(r.q), in.k = ref::values(r.k), in.v = ref::values(r.v);
  in.scale = scale_of(c);
  const Mask mask = r.mask;
  const Tensor keep = mask.kind == attention::MaskKind::key_padding ? mask.tensor.contiguous() : Tensor();
  in.bias = [mask, keep, S = c.keys()](int64_t b, int64_t, int64_t i, int64_t j) {
    const bool padded = keep.defined() && !keep.data<bool>()[b * S + j];
    const bool hidden = mask.rule == attention::MaskRule::causal ? j > i : j / mask.block > i / mask.block;
    return padded || hidden ? -std::numeric_limits<double>::infinity() : 0.0;
  };
  const ref::RefOutputs f = ref::ref_forward(in);
  r.fwd = {ref::to_tensor(f.out, r.q.shape()), ref::to_tensor(f.lse, {c.batch, c.heads, c.seq})};
  if (!c.backward) return;
  const ref::RefGrads g = ref::ref_backward(in, ref::values(r.dout));
  r.grads = {ref::to_tensor(g.dq, r.q.shape()), ref::to_tensor(g.dk, r.k.shape()),
             ref::to_tensor(g.dv, r.v.shape())};
}

const Reference& reference(const CpCase& c) {
  static std::mutex mutex;
  static MemoryCounter cache_memory;
  static std::map<std::string, Reference> cache;
  std::lock_guard lock(mutex);
  auto it = cache.find(c.name());
  if (it != cache.end()) return it->second;
  ScopedMemoryCounter charged(cache_memory);
  Reference r;
  std::mt19937 rng(unsigned(c.seq * 131 + c.heads * 17 + c.kv_heads + c.kv_seq * 7919));
  r.q = random_normal({c.batch, c.seq, c.heads, c.dim}, rng).to(c.dtype);
  r.k = random_normal({c.batch, c.keys(), c.kv_heads, c.dim}, rng).to(c.dtype);
  r.v = random_normal({c.batch, c.keys(), c.kv_heads, c.dim}, rng).to(c.dtype);
  r.dout = random_normal({c.batch, c.seq, c.heads, c.dim}, rng).to(c.dtype);
  r.mask = c.mask == MaskCase::none ? Mask::none() : Mask::key_padding(make_mask(c, rng));
  r.mask.rule = c.rule;
  r.mask.block = c.block;
  if (c.rule != attention::MaskRule::none) {
    float64_reference(c, r);
    return cache.emplace(c.name(), std::move(r)).first->second;
  }
  const attention::Backend& flash = attention::backend("flash");
  r.fwd = flash.forward(r.q, r.k, r.v, r.mask, scale_of(c));
  if (c.backward)
    r.grads = flash.backward(r.dout, r.q, r.k, r.v, r.fwd.out, r.fwd.lse, r.mask, scale_of(c));
  return cache.emplace(c.name(), std::move(r)).first->second;
}

}  // namespace

std::string CpCase::name() const {
  static const char* masks[] = {"nomask", "padded", "maskedrow"};
  // A stream, not a chain of operator+: g++ 12 warns falsely (-Wrestrict) on the chain.
  std::ostringstream n;
  n << "R" << ring << "U" << ulysses << "_" << rotate_method_name(rotate) << "_S" << seq;
  if (kv_seq > 0) n << "K" << kv_seq;
  n << "_H" << heads << "kv" << kv_heads << "_" << masks[int(mask)];
  if (rule == attention::MaskRule::causal) n << "_causal";
  if (rule == attention::MaskRule::block_causal) n << "_block" << block;
  n << "_" << dtype_name(dtype) << (backward ? "" : "_fwd");
  if (layout == TokenLayout::zigzag) n << "_zigzag";
  return n.str();
}

double out_tolerance(const CpCase& c) { return c.dtype == DType::f32 ? 1e-5 : 8e-3; }
// bf16: the global output is rounded to bf16 before the backward reads it (Dv = rowsum(dO * O)), so
// one rounding step of O (out of the merge's last f32 bits) moves the gradients by ~1e-4.
double grad_tolerance(const CpCase& c) {
  if (c.dtype != DType::f32) return 1e-3;
  return c.rule == attention::MaskRule::none ? 1e-4 : 2e-5;
}

CpErrors check_case(std::shared_ptr<comm::Communicator> world, const CpCase& c) {
  const Reference& ref = reference(c);
  const attention::Backend& flash = attention::backend("flash");
  ContextParallelConfig config;
  config.ring_degree = c.ring;
  config.ulysses_degree = c.ulysses;
  config.rotate_method = c.rotate;
  config.token_layout = c.layout;
  ParallelContext context(world, config);
  attention::Options opts;
  opts.scale = scale_of(c);
  opts.mask = ref.mask;  // a position rule stays as the model states it, on global positions
  if (ref.mask.kind != attention::MaskKind::none) opts.mask.tensor = context.shard(ref.mask.tensor, 1);
  const Tensor q = context.shard(ref.q, 1), k = context.shard(ref.k, 1), v = context.shard(ref.v, 1);
  const attention::Result mine = context.forward(flash, q, k, v, opts);

  CpErrors errors;
  errors.out = max_abs_diff(context.gather(mine.out, 1), ref.fwd.out);
  errors.lse = lse_error(context.gather(mine.lse, 2), ref.fwd.lse);
  if (!c.backward) return errors;
  const attention::Grads grads = context.backward(flash, context.shard(ref.dout, 1), q, k, v, mine, opts);
  errors.dq = relative(context.gather(grads.dq, 1), ref.grads.dq);
  errors.dk = relative(context.gather(grads.dk, 1), ref.grads.dk);
  errors.dv = relative(context.gather(grads.dv, 1), ref.grads.dv);
  return errors;
}

std::vector<CpCase> local_matrix() {
  const std::pair<int, int> meshes[] = {{2, 1}, {3, 1}, {4, 1}, {1, 2}, {1, 3},
                                        {1, 4}, {2, 2}, {3, 2}, {2, 3}};
  std::vector<CpCase> cases;
  for (auto [R, U] : meshes)
    for (RotateMethod rotate : {RotateMethod::p2p, RotateMethod::allgather}) {
      if (R == 1 && rotate == RotateMethod::allgather) continue;  // no ring to rotate
      auto add = [&](CpCase c) {
        c.ring = R;
        c.ulysses = U;
        c.rotate = rotate;
        cases.push_back(c);
      };
      // Divisible and uneven lengths, with and without a key mask (one chunk fully padded). H = 6
      // is not divisible by U = 4 (head padding).
      for (int64_t seq : {72, 97})
        for (MaskCase mask : {MaskCase::none, MaskCase::padded}) add({.seq = seq, .mask = mask});
      add({.seq = 1001, .heads = 4, .kv_heads = 4, .dim = 4, .mask = MaskCase::padded});
      add({.seq = 3, .mask = MaskCase::padded});                       // fewer tokens than ranks
      add({.seq = 50, .heads = 8, .kv_heads = 4, .mask = MaskCase::padded});  // GQA
      // GQA with fewer key/value heads than Ulysses ranks (U = 3, 4): the exchange copies them.
      add({.seq = 50, .heads = 8, .kv_heads = 2, .mask = MaskCase::padded});
      add({.seq = 29, .heads = 6, .kv_heads = 1, .mask = MaskCase::padded});  // one KV head (MQA)
      add({.seq = 40, .mask = MaskCase::all_masked_row});
      add({.seq = 45, .mask = MaskCase::padded, .dtype = DType::bf16});
      // Cross-attention to text split with the tokens: fewer keys than queries, more keys than
      // queries, and fewer keys than ranks; each with its own padded key mask.
      add({.seq = 97, .kv_seq = 13, .mask = MaskCase::padded});
      add({.seq = 7, .kv_seq = 30, .mask = MaskCase::padded});
      add({.seq = 50, .heads = 8, .kv_heads = 4, .kv_seq = 3, .mask = MaskCase::padded});  // GQA
    }
  return cases;
}

std::vector<CpCase> rule_matrix() {
  const std::pair<int, int> meshes[] = {{1, 1}, {2, 1}, {1, 2}, {2, 2}, {3, 1}, {1, 3}};
  std::vector<CpCase> cases;
  for (auto [R, U] : meshes)
    for (RotateMethod rotate : {RotateMethod::p2p, RotateMethod::allgather}) {
      if (R == 1 && rotate == RotateMethod::allgather) continue;  // no ring to rotate
      // S = 97 splits unevenly over 2, 3 and 4 ranks; blocks of 10 tokens (a "frame block") end
      // inside shards and straddle shard boundaries.
      for (auto [rule, block] : {std::pair{attention::MaskRule::causal, int64_t(1)},
                                 std::pair{attention::MaskRule::block_causal, int64_t(10)}})
        for (MaskCase mask : {MaskCase::none, MaskCase::padded})
          for (TokenLayout layout : {TokenLayout::contiguous, TokenLayout::zigzag}) {
            if (R == 1 && layout == TokenLayout::zigzag) continue;  // the same layout without a ring
            cases.push_back({.ring = R, .ulysses = U, .rotate = rotate, .seq = 97, .mask = mask,
                             .rule = rule, .block = block, .layout = layout});
          }
    }
  return cases;
}

std::vector<CpCase> mpi_subset() {
  return {{.ring = 4, .ulysses = 1, .seq = 97, .mask = MaskCase::padded},
          {.ring = 4, .ulysses = 1, .rotate = RotateMethod::allgather, .seq = 97, .mask = MaskCase::padded},
          {.ring = 1, .ulysses = 4, .seq = 97, .mask = MaskCase::padded},
          {.ring = 2, .ulysses = 2, .seq = 97, .heads = 8, .kv_heads = 4, .mask = MaskCase::padded},
          {.ring = 1, .ulysses = 4, .seq = 97, .heads = 8, .kv_heads = 2, .mask = MaskCase::padded},
          {.ring = 2, .ulysses = 2, .seq = 3, .mask = MaskCase::padded, .dtype = DType::bf16},
          {.ring = 2, .ulysses = 2, .seq = 97, .mask = MaskCase::padded,
           .rule = attention::MaskRule::block_causal, .block = 10}};
}

}  // namespace cpdit::parallel::test
