// Point-to-point: pairs, the ring rotation ring attention uses, ordering, sizes 0 to 64 MiB,
// non-blocking completion, size mismatch and timeout.
#include "checks.hpp"

#include <chrono>
#include <cstring>
#include <memory>
#include <thread>

namespace cpdit::comm::testing {

namespace {

// Every rank sends a message of its own length to every rank (itself included) and checks what
// it receives: all posted non-blocking first, so no order of ranks can deadlock.
void check_all_pairs(Communicator& comm) {
  const int n = comm.size(), me = comm.rank();
  auto length = [](int source, int destination) { return size_t(source * 7 + destination * 3 + 1); };
  std::vector<std::vector<float>> out(n), in(n);
  std::vector<std::unique_ptr<Request>> requests;
  for (int p = 0; p < n; ++p) {
    in[p].resize(length(p, me));
    requests.push_back(comm.irecv(in[p].data(), in[p].size() * 4, p, 5));
  }
  for (int p = 0; p < n; ++p) {
    out[p] = pattern_block(me, p, length(me, p));
    requests.push_back(comm.isend(out[p].data(), out[p].size() * 4, p, 5));
  }
  for (auto& r : requests) r->wait();
  for (int p = 0; p < n; ++p) COMM_EXPECT(comm, in[p] == pattern_block(p, me, length(p, me)), "from rank ", p);
}

// Blocking send / recv in the order ring attention would: even ranks send first.
void check_blocking_ring(Communicator& comm) {
  const int n = comm.size(), me = comm.rank();
  if (n == 1) return;
  const int next = (me + 1) % n, previous = (me + n - 1) % n;
  std::vector<float> out = pattern_block(me, next, 1000), in(1000);
  if (me % 2 == 0) {
    comm.send(out.data(), out.size() * 4, next, 1);
    comm.recv(in.data(), in.size() * 4, previous, 1);
  } else {
    comm.recv(in.data(), in.size() * 4, previous, 1);
    comm.send(out.data(), out.size() * 4, next, 1);
  }
  COMM_EXPECT(comm, in == pattern_block(previous, me, 1000));
}

// Ring rotation with non-blocking calls and double buffering: after step s a rank holds the block
// of rank (me - s) mod n; after n steps its own block is back.
void check_ring_rotation(Communicator& comm) {
  const int n = comm.size(), me = comm.rank();
  const int next = (me + 1) % n, previous = (me + n - 1) % n;
  std::vector<float> current = pattern_block(me, me, 4099), incoming(4099);
  for (int step = 1; step <= n; ++step) {
    auto receiving = comm.irecv(incoming.data(), incoming.size() * 4, previous, 100 + step);
    auto sending = comm.isend(current.data(), current.size() * 4, next, 100 + step);
    sending->wait();
    receiving->wait();
    std::swap(current, incoming);
    int owner = ((me - step) % n + n) % n;
    COMM_EXPECT(comm, current == pattern_block(owner, owner, 4099), "at step ", step);
  }
}

// Messages of one (source, tag) arrive in order; different tags are matched independently.
void check_ordering_and_tags(Communicator& comm) {
  const int n = comm.size(), me = comm.rank();
  const int next = (me + 1) % n, previous = (me + n - 1) % n;
  float first = float(me * 10 + 1), second = float(me * 10 + 2), other = float(me * 10 + 3);
  auto s1 = comm.isend(&first, 4, next, 7);
  auto s2 = comm.isend(&second, 4, next, 7);
  auto s3 = comm.isend(&other, 4, next, 8);
  float got_other = 0, got_first = 0, got_second = 0;
  comm.recv(&got_other, 4, previous, 8);  // tag 8 although tag 7 messages were posted before it
  comm.recv(&got_first, 4, previous, 7);
  comm.recv(&got_second, 4, previous, 7);
  for (auto* r : {s1.get(), s2.get(), s3.get()}) r->wait();
  COMM_EXPECT(comm, got_first == float(previous * 10 + 1) && got_second == float(previous * 10 + 2) &&
                        got_other == float(previous * 10 + 3));
}

void check_zero_bytes(Communicator& comm) {
  const int n = comm.size(), me = comm.rank();
  const int next = (me + 1) % n, previous = (me + n - 1) % n;
  auto sending = comm.isend(nullptr, 0, next, 3);
  comm.recv(nullptr, 0, previous, 3);
  sending->wait();
  // A zero-byte message is still a message: it keeps its place in the order.
  float value = float(me);
  auto empty = comm.isend(nullptr, 0, next, 4);
  auto full = comm.isend(&value, 4, next, 4);
  float got = -1;
  comm.recv(nullptr, 0, previous, 4);
  comm.recv(&got, 4, previous, 4);
  empty->wait();
  full->wait();
  COMM_EXPECT(comm, got == float(previous));
}

// 64 MiB from rank 0 to the last rank (to itself on one rank).
void check_64_mib(Communicator& comm) {
  const int last = comm.size() - 1;
  const size_t count = (size_t(64) << 20) / 4;
  auto receive_and_check = [&] {
    std::vector<float> in(count);
    comm.recv(in.data(), count * 4, 0, 9);
    size_t wrong = 0;
    for (size_t i = 0; i < count; ++i) wrong += in[i] != pattern(0, last, i);
    COMM_EXPECT(comm, wrong == 0, wrong, " wrong floats");
  };
  if (comm.rank() == 0) {
    std::vector<float> out = pattern_block(0, last, count);
    auto sending = comm.isend(out.data(), count * 4, last, 9);
    if (last == 0) receive_and_check();
    sending->wait();
  } else if (comm.rank() == last) {
    receive_and_check();
  }
}

// test() reports completion without blocking: false while the sender has not sent.
void check_test_polls(Communicator& comm) {
  const int n = comm.size(), me = comm.rank();
  const int next = (me + 1) % n, previous = (me + n - 1) % n;
  float value = float(me) + 0.5f, got = 0;
  auto receiving = comm.irecv(&got, 4, previous, 11);
  COMM_EXPECT(comm, !receiving->test(), "before the peer sent");
  comm.barrier();
  auto sending = comm.isend(&value, 4, next, 11);
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (!receiving->test()) {
    COMM_EXPECT(comm, std::chrono::steady_clock::now() < deadline, "test() to report completion");
    std::this_thread::yield();
  }
  COMM_EXPECT(comm, receiving->test(), "test() to stay true");
  sending->wait();
  COMM_EXPECT(comm, got == float(previous) + 0.5f);
}

// A receive that asks for more bytes than were sent fails on the receiver.
void check_size_mismatch(Communicator& comm) {
  const int n = comm.size(), me = comm.rank();
  const int next = (me + 1) % n, previous = (me + n - 1) % n;
  float value = 1, got[2];
  auto sending = comm.isend(&value, 4, next, 12);
  expect_error([&] { comm.recv(got, 8, previous, 12); }, ErrorKind::comm, {"bytes"});
  try {
    sending->wait();  // the local engine reports the mismatch to the sender too
  } catch (const Error&) {
  }
  comm.barrier();
}

// A receive nobody answers times out, naming the operation, the peer and the rank; the
// communicator stays usable afterwards.
void check_timeout(Communicator& comm) {
  const int previous = (comm.rank() + comm.size() - 1) % comm.size();
  const auto saved = comm.timeout();
  comm.set_timeout(std::chrono::milliseconds(150));
  float got = 0;
  expect_error([&] { comm.recv(&got, 4, previous, 999); }, ErrorKind::timeout,
               {detail::concat("rank ", comm.rank(), ": recv"), detail::concat("from rank ", previous), "timed out",
                "CPDIT_COMM_TIMEOUT_S"});
  comm.set_timeout(saved);
  comm.barrier();
  float value = float(comm.rank());
  auto sending = comm.isend(&value, 4, (comm.rank() + 1) % comm.size(), 999);
  comm.recv(&got, 4, previous, 999);  // the timed-out receive must not have eaten this
  sending->wait();
  COMM_EXPECT(comm, got == float(previous));
}

}  // namespace

void add_p2p_checks(std::vector<Check>& checks) {
  checks.push_back({"all_pairs", check_all_pairs});
  checks.push_back({"blocking_ring", check_blocking_ring});
  checks.push_back({"ring_rotation", check_ring_rotation});
  checks.push_back({"ordering_and_tags", check_ordering_and_tags});
  checks.push_back({"zero_bytes", check_zero_bytes});
  checks.push_back({"message_64_mib", check_64_mib, true});
  checks.push_back({"test_polls", check_test_polls});
  checks.push_back({"size_mismatch", check_size_mismatch});
  checks.push_back({"timeout", check_timeout});
}

}  // namespace cpdit::comm::testing
