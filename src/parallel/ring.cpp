// Ring attention: forward merges one partial result per KV chunk by LSE; backward accumulates dq
// locally while each chunk's dK/dV accumulator travels with the chunk and comes home at the end
// (correct for any ring size). A chunk that is empty, or whose keys a position rule
// hides from every local query (the future under a causal rule), is not computed: it would add
// nothing to the output and nothing to any gradient.
#include "parallel/ring.hpp"

#include <cpdit/core/error.hpp>
#include <cpdit/core/threads.hpp>
#include <cpdit/parallel/lse_merge.hpp>

#include <chrono>
#include <memory>

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

}  // namespace

attention::Result ring_forward(const RingSetup& setup, const Tensor& q, const Tensor& k,
                               const Tensor& v, const attention::Mask& mask) {
  const Tensor qc = compute_dtype(q, setup.convert_to_fp32);
  if (setup.ring.size() == 1)
    return setup.backend.forward(qc, compute_dtype(k, setup.convert_to_fp32),
                                 compute_dtype(v, setup.convert_to_fp32), mask, setup.scale);
  const int64_t B = q.size(0), S = q.size(1), H = q.size(2), D = q.size(3);
  PartialAttention acc = PartialAttention::empty(B, S, H, D);
  KvRotation rotation(setup.ring, setup.method, {setup.ring.rank(), k, v, mask}, setup.stats);
  for (int i = 0; i < rotation.steps(); ++i) {
    const KvChunk chunk = rotation.begin_step(i);
    if (chunk.length() > 0 && S > 0 && !chunk.mask.rule_hides_all(S)) {
      const attention::Result part =
          setup.backend.forward(qc, compute_dtype(chunk.k, setup.convert_to_fp32),
                                compute_dtype(chunk.v, setup.convert_to_fp32), chunk.mask, setup.scale);
      merge_into(acc, part.out, part.lse);
    }
    rotation.end_step(i);
  }
  return {setup.convert_to_fp32 ? acc.out : acc.out.to(q.dtype()), acc.lse};
}

attention::Grads ring_backward(const RingSetup& setup, const Tensor& dout, const Tensor& q,
                               const Tensor& k, const Tensor& v, const Tensor& out,
                               const Tensor& lse, const attention::Mask& mask) {
  const bool fp32 = setup.convert_to_fp32;
  const Tensor qc = compute_dtype(q, fp32), doutc = compute_dtype(dout, fp32);
  const Tensor outc = compute_dtype(out, fp32);
  if (setup.ring.size() == 1)
    return setup.backend.backward(doutc, qc, compute_dtype(k, fp32), compute_dtype(v, fp32), outc,
                                  lse, mask, setup.scale);
  const int64_t B = q.size(0), S = q.size(1);
  Tensor dq = Tensor::zeros(q.shape());
  KvRotation rotation(setup.ring, setup.method, {setup.ring.rank(), k, v, mask}, setup.stats);
  TravellingGrads travelling(setup, rotation, B, k.size(2), k.size(3));
  for (int i = 0; i < rotation.steps(); ++i) {
    const KvChunk chunk = rotation.begin_step(i);
    travelling.expect(i, chunk.owner);
    if (chunk.length() > 0 && S > 0 && !chunk.mask.rule_hides_all(S)) {
      const attention::Grads part =
          setup.backend.backward(doutc, qc, compute_dtype(chunk.k, fp32),
                                 compute_dtype(chunk.v, fp32), outc, lse, chunk.mask, setup.scale);
      sum_into(dq.data<float>(), dq.data<float>(), part.dq.contiguous().data<float>(), dq.numel());
      travelling.add_and_pass(i, chunk.owner, &part);
    } else {
      travelling.add_and_pass(i, chunk.owner, nullptr);
    }
    rotation.end_step(i);
  }
  Tensor dk = Tensor::empty(k.shape()), dv = Tensor::empty(v.shape());
  travelling.come_home(setup.ring.rank(), dk, dv);
  return {dq, dk, dv};
}

}  // namespace cpdit::parallel
