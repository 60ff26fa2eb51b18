// Ring attention: forward merges one partial result per KV chunk by LSE; backward accumulates dq
// locally while each chunk's dK/dV accumulator travels with the chunk and comes home at the end
// (correct for any ring size). Under a position rule each step is one call per pair of
// a query range and a key range (a zigzag layout holds two ranges per rank), each with contiguous
// global positions; a pair that is empty, or whose keys the rule hides from every query of the pair
// (the future under a causal rule), is not computed: it would add nothing to the output and nothing
// to any gradient.
#include "parallel/ring.hpp"

#include <cpdit/core/error.hpp>
#include <cpdit/core/threads.hpp>
#include <cpdit/parallel/lse_merge.hpp>

#include <chrono>
#include <memory>
#include <vector>

namespace cpdit::parallel {
namespace {

constexpr int kGradTag = 12;

Tensor compute_dtype(const Tensor& t, bool fp32) { return fp32 ? t.to(DType::f32) : t; }

// dst = a + b over n floats; a may be null (then dst = b) and b may be null (then dst = a).
void sum_into(float* dst, const float* a, const float* b, int64_t n) {
#pragma omp parallel for num_threads(compute_threads())
  for (int64_t i = 0; i < n; ++i) dst[i] = (a ? a[i] : 0.0f) + (b ? b[i] : 0.0f);
}

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

// The dK/dV accumulators of the ring backward. At step i this rank holds chunk c = r - i; the
// accumulator of chunk c arrives from the previous rank (which held c at step i - 1), gets this
// rank's contribution, and goes on to the next rank. After the last step one more hop brings each
// accumulator to the rank that owns the chunk. Receives are posted before the step's compute and
// sends are double-buffered, so the hops overlap the attention.
class TravellingGrads {
 public:
  TravellingGrads(const RingSetup& setup, const KvRotation& rotation, int64_t batch, int64_t heads,
                  int64_t dim)
      : setup_(setup), rotation_(rotation), row_(heads * dim), batch_(batch) {
    int64_t longest = 0;
    for (int c = 0; c < rotation.steps(); ++c) longest = std::max(longest, rotation.length_of(c));
    const int64_t capacity = 2 * batch * longest * row_;  // dk | dv
    in_ = Tensor::empty({capacity});
    out_[0] = Tensor::empty({capacity});
    out_[1] = Tensor::empty({capacity});
  }

  // Before step i's compute: start receiving the accumulator of the chunk held at step i.
  void expect(int i, int owner) {
    if (i > 0) recv_ = setup_.ring.irecv(in_.raw(), bytes(owner), prev(), kGradTag);
  }

  // After step i's compute: accumulator += (dk, dv) of the chunk (null: this rank contributes 0),
  // then send it on.
  void add_and_pass(int i, int owner, const attention::Grads* grads) {
    Tensor& out = out_[i % 2];
    wait(send_[i % 2]);  // the send from this buffer two steps ago
    wait(recv_);
    const int64_t n = batch_ * rotation_.length_of(owner) * row_;
    const float* in = i > 0 ? in_.data<float>() : nullptr;
    const Tensor dk = grads ? grads->dk.contiguous() : Tensor();
    const Tensor dv = grads ? grads->dv.contiguous() : Tensor();
    sum_into(out.data<float>(), in, grads ? dk.data<float>() : nullptr, n);
    sum_into(out.data<float>() + n, in ? in + n : nullptr, grads ? dv.data<float>() : nullptr, n);
    send_[i % 2] = setup_.ring.isend(out.raw(), bytes(owner), next(), kGradTag);
    setup_.stats.bytes_sent += int64_t(bytes(owner));
  }

  // After the last step: the final hop delivers this rank's own accumulator.
  void come_home(int owner, Tensor& dk, Tensor& dv) {
    recv_ = setup_.ring.irecv(in_.raw(), bytes(owner), prev(), kGradTag);
    wait(recv_);
    wait(send_[0]);
    wait(send_[1]);
    const int64_t n = batch_ * rotation_.length_of(owner) * row_;
    std::copy(in_.data<float>(), in_.data<float>() + n, dk.data<float>());
    std::copy(in_.data<float>() + n, in_.data<float>() + 2 * n, dv.data<float>());
  }

