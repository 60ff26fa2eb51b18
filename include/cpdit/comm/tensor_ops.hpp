#pragma once
// Communication on Tensors, built on the byte operations of Communicator. Inputs may be any view
// (non-contiguous ones are packed first); outputs are new contiguous tensors unless noted.
#include <cpdit/comm/communicator.hpp>
#include <cpdit/core/tensor.hpp>

#include <map>
#include <memory>
#include <string>
#include <vector>

namespace cpdit::comm {

// Concatenation along `dim` of every rank's tensor, in rank order. Sizes along `dim` may differ
// between ranks (they are exchanged first); the other dims and the dtype must match.
Tensor all_gather(Communicator& comm, const Tensor& t, int dim);

// Splits t along split_dim into size() parts (split_sizes rule, or `split` when given), sends part p
// to rank p, and concatenates what arrives along concat_dim in rank order. Parts may be uneven on
// either side (the received shapes are exchanged first). Ulysses uses it as
// (B, S_local, H, D) --split H, concat S--> (B, S, H_local, D) and back.
Tensor all_to_all(Communicator& comm, const Tensor& t, int split_dim, int concat_dim,
                  const std::vector<int64_t>& split = {});

// In place; t must be contiguous.
void all_reduce_(Communicator& comm, Tensor& t, ReduceOp op);
// Reduces every rank's t and returns this rank's part along `dim` (split_sizes rule).
Tensor reduce_scatter(Communicator& comm, const Tensor& t, int dim, ReduceOp op);
// In place; t must be contiguous and of the same shape and dtype on every rank.
void broadcast_(Communicator& comm, Tensor& t, int root);
// Root's bytes (a message, a header) to every rank; the others need not know the length.
void broadcast_bytes(Communicator& comm, std::string& bytes, int root);
// Root's named tensors to every rank: names, dtypes and shapes first, then the bytes. Other ranks'
// maps are replaced; what they held before is ignored.
void broadcast_tensors(Communicator& comm, std::map<std::string, Tensor>& tensors, int root);

// Point-to-point: the receiver provides a contiguous tensor of the sent shape and dtype. The
// non-blocking forms keep the tensor's storage alive until the request is destroyed.
void send(Communicator& comm, const Tensor& t, int peer, int tag = 0);
void recv(Communicator& comm, Tensor& t, int peer, int tag = 0);
std::unique_ptr<Request> isend(Communicator& comm, const Tensor& t, int peer, int tag = 0);
std::unique_ptr<Request> irecv(Communicator& comm, Tensor& t, int peer, int tag = 0);

}  // namespace cpdit::comm
