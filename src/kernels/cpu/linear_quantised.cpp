// Linear over a block-quantised weight: the weight's rows are decoded to f32 one tile at a time, into a
// buffer each thread keeps between calls (fresh pages are slow here), and each tile is multiplied by
// the sgemm while it is still in cache. The weight is never decoded whole, so a Q8_0 or Q4_K model
// holds its blocks only. Under MatmulPrecision::bf16, where a Linear may round its activations and
// weights: at the amx kernel level (kernels/isa.hpp), runs of 128 weight rows decoded to bf16 for
// the bf16 tile product (linear_amx.cpp); below it (a CPU without AMX, or CPDIT_KERNEL_ISA lower) Q8_0
// and Q4_0 by AVX512-VNNI int8 dot products (linear_int8.cpp).
// Measured at 1536x3072x3072, one thread, GFLOP per CPU-second (bench gemm, loaded machine): Q8_0
// decoded to bf16 on AMX 750, int8 on AMX-INT8 tiles 490 (a kernel tried and removed: Q8_0's
// per-32 scales limit a tile product to one 32-byte block, half of TDPBSSD's depth, so its rate is
// the bf16 product's, and scaling the int32 sums of every block costs more than decoding), VNNI
// 330, this f32 path 120; the bf16 weight on AMX 960.
#include "kernels/cpu/block_decode.hpp"
#include "kernels/cpu/linear_args.hpp"

#include <cpdit/core/precision.hpp>
#include <cpdit/core/threads.hpp>
#include <cpdit/kernels/cpu.hpp>

#include <algorithm>
#include <vector>

namespace cpdit::kernels {

namespace {
// A decoded tile is about half of a core's L2 cache (1 MiB here), so it stays there for the sgemm.
constexpr int64_t kTileBytes = 512 * 1024;
}  // namespace

void detail::linear_quantised(const LinearArgs& a, float beta, float* y) {
  if (matmul_precision() == MatmulPrecision::bf16) {
    // y holds the bias (beta = 1) or is written whole (beta = 0): the AMX product adds the bias itself.
    if (amx_linear_available()) return amx_linear_into(a, y);
    if (linear_int8(a, beta, y)) return apply_epilogue(a, y);
  }
  const detail::QuantisedRows weight(a.blocks);
  const int64_t tile_rows = std::clamp<int64_t>(kTileBytes / std::max<int64_t>(a.k * 4, 1), 8, 256);
  const int64_t tiles = (a.n + tile_rows - 1) / tile_rows;
#pragma omp parallel for schedule(dynamic) num_threads(compute_threads())
  for (int64_t t = 0; t < tiles; ++t) {
    thread_local std::vector<float> tile;
    const int64_t row0 = t * tile_rows, rows = std::min(tile_rows, a.n - row0);
    tile.resize(size_t(tile_rows * a.k));
    for (int64_t r = 0; r < rows; ++r) weight.decode(row0 + r, tile.data() + r * a.k);
    // Inside this parallel region the sgemm runs on its calling thread alone.
    gemm(false, true, a.m, rows, a.k, 1.0f, a.x.data<float>(), std::max<int64_t>(a.k, 1), tile.data(),
         std::max<int64_t>(a.k, 1), beta, y + row0, a.n);
  }
  apply_epilogue(a, y);
}

Tensor dequantise(const Weight& weight) {
  if (!weight.is_quantised()) return weight.values("dequantise").to(DType::f32).contiguous();
  const detail::QuantisedRows decoded(weight);
  const int64_t rows = weight.shape()[0], cols = weight.shape()[1];
  Tensor out = Tensor::empty({rows, cols});
  float* y = out.data<float>();
#pragma omp parallel for num_threads(compute_threads()) if (rows * cols >= detail::kParallelMin)
  for (int64_t r = 0; r < rows; ++r) decoded.decode(r, y + r * cols);
  return out;
}

}  // namespace cpdit::kernels