 private:
  size_t bytes(int owner) const {
    return size_t(2 * batch_ * rotation_.length_of(owner) * row_) * sizeof(float);
  }
  int next() const { return (setup_.ring.rank() + 1) % setup_.ring.size(); }
  int prev() const { return (setup_.ring.rank() - 1 + setup_.ring.size()) % setup_.ring.size(); }
  void wait(std::unique_ptr<comm::Request>& request) {
    if (!request) return;
    const auto start = std::chrono::steady_clock::now();
    request->wait();
    setup_.stats.wait_seconds += seconds_since(start);
    request.reset();
  }

  const RingSetup& setup_;
  const KvRotation& rotation_;
  int64_t row_, batch_;
  Tensor in_, out_[2];
  std::unique_ptr<comm::Request> recv_, send_[2];
};

// One contiguous run of a call's query rows or of a chunk's keys: where it starts in the local
// tensor, where in the global sequence, and how long.
struct Run {
  int64_t local = 0, global = 0, length = 0;
};

// The runs of `length` local tokens held as `ranges`, in order; without a rule one run of all.
std::vector<Run> runs_of(const std::vector<TokenRange>& ranges, int64_t length, bool rule) {
  if (!rule) return {{0, 0, length}};
  std::vector<Run> runs;
  int64_t local = 0;
  for (const TokenRange& r : ranges) {
    runs.push_back({local, r.start, r.length});
    local += r.length;
  }
  CPDIT_CHECK(local == length, internal, "ring attention: ", length, " tokens held, but their layout gives ", local);
  return runs;
}

// Rows [run.local, run.local + run.length) of t (B, S, ...) as a contiguous tensor; t itself when
// the run is all of it.
Tensor rows(const Tensor& t, const Run& run) {
  if (run.local == 0 && run.length == t.size(1)) return t;
  return t.narrow(1, run.local, run.length).contiguous();
}

// The chunk's mask for the call on one query run and one key run.
attention::Mask call_mask(const attention::Mask& chunk_mask, const Run& queries, const Run& keys) {
  attention::Mask m = chunk_mask;
  m.q_offset = queries.global;
  m.k_offset = keys.global;
  if (m.kind == attention::MaskKind::key_padding) m.tensor = rows(m.tensor, keys);
  return m;
}

// Whether the call on these runs has anything to compute.
bool visible(const Run& queries, const Run& keys, const attention::Mask& mask) {
  return queries.length > 0 && keys.length > 0 && !mask.rule_hides_all(queries.length);
}

// dst rows [run.local, run.local + run.length) += src, for f32 dst (B, S, ...), src (B, length, ...).
void add_rows(Tensor& dst, const Run& run, const Tensor& src) {
  const Tensor s = src.contiguous();
  const int64_t batch = dst.size(0), seq = dst.size(1);
  int64_t width = 1;
  for (int d = 2; d < dst.dim(); ++d) width *= dst.size(d);
  for (int64_t b = 0; b < batch; ++b) {
    float* out = dst.data<float>() + (b * seq + run.local) * width;
    sum_into(out, out, s.data<float>() + b * run.length * width, run.length * width);
  }
}

// Joins the partial results of consecutive query runs along the tokens.
attention::Result joined(const std::vector<PartialAttention>& parts) {
  if (parts.size() == 1) return {parts[0].out, parts[0].lse};
  std::vector<Tensor> outs, lses;
  for (const PartialAttention& p : parts) {
    outs.push_back(p.out);
    lses.push_back(p.lse);
  }
  return {cat(outs, 1), cat(lses, 2)};
}

}  // namespace

attention::Result ring_forward(const RingSetup& setup, const Tensor& q, const Tensor& k,
                               const Tensor& v, const attention::Mask& mask, const RingPositions& positions) {
  const Tensor qc = compute_dtype(q, setup.convert_to_fp32);
  if (setup.ring.size() == 1)  // one row holds the whole sequence: positions start at 0
    return setup.backend.forward(qc, compute_dtype(k, setup.convert_to_fp32),
                                 compute_dtype(v, setup.convert_to_fp32), mask, setup.scale);
  const int64_t B = q.size(0), S = q.size(1), H = q.size(2), D = q.size(3);
  const std::vector<Run> query_runs = runs_of(positions.queries, S, mask.has_rule());
  std::vector<PartialAttention> acc;
  for (const Run& run : query_runs) acc.push_back(PartialAttention::empty(B, run.length, H, D));
  KvRotation rotation(setup.ring, setup.method, {setup.ring.rank(), k, v, mask}, setup.stats);
  for (int i = 0; i < rotation.steps(); ++i) {
    const KvChunk chunk = rotation.begin_step(i);
    const Tensor kc = compute_dtype(chunk.k, setup.convert_to_fp32);
    const Tensor vc = compute_dtype(chunk.v, setup.convert_to_fp32);
    const std::vector<Run> key_runs =
        runs_of(mask.has_rule() ? positions.keys[size_t(chunk.owner)] : std::vector<TokenRange>{}, chunk.length(),
                mask.has_rule());
    for (size_t a = 0; a < query_runs.size(); ++a)
      for (const Run& keys : key_runs) {
        const attention::Mask m = call_mask(chunk.mask, query_runs[a], keys);
        if (!visible(query_runs[a], keys, m)) continue;
        const attention::Result part =
            setup.backend.forward(rows(qc, query_runs[a]), rows(kc, keys), rows(vc, keys), m, setup.scale);
        merge_into(acc[a], part.out, part.lse);
      }
    rotation.end_step(i);
  }
  const attention::Result all = joined(acc);
  return {setup.convert_to_fp32 ? all.out : all.out.to(q.dtype()), all.lse};
}

attention::Grads ring_backward(const RingSetup& setup, const Tensor& dout, const Tensor& q,
                               const Tensor& k, const Tensor& v, const Tensor& out,
                               const Tensor& lse, const attention::Mask& mask,
                               const RingPositions& positions) {
  const bool fp32 = setup.convert_to_fp32;
  const Tensor qc = compute_dtype(q, fp32), doutc = compute_dtype(dout, fp32);
  const Tensor outc = compute_dtype(out, fp32);
  if (setup.ring.size() == 1)
    return setup.backend.backward(doutc, qc, compute_dtype(k, fp32), compute_dtype(v, fp32), outc,
                                  lse, mask, setup.scale);
  const int64_t B = q.size(0), S = q.size(1);
  const std::vector<Run> query_runs = runs_of(positions.queries, S, mask.has_rule());
  // Each query run's rows of what the backward reads per query: q, dout, out and lse (B, H, s).
  std::vector<Tensor> run_q, run_dout, run_out, run_lse;
  for (const Run& run : query_runs) {
    run_q.push_back(rows(qc, run));
    run_dout.push_back(rows(doutc, run));
    run_out.push_back(rows(outc, run));
    run_lse.push_back(run.length == S ? lse : lse.narrow(2, run.local, run.length).contiguous());
  }
  Tensor dq = Tensor::zeros(q.shape());
  KvRotation rotation(setup.ring, setup.method, {setup.ring.rank(), k, v, mask}, setup.stats);
  TravellingGrads travelling(setup, rotation, B, k.size(2), k.size(3));
  for (int i = 0; i < rotation.steps(); ++i) {
    const KvChunk chunk = rotation.begin_step(i);
    travelling.expect(i, chunk.owner);
    const Tensor kc = compute_dtype(chunk.k, fp32), vc = compute_dtype(chunk.v, fp32);
    const std::vector<Run> key_runs =
        runs_of(mask.has_rule() ? positions.keys[size_t(chunk.owner)] : std::vector<TokenRange>{}, chunk.length(),
                mask.has_rule());
    // The chunk's dK and dV from every call on it; zero where no call saw its keys.
    attention::Grads chunk_grads;
    bool computed = false;
    for (size_t a = 0; a < query_runs.size(); ++a)
      for (const Run& keys : key_runs) {
        const attention::Mask m = call_mask(chunk.mask, query_runs[a], keys);
        if (!visible(query_runs[a], keys, m)) continue;
        const attention::Grads part = setup.backend.backward(run_dout[a], run_q[a], rows(kc, keys), rows(vc, keys),
                                                             run_out[a], run_lse[a], m, setup.scale);
        add_rows(dq, query_runs[a], part.dq);
        if (!computed) {
          chunk_grads.dk = Tensor::zeros(chunk.k.shape());
          chunk_grads.dv = Tensor::zeros(chunk.v.shape());
          computed = true;
        }
        add_rows(chunk_grads.dk, keys, part.dk);
        add_rows(chunk_grads.dv, keys, part.dv);
      }
    travelling.add_and_pass(i, chunk.owner, computed ? &chunk_grads : nullptr);
    rotation.end_step(i);
  }
  Tensor dk = Tensor::empty(k.shape()), dv = Tensor::empty(v.shape());
  travelling.come_home(setup.ring.rank(), dk, dv);
  return {dq, dk, dv};
}

}  // namespace cpdit::parallel
