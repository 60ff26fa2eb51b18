// cpdit bench comm: communicator bandwidth against memcpy measured in the same run.
// Runs the local engine with --ranks N thread ranks, or the MPI world under mpirun. Per line:
//   bytes: the per-rank buffer; gbps: bytes landing in each rank's receive buffer per second
//   (pingpong: one way, bytes / half the round trip; ring: bytes; all_gather: ranks * bytes;
//   all_to_all: bytes, bytes / ranks per peer; all_reduce: bytes of f32), from the minimum time.
#include "command.hpp"
#include "measure.hpp"

#include <cpdit/comm/launch.hpp>
#include <cpdit/core/error.hpp>

#include <algorithm>
#include <cstring>
#include <functional>
#include <map>
#include <memory>

namespace cpdit::bench {
namespace {

struct CommBenchArgs {
  int ranks = 2;
  size_t min_bytes = size_t(4) << 10;
  size_t max_bytes = size_t(64) << 20;
  std::vector<std::string> operations{"pingpong", "ring", "all_gather", "all_to_all", "all_reduce"};
};

// Enough repeats to smooth small transfers without spending long on large ones.
int repeats_for(size_t bytes) { return int(std::clamp<size_t>((size_t(256) << 20) / bytes, 3, 50)); }

std::vector<std::byte> touched(size_t bytes) { return std::vector<std::byte>(bytes, std::byte{1}); }

// One timed step of `operation` on `bytes`, with its buffers allocated (and first touched) once.
struct Step {
  std::function<void()> run;
  double bytes_landed = 0;
};

Step make_step(comm::Communicator& c, const std::string& operation, size_t bytes) {
  const int n = c.size(), me = c.rank(), next = (me + 1) % n, previous = (me + n - 1) % n;
  auto send = std::make_shared<std::vector<std::byte>>(touched(bytes));
  if (operation == "pingpong") {
    auto recv = std::make_shared<std::vector<std::byte>>(touched(bytes));
    return {[&c, send, recv, bytes, me] {
              if (me == 0) {
                c.send(send->data(), bytes, 1, 0);
                c.recv(recv->data(), bytes, 1, 0);
              } else if (me == 1) {
                c.recv(recv->data(), bytes, 0, 0);
                c.send(send->data(), bytes, 0, 0);
              }
            },
            2.0 * double(bytes)};
  }
  if (operation == "ring") {
    auto recv = std::make_shared<std::vector<std::byte>>(touched(bytes));
    return {[&c, send, recv, bytes, next, previous] {
              auto receiving = c.irecv(recv->data(), bytes, previous, 0);
              auto sending = c.isend(send->data(), bytes, next, 0);
              sending->wait();
              receiving->wait();
            },
            double(bytes)};
  }
  if (operation == "all_gather") {
    auto recv = std::make_shared<std::vector<std::byte>>(touched(bytes * n));
    return {[&c, send, recv, bytes] { c.all_gather(send->data(), bytes, recv->data()); }, double(bytes) * n};
  }
  if (operation == "all_to_all") {
    auto recv = std::make_shared<std::vector<std::byte>>(touched(bytes));
    const size_t per_peer = bytes / n;
    return {[&c, send, recv, per_peer] { c.all_to_all(send->data(), recv->data(), per_peer); }, double(per_peer) * n};
  }
  if (operation == "all_reduce") {
    std::memset(send->data(), 0, bytes);  // f32 zeros: sums stay finite
    return {[&c, send, bytes] { c.all_reduce(send->data(), bytes / 4, DType::f32, comm::ReduceOp::sum); },
            double(bytes)};
  }
  fail(ErrorKind::invalid_argument, "bench comm: unknown operation '", operation,
       "'; use pingpong, ring, all_gather, all_to_all or all_reduce");
}

double memcpy_gbps(size_t bytes) {
  std::vector<std::byte> from = touched(bytes), to = touched(bytes);
  Timing t = measure([&] { std::memcpy(to.data(), from.data(), bytes); }, repeats_for(bytes));
  return double(bytes) / t.min_s / 1e9;
}

void run_rank(comm::Communicator& c, const CommBenchArgs& args) {
  for (size_t bytes = args.min_bytes; bytes <= args.max_bytes; bytes *= 4) {
    const double memcpy_rate = c.rank() == 0 ? memcpy_gbps(bytes) : 0.0;
    for (const std::string& operation : args.operations) {
      if (operation == "pingpong" && c.size() < 2) continue;
      Step step = make_step(c, operation, bytes);
      const int repeats = repeats_for(bytes);
      c.barrier();
      Timing t = measure(step.run, repeats);
      c.barrier();
      if (c.rank() != 0) continue;
      double seconds = operation == "pingpong" ? t.min_s / 2 : t.min_s;  // pingpong: one way
      double landed = operation == "pingpong" ? step.bytes_landed / 2 : step.bytes_landed;
      double gbps = landed / seconds / 1e9;
      nlohmann::json j = line("comm");
      j.update({{"engine", c.engine()}, {"operation", operation}, {"ranks", c.size()}, {"bytes", bytes},
                {"repeats", repeats}, {"seconds_min", t.min_s}, {"seconds_median", t.median_s}, {"gbps", gbps},
                {"memcpy_gbps", memcpy_rate}, {"ratio_to_memcpy", gbps / memcpy_rate}});
      print(j);
    }
  }
}

void add_comm_bench(CLI::App& parent) {
  auto args = std::make_shared<CommBenchArgs>();
  CLI::App* cmd = parent.add_subcommand("comm", "Communicator bandwidth (local threads or MPI) against memcpy");
  cmd->add_option("--ranks", args->ranks, "thread ranks of the local engine (default 2; ignored under mpirun)")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--min-bytes", args->min_bytes, "smallest buffer (default 4 KiB)");
  cmd->add_option("--max-bytes", args->max_bytes, "largest buffer (default 64 MiB); sizes grow by 4x");
  cmd->add_option("--op", args->operations, "operations (default pingpong ring all_gather all_to_all all_reduce)");
  cmd->callback([args] {
    comm::LocalOptions options;
    options.threads_per_rank = 1;
    comm::run_ranks(args->ranks, [&](comm::Communicator& c) { run_rank(c, *args); }, options);
  });
}

const bool registered = app::register_bench("comm", add_comm_bench);

}  // namespace
}  // namespace cpdit::bench
