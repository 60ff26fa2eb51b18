// Collectives on bytes: equal and uneven sizes, zero sizes, every reduction dtype, every root.
// Expected values are computed from the closed-form pattern of every rank's input.
#include "checks.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <numeric>

namespace cpdit::comm::testing {

namespace {

void check_all_gather(Communicator& comm) {
  const int n = comm.size(), me = comm.rank();
  const size_t count = 257;
  std::vector<float> mine = pattern_block(me, -1, count), all(count * n);
  comm.all_gather(mine.data(), count * 4, all.data());
  for (int p = 0; p < n; ++p)
    COMM_EXPECT(comm,
                std::equal(all.begin() + p * count, all.begin() + (p + 1) * count, pattern_block(p, -1, count).begin()),
                "block of rank ", p);
  // In place: this rank's block already sits in the result.
  std::vector<float> in_place(count * n);
  std::copy(mine.begin(), mine.end(), in_place.begin() + me * count);
  comm.all_gather(in_place.data() + me * count, count * 4, in_place.data());
  COMM_EXPECT(comm, in_place == all);
}

// Uneven per-rank sizes, some of them zero.
void check_all_gather_v(Communicator& comm) {
  const int n = comm.size(), me = comm.rank();
  auto length = [](int r) { return size_t(r % 3 == 1 ? 0 : r * 5 + 2); };
  std::vector<size_t> bytes;
  for (int p = 0; p < n; ++p) bytes.push_back(length(p) * 4);
  std::vector<float> mine = pattern_block(me, -1, length(me));
  std::vector<float> all(std::accumulate(bytes.begin(), bytes.end(), size_t{0}) / 4);
  comm.all_gather_v(mine.data(), mine.size() * 4, all.data(), bytes);
  std::vector<float> expected;
  for (int p = 0; p < n; ++p) {
    auto b = pattern_block(p, -1, length(p));
    expected.insert(expected.end(), b.begin(), b.end());
  }
  COMM_EXPECT(comm, all == expected);
}

void check_all_to_all(Communicator& comm) {
  const int n = comm.size(), me = comm.rank();
  const size_t count = 33;
  std::vector<float> out, in(count * n);
  for (int p = 0; p < n; ++p) {
    auto b = pattern_block(me, p, count);
    out.insert(out.end(), b.begin(), b.end());
  }
  comm.all_to_all(out.data(), in.data(), count * 4);
  for (int p = 0; p < n; ++p)
    COMM_EXPECT(comm,
                std::equal(in.begin() + p * count, in.begin() + (p + 1) * count, pattern_block(p, me, count).begin()),
                "block from rank ", p);
}

// Variable splits, zero-sized blocks included (every rank sends nothing to rank 1).
void check_all_to_all_v(Communicator& comm) {
  const int n = comm.size(), me = comm.rank();
  auto length = [](int source, int destination) {
    return destination == 1 ? size_t(0) : size_t(source * 3 + destination + 1);
  };
  std::vector<size_t> send_bytes, recv_bytes;
  std::vector<float> out;
  for (int p = 0; p < n; ++p) {
    auto b = pattern_block(me, p, length(me, p));
    out.insert(out.end(), b.begin(), b.end());
    send_bytes.push_back(b.size() * 4);
    recv_bytes.push_back(length(p, me) * 4);
  }
  std::vector<float> in(std::accumulate(recv_bytes.begin(), recv_bytes.end(), size_t{0}) / 4), expected;
  comm.all_to_all_v(out.data(), send_bytes, in.data(), recv_bytes);
  for (int p = 0; p < n; ++p) {
    auto b = pattern_block(p, me, length(p, me));
    expected.insert(expected.end(), b.begin(), b.end());
  }
  COMM_EXPECT(comm, in == expected);
}

// Every rank must hold bitwise the same result.
void expect_same_everywhere(Communicator& comm, const void* data, size_t bytes) {
  std::vector<std::byte> all(bytes * comm.size());
  comm.all_gather(data, bytes, all.data());
  for (int p = 0; p < comm.size(); ++p)
    COMM_EXPECT(comm, std::memcmp(all.data() + p * bytes, data, bytes) == 0, "result of rank ", p, " differs");
}

// Non-integer values, so the sum rounds; built from correctly rounded operations only, so every
// compilation of this function yields the same bits (vectorised sinf does not).
float input(int rank, size_t i) { return float((i * 7 + size_t(rank) * 13) % 101) / 7.0f - 3.1f; }

void check_all_reduce_f32(Communicator& comm) {
  const int n = comm.size();
  const size_t count = 1001;  // not a multiple of the rank count
  for (ReduceOp op : {ReduceOp::sum, ReduceOp::max}) {
    std::vector<float> data(count);
    for (size_t i = 0; i < count; ++i) data[i] = input(comm.rank(), i);
    comm.all_reduce(data.data(), count, DType::f32, op);
    for (size_t i = 0; i < count; ++i) {
      double expected = op == ReduceOp::sum ? 0.0 : -1e30;
      for (int p = 0; p < n; ++p)
        expected = op == ReduceOp::sum ? expected + input(p, i) : std::max(expected, double(input(p, i)));
      COMM_EXPECT(comm, std::abs(data[i] - expected) <= 1e-5, reduce_op_name(op), " element ", i, ": ", data[i],
                  " vs ", expected);
    }
    expect_same_everywhere(comm, data.data(), count * 4);
  }
  comm.all_reduce(nullptr, 0, DType::f32, ReduceOp::sum);  // nothing to reduce is fine
}

void check_all_reduce_i64_and_half(Communicator& comm) {
  const int n = comm.size(), me = comm.rank();
  std::vector<int64_t> ints(7);
  for (size_t i = 0; i < ints.size(); ++i) ints[i] = (int64_t(1) << 40) * (me + 1) + int64_t(i);
  comm.all_reduce(ints.data(), ints.size(), DType::i64, ReduceOp::sum);
  for (size_t i = 0; i < ints.size(); ++i)
    COMM_EXPECT(comm, ints[i] == (int64_t(1) << 40) * (n * (n + 1) / 2) + int64_t(i) * n);

  // Small integers are exact in bf16 and f16, so the expected values are exact too.
  for (DType dtype : {DType::bf16, DType::f16}) {
    std::vector<float> wide(19);
    for (size_t i = 0; i < wide.size(); ++i) wide[i] = float(me + int(i));
    std::vector<uint16_t> half(wide.size());
    convert(wide.data(), DType::f32, half.data(), dtype, wide.size());
    comm.all_reduce(half.data(), half.size(), dtype, ReduceOp::max);
    convert(half.data(), dtype, wide.data(), DType::f32, wide.size());
    for (size_t i = 0; i < wide.size(); ++i) COMM_EXPECT(comm, wide[i] == float(n - 1 + int(i)), dtype_name(dtype));
  }
  expect_error([&] { comm.all_reduce(ints.data(), 1, DType::boolean, ReduceOp::sum); }, ErrorKind::unsupported,
               {"bool"});
}

void check_reduce_scatter(Communicator& comm) {
  const int n = comm.size(), me = comm.rank();
  const size_t per_rank = 65;
  for (ReduceOp op : {ReduceOp::sum, ReduceOp::max}) {
    std::vector<float> send(per_rank * n), recv(per_rank);
    for (size_t i = 0; i < send.size(); ++i) send[i] = pattern(me, 0, i);
    comm.reduce_scatter(send.data(), recv.data(), per_rank, DType::f32, op);
    for (size_t i = 0; i < per_rank; ++i) {
      float expected = op == ReduceOp::sum ? 0.f : -1e30f;
      for (int p = 0; p < n; ++p) {
        float x = pattern(p, 0, me * per_rank + i);
        expected = op == ReduceOp::sum ? expected + x : std::max(expected, x);
      }
      COMM_EXPECT(comm, recv[i] == expected, reduce_op_name(op), " element ", i);
    }
  }
}

void check_broadcast(Communicator& comm) {
  for (int root = 0; root < comm.size(); ++root) {
    std::vector<float> data = comm.rank() == root ? pattern_block(root, -1, 300) : std::vector<float>(300, -1.f);
    comm.broadcast(data.data(), data.size() * 4, root);
    COMM_EXPECT(comm, data == pattern_block(root, -1, 300), "from root ", root);
  }
  comm.broadcast(nullptr, 0, 0);
}

// Barriers back to back and between other collectives (a rank leaving a barrier first must not
// disturb the others still in it), and interleaved with point-to-point.
void check_barrier(Communicator& comm) {
  for (int i = 0; i < 200; ++i) {
    comm.barrier();
    int64_t one = 1;
    comm.all_reduce(&one, 1, DType::i64, ReduceOp::sum);
    COMM_EXPECT(comm, one == comm.size());
  }
  const int n = comm.size(), me = comm.rank();
  float value = float(me), got = -1;
  auto sending = comm.isend(&value, 4, (me + 1) % n, 20);
  comm.barrier();
  comm.recv(&got, 4, (me + n - 1) % n, 20);
  sending->wait();
  COMM_EXPECT(comm, got == float((me + n - 1) % n));
}

}  // namespace

void add_collective_checks(std::vector<Check>& checks) {
  checks.push_back({"all_gather", check_all_gather});
  checks.push_back({"all_gather_v", check_all_gather_v});
  checks.push_back({"all_to_all", check_all_to_all});
  checks.push_back({"all_to_all_v", check_all_to_all_v});
  checks.push_back({"all_reduce_f32", check_all_reduce_f32});
  checks.push_back({"all_reduce_i64_and_half", check_all_reduce_i64_and_half});
  checks.push_back({"reduce_scatter", check_reduce_scatter});
  checks.push_back({"broadcast", check_broadcast});
  checks.push_back({"barrier", check_barrier});
}

}  // namespace cpdit::comm::testing
