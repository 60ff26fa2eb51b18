#pragma once
// One context-parallel parity case and its check, shared by the local-engine gtest matrix and the
// mpirun executable: every rank builds the same full inputs, computes the single-rank reference,
// runs its shard through ParallelContext, gathers, and measures the normalised errors.
#include <cpdit/attention/attention.hpp>
#include <cpdit/comm/communicator.hpp>
#include <cpdit/parallel/config.hpp>

#include <string>
#include <vector>

namespace cpdit::parallel::test {

enum class MaskCase {
  none,
  padded,         // random key padding, plus one rank's keys fully masked in batch 0
  all_masked_row  // batch 1 attends to no key at all: out 0, lse -inf, zero gradients
};

struct CpCase {
  int ring = 1, ulysses = 1;
  RotateMethod rotate = RotateMethod::p2p;
  int64_t batch = 2, seq = 72, heads = 6, kv_heads = 6, dim = 8;
  // Keys of another sequence than the queries (cross-attention to text split with the tokens, as
  // LTX-Video's plan does): its own length, shard layout and key mask. 0: the query sequence.
  int64_t kv_seq = 0;
  MaskCase mask = MaskCase::none;
  // A position rule on top of `mask` (key padding or none); block = tokens per block-causal block.
  // Cases with a rule are checked against the float64 dense reference instead of flash.
  attention::MaskRule rule = attention::MaskRule::none;
  int64_t block = 1;
  DType dtype = DType::f32;
  bool backward = true;
  // How the ranks split the tokens (and the router reads their positions).
  TokenLayout layout = TokenLayout::contiguous;

  int64_t keys() const { return kv_seq > 0 ? kv_seq : seq; }
  std::string name() const;  // usable as a gtest parameter name
};

struct CpErrors {
  double out = 0;       // max |out - ref|, absolute
  double lse = 0;       // max |lse - ref| over finite entries; inf if -inf does not match
  double dq = 0, dk = 0, dv = 0;  // max |g - ref| / max |ref|
};

// Collective over `world` (size ring * ulysses). Every rank returns the same errors, measured
// against single-rank flash, or against float64 for cases with a position rule.
CpErrors check_case(std::shared_ptr<comm::Communicator> world, const CpCase& c);

// Tolerances the project promises: forward 1e-5 absolute (f32 on O(1) data), gradients 1e-4
// relative to flash, 2e-5 relative to float64 for position rules (the f32 rounding of short sums,
// S <= 100); bf16 outputs are allowed one bf16 rounding step (and gradients what that step causes).
double out_tolerance(const CpCase& c);
double grad_tolerance(const CpCase& c);

// The cases run in full with the local engine, and the subset run under mpirun (4 ranks).
std::vector<CpCase> local_matrix();
// Causal and block-causal, alone and with key padding, on an uneven length, for every mesh of up
// to 4 ranks and both rotations; in the zigzag layout too where there is a ring.
std::vector<CpCase> rule_matrix();
std::vector<CpCase> mpi_subset();

}  // namespace cpdit::parallel::test
