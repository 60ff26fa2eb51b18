// Tensor communication on top of the byte operations. Shapes travel first, so ranks may hold
// uneven parts; when the received blocks already lie in the order of the result (nothing but size-1
// dims before the concatenation dim), they land in the result directly, otherwise in a staging buffer
// that cat() then lays out.
#include <cpdit/comm/tensor_ops.hpp>
#include <cpdit/core/error.hpp>

#include <cstring>
#include <numeric>

namespace cpdit::comm {

namespace {

// A shape as it travels between ranks.
struct ShapeRecord {
  int64_t ndim = 0;
  int64_t dtype = 0;
  int64_t dims[kMaxDims] = {};
};

ShapeRecord record(const Tensor& t) {
  ShapeRecord r;
  r.ndim = t.dim();
  r.dtype = int64_t(t.dtype());
  for (int i = 0; i < t.dim(); ++i) r.dims[i] = t.size(i);
  return r;
}

Shape shape_of(const ShapeRecord& r) { return Shape(r.dims, r.dims + r.ndim); }

std::string describe(const ShapeRecord& r) {
  return detail::concat(dtype_name(DType(r.dtype)), shape_string(shape_of(r)));
}

// True when r matches `like` in dtype and every dim but `free_dim`.
bool compatible(const ShapeRecord& r, const ShapeRecord& like, int free_dim) {
  if (r.ndim != like.ndim || r.dtype != like.dtype) return false;
  for (int i = 0; i < r.ndim; ++i)
    if (i != free_dim && r.dims[i] != like.dims[i]) return false;
  return true;
}

int normalize_dim(const Tensor& t, int dim, const char* operation) {
  int d = dim < 0 ? dim + t.dim() : dim;
  CPDIT_CHECK(d >= 0 && d < t.dim(), invalid_argument, operation, ": dim ", dim, " is out of range for ", t.describe());
  return d;
}

// Blocks concatenated along `dim` are contiguous pieces of the result when every dim before it is 1.
bool blocks_are_layout(const Shape& shape, int dim) {
  return std::accumulate(shape.begin(), shape.begin() + dim, int64_t{1}, std::multiplies<>()) == 1;
}

// Receives blocks of the given shapes with `exchange(recv_buffer)` and concatenates them along dim.
template <class Exchange>
Tensor receive_concatenated(const std::vector<ShapeRecord>& shapes, DType dtype, int dim, Exchange exchange) {
  Shape out_shape = shape_of(shapes[0]);
  out_shape[dim] = 0;
  for (const auto& s : shapes) out_shape[dim] += s.dims[dim];
  if (blocks_are_layout(out_shape, dim)) {
    Tensor out = Tensor::empty(out_shape, dtype);
    exchange(out.raw());
    return out;
  }
  Tensor staging = Tensor::empty({shape_numel(out_shape)}, dtype);
  exchange(staging.raw());
  std::vector<Tensor> parts;
  int64_t offset = 0;
  for (const auto& s : shapes) {
    int64_t n = shape_numel(shape_of(s));
    parts.push_back(staging.narrow(0, offset, n).reshape(shape_of(s)));
    offset += n;
  }
  return cat(parts, dim);
}

void check_contiguous(const Tensor& t, const char* operation) {
  CPDIT_CHECK(t.defined() && t.is_contiguous(), invalid_argument, operation,
              " works in place and needs a defined contiguous tensor, got ", t.defined() ? t.describe() : "undefined");
}

// Keeps a tensor's storage alive until the request it backs is gone.
class TensorRequest final : public Request {
 public:
  TensorRequest(Tensor tensor, std::unique_ptr<Request> request)
      : tensor_(std::move(tensor)), request_(std::move(request)) {}
  void wait() override { request_->wait(); }
  bool test() override { return request_->test(); }

