// Tensor conveniences: uneven gathers, the Ulysses all-to-all and its inverse, reduce-scatter, and
// point-to-point of tensors. Each rank can build every rank's input, so the expected result is
// built locally with cat / narrow.
#include "checks.hpp"

#include <cpdit/comm/tensor_ops.hpp>
#include <cpdit/core/tensor.hpp>

#include <map>
#include <string>

namespace cpdit::comm::testing {

namespace {

// A tensor whose values depend on `seed` and the element index.
Tensor filled(const Shape& shape, int seed) {
  Tensor t = Tensor::empty(shape, DType::f32);
  float* p = t.data<float>();
  for (int64_t i = 0; i < t.numel(); ++i) p[i] = pattern(seed, 0, size_t(i));
  return t;
}

bool same(const Tensor& a, const Tensor& b) { return a.shape() == b.shape() && max_abs_diff(a, b) == 0.0; }

void check_tensor_all_gather(Communicator& comm) {
  const int n = comm.size(), me = comm.rank();
  auto rows = [](int r) { return int64_t(r == 1 ? 0 : r + 2); };  // uneven, one rank empty
  // Along dim 1 with a leading dim of 2: blocks interleave, so the result is laid out by cat.
  std::vector<Tensor> parts;
  for (int p = 0; p < n; ++p) parts.push_back(filled({2, rows(p), 3}, p));
  Tensor gathered = all_gather(comm, parts[me], 1);
  COMM_EXPECT(comm, same(gathered, cat(parts, 1)), gathered.describe());
  // Along dim 0 (blocks land in place), also from a non-contiguous view and a negative dim.
  std::vector<Tensor> leading;
  for (int p = 0; p < n; ++p) leading.push_back(filled({rows(p), 4}, p + 10));
  COMM_EXPECT(comm, same(all_gather(comm, leading[me], 0), cat(leading, 0)));
  Tensor strided = cat({leading[me], leading[me]}, 1).narrow(1, 0, 4);
  COMM_EXPECT(comm, same(all_gather(comm, strided, -2), cat(leading, 0)));
  if (n > 1) {
    Tensor wrong = filled({2, 1, me == 0 ? 3 : 4}, 0);
    expect_error([&] { all_gather(comm, wrong, 1); }, ErrorKind::invalid_argument, {"only dim 1 may differ"});
  }
}

// Ulysses: (B, S_local, H, D) -> (B, S, H_local, D) and back, with S and H not divisible by N.
void check_tensor_all_to_all(Communicator& comm) {
  const int n = comm.size(), me = comm.rank();
  for (int64_t batch : {1, 2}) {
    const int64_t S = 7, H = 5, D = 4;
    Tensor full = filled({batch, S, H, D}, 3);
    auto seq = split_sizes(S, n);
    auto heads = split_sizes(H, n);
    Tensor local = full.narrow(1, split_offset(S, n, me), seq[me]).contiguous();
    Tensor by_heads = all_to_all(comm, local, 2, 1);
    Tensor expected = full.narrow(2, split_offset(H, n, me), heads[me]).contiguous();
    COMM_EXPECT(comm, same(by_heads, expected), "batch ", batch, ": ", by_heads.describe());
    Tensor back = all_to_all(comm, by_heads, 1, 2, seq);
    COMM_EXPECT(comm, same(back, local), "batch ", batch, " round trip");
  }
  expect_error([&] { all_to_all(comm, filled({3, 2}, 0), 0, 1, {1}); }, ErrorKind::invalid_argument,
               {"split sizes"});
}

void check_tensor_reduce_scatter(Communicator& comm) {
  const int n = comm.size(), me = comm.rank();
  for (int64_t rows : {int64_t(2 * n), int64_t(2 * n + 1)}) {  // even (direct) and uneven
    for (int dim : {0, 1}) {
      Shape shape = dim == 0 ? Shape{rows, 3} : Shape{3, rows};
      Tensor mine = filled(shape, me);
      Tensor sum = Tensor::zeros(shape);
      for (int p = 0; p < n; ++p) {
        Tensor other = filled(shape, p);
        float* s = sum.data<float>();
        const float* o = other.data<float>();
        for (int64_t i = 0; i < sum.numel(); ++i) s[i] += o[i];
      }
      Tensor part = reduce_scatter(comm, mine, dim, ReduceOp::sum);
      Tensor expected = sum.narrow(dim, split_offset(rows, n, me), split_sizes(rows, n)[me]).contiguous();
      COMM_EXPECT(comm, same(part, expected), "rows ", rows, " dim ", dim);
    }
  }
  Tensor t = filled({5}, me);
  all_reduce_(comm, t, ReduceOp::max);
  COMM_EXPECT(comm, same(t, filled({5}, n - 1)));  // the pattern grows with the seed here
}

void check_tensor_p2p_and_broadcast(Communicator& comm) {
  const int n = comm.size(), me = comm.rank();
  const int next = (me + 1) % n, previous = (me + n - 1) % n;
  Tensor b = me == 0 ? filled({3, 5}, 42).to(DType::bf16) : Tensor::zeros({3, 5}, DType::bf16);
  broadcast_(comm, b, 0);
  COMM_EXPECT(comm, same(b, filled({3, 5}, 42).to(DType::bf16)));

  // Non-contiguous source: packed before sending.
  Tensor wide = filled({4, 6}, me);
  Tensor view = wide.narrow(1, 1, 3);
  auto sending = isend(comm, view, next, 1);
  Tensor got = Tensor::empty({4, 3});
  auto receiving = irecv(comm, got, previous, 1);
  receiving->wait();
  sending->wait();
  COMM_EXPECT(comm, same(got, filled({4, 6}, previous).narrow(1, 1, 3)));

  if (n == 1) return;  // a blocking send to oneself has nobody to receive it
  Tensor blocking = Tensor::empty({4, 3});
  if (me % 2 == 0) {
    send(comm, view, next, 2);
    recv(comm, blocking, previous, 2);
  } else {
    recv(comm, blocking, previous, 2);
    send(comm, view, next, 2);
  }
  COMM_EXPECT(comm, same(blocking, got));
}

// Bytes, then a map of named tensors, from the last rank: every rank ends with the root's bytes, and
// with its names, dtypes, shapes and values (a view packed first, an empty tensor kept), whatever it
// held before.
void check_tensor_map_broadcast(Communicator& comm) {
  const int n = comm.size(), me = comm.rank(), root = n - 1;
  const std::string sent("from the root\0with a zero byte", 30);
  std::string bytes = me == root ? sent : "stale";
  broadcast_bytes(comm, bytes, root);
  COMM_EXPECT(comm, bytes == sent, bytes.size(), " bytes");

  std::map<std::string, Tensor> expected{{"prompt_embeds", filled({1, 4, 3}, 7)},
                                         {"pooled", filled({1, 5}, 8).to(DType::bf16)},
                                         {"view", filled({4, 6}, 9).narrow(1, 2, 3)},
                                         {"empty", Tensor::empty({0, 2})}};
  std::map<std::string, Tensor> mine;
  if (me == root) mine = expected;
  else mine["stale"] = filled({2}, me);
  broadcast_tensors(comm, mine, root);
  COMM_EXPECT(comm, mine.size() == expected.size(), mine.size(), " tensors");
  for (const auto& [name, want] : expected) {
    COMM_EXPECT(comm, mine.count(name), "no ", name);
    const Tensor& got = mine.at(name);
    COMM_EXPECT(comm, got.dtype() == want.dtype() && same(got.to(DType::f32), want.to(DType::f32)), name, " is ",
                got.describe());
  }
}

}  // namespace

void add_tensor_checks(std::vector<Check>& checks) {
  checks.push_back({"tensor_all_gather", check_tensor_all_gather});
  checks.push_back({"tensor_all_to_all", check_tensor_all_to_all});
  checks.push_back({"tensor_reduce_scatter", check_tensor_reduce_scatter});
  checks.push_back({"tensor_p2p_and_broadcast", check_tensor_p2p_and_broadcast});
  checks.push_back({"tensor_map_broadcast", check_tensor_map_broadcast});
}

}  // namespace cpdit::comm::testing