 private:
  Tensor tensor_;                     // declared first: destroyed after the request
  std::unique_ptr<Request> request_;
};

}  // namespace

Tensor all_gather(Communicator& comm, const Tensor& t, int dim) {
  const int d = normalize_dim(t, dim, "all_gather");
  Tensor local = t.contiguous();
  const ShapeRecord mine = record(local);
  std::vector<ShapeRecord> shapes(comm.size());
  comm.all_gather(&mine, sizeof mine, shapes.data());
  std::vector<size_t> bytes;
  for (int p = 0; p < comm.size(); ++p) {
    CPDIT_CHECK(compatible(shapes[p], mine, d), invalid_argument, "all_gather along dim ", d, ": rank ", p, " has ",
                describe(shapes[p]), " but rank ", comm.rank(), " has ", describe(mine),
                "; only dim ", d, " may differ");
    bytes.push_back(size_t(shape_numel(shape_of(shapes[p]))) * dtype_size(local.dtype()));
  }
  return receive_concatenated(shapes, local.dtype(), d, [&](void* recv) {
    comm.all_gather_v(local.raw(), local.nbytes(), recv, bytes);
  });
}

Tensor all_to_all(Communicator& comm, const Tensor& t, int split_dim, int concat_dim,
                  const std::vector<int64_t>& split) {
  const int sd = normalize_dim(t, split_dim, "all_to_all");
  const int cd = normalize_dim(t, concat_dim, "all_to_all");
  const int n = comm.size();
  std::vector<int64_t> sizes = split.empty() ? split_sizes(t.size(sd), n) : split;
  CPDIT_CHECK(int(sizes.size()) == n && std::accumulate(sizes.begin(), sizes.end(), int64_t{0}) == t.size(sd),
              invalid_argument, "all_to_all: split sizes must be ", n, " numbers summing to ", t.size(sd),
              " (dim ", sd, " of ", t.describe(), ")");
  std::vector<Tensor> parts = cpdit::split(t, sd, sizes);

  // Parts back to back in rank order: already so in t when nothing but size-1 dims precede sd.
  Tensor send_buffer = t;
  if (!t.is_contiguous() || !blocks_are_layout(t.shape(), sd)) {
    send_buffer = Tensor::empty({t.numel()}, t.dtype());
    int64_t offset = 0;
    for (const Tensor& part : parts) {
      send_buffer.narrow(0, offset, part.numel()).reshape(part.shape()).copy_(part);
      offset += part.numel();
    }
  }

  std::vector<ShapeRecord> sent, shapes(n);
  std::vector<size_t> send_bytes, recv_bytes;
  for (const Tensor& part : parts) {
    sent.push_back(record(part));
    send_bytes.push_back(part.nbytes());
  }
  comm.all_to_all(sent.data(), shapes.data(), sizeof(ShapeRecord));
  for (int p = 0; p < n; ++p) {
    CPDIT_CHECK(compatible(shapes[p], shapes[0], cd), invalid_argument, "all_to_all concatenating dim ", cd,
                ": rank ", p, " sends ", describe(shapes[p]), " but rank 0 sends ", describe(shapes[0]),
                " to rank ", comm.rank(), "; only dim ", cd, " may differ");
    recv_bytes.push_back(size_t(shape_numel(shape_of(shapes[p]))) * dtype_size(t.dtype()));
  }
  return receive_concatenated(shapes, t.dtype(), cd, [&](void* recv) {
    comm.all_to_all_v(send_buffer.raw(), send_bytes, recv, recv_bytes);
  });
}

void all_reduce_(Communicator& comm, Tensor& t, ReduceOp op) {
  check_contiguous(t, "all_reduce_");
  comm.all_reduce(t.raw(), size_t(t.numel()), t.dtype(), op);
}

Tensor reduce_scatter(Communicator& comm, const Tensor& t, int dim, ReduceOp op) {
  const int d = normalize_dim(t, dim, "reduce_scatter");
  const int n = comm.size();
  Tensor local = t.contiguous();
  if (blocks_are_layout(local.shape(), d) && local.size(d) % n == 0) {
    Shape out_shape = local.shape();
    out_shape[d] /= n;
    Tensor out = Tensor::empty(out_shape, local.dtype());
    comm.reduce_scatter(local.raw(), out.raw(), size_t(out.numel()), local.dtype(), op);
    return out;
  }
  // Uneven or strided parts: reduce everything, keep this rank's part.
  Tensor reduced = local.clone();
  all_reduce_(comm, reduced, op);
  return reduced.narrow(d, split_offset(local.size(d), n, comm.rank()), split_sizes(local.size(d), n)[comm.rank()])
      .clone();
}

void broadcast_(Communicator& comm, Tensor& t, int root) {
  check_contiguous(t, "broadcast_");
  comm.broadcast(t.raw(), t.nbytes(), root);
}

void broadcast_bytes(Communicator& comm, std::string& bytes, int root) {
  uint64_t length = bytes.size();
  comm.broadcast(&length, sizeof length, root);
  bytes.resize(length);
  comm.broadcast(bytes.data(), length, root);
}

void broadcast_tensors(Communicator& comm, std::map<std::string, Tensor>& tensors, int root) {
  // The header: per tensor its ShapeRecord, its name's length and the name.
  std::string header;
  if (comm.rank() == root)
    for (const auto& [name, t] : tensors) {
      const ShapeRecord r = record(t);
      const uint64_t length = name.size();
      header.append(reinterpret_cast<const char*>(&r), sizeof r);
      header.append(reinterpret_cast<const char*>(&length), sizeof length);
      header += name;
    }
  broadcast_bytes(comm, header, root);
  if (comm.rank() != root) {
    tensors.clear();
    for (size_t at = 0; at < header.size();) {
      ShapeRecord r;
      uint64_t length = 0;
      std::memcpy(&r, header.data() + at, sizeof r);
      std::memcpy(&length, header.data() + at + sizeof r, sizeof length);
      at += sizeof r + sizeof length;
      tensors[header.substr(at, length)] = Tensor::empty(shape_of(r), DType(r.dtype));
      at += length;
    }
  }
  for (auto& [name, t] : tensors) {
    if (comm.rank() == root) t = t.contiguous();
    broadcast_(comm, t, root);
  }
}

void send(Communicator& comm, const Tensor& t, int peer, int tag) {
  Tensor c = t.contiguous();
  comm.send(c.raw(), c.nbytes(), peer, tag);
}

void recv(Communicator& comm, Tensor& t, int peer, int tag) {
  check_contiguous(t, "recv");
  comm.recv(t.raw(), t.nbytes(), peer, tag);
}

std::unique_ptr<Request> isend(Communicator& comm, const Tensor& t, int peer, int tag) {
  Tensor c = t.contiguous();
  auto request = comm.isend(c.raw(), c.nbytes(), peer, tag);
  return std::make_unique<TensorRequest>(std::move(c), std::move(request));
}

std::unique_ptr<Request> irecv(Communicator& comm, Tensor& t, int peer, int tag) {
  check_contiguous(t, "irecv");
  return std::make_unique<TensorRequest>(t, comm.irecv(t.raw(), t.nbytes(), peer, tag));
}

}  // namespace cpdit::comm
