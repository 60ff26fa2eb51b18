#pragma once
// Which instruction set the hand-written kernels run on, chosen at run time. The kernels with an
// AVX-512 variant (the flash kernel's softmax rows, the bf16 tile products) are compiled for it by
// target attributes in every build, so a portable build (-DCPDIT_NATIVE=OFF, x86-64-v3) still runs
// them where the CPU has AVX-512, and a native build can be told to run the portable loops.
//
// CPDIT_KERNEL_ISA=portable forces the portable loops (to compare, or to rule a kernel out);
// unset, empty or "auto" picks the best the CPU has.
namespace cpdit::kernels {

enum class Isa {
  portable,     // plain loops, vectorised as far as the build's -march lets the compiler
  avx512,       // AVX-512 F (flash rows)
  avx512_bf16,  // and AVX512-BF16 dot products (bf16 tiles; AMX on top where the kernel grants it)
};
const char* isa_name(Isa isa);

// The best this CPU offers (CPUID, with the OS saving the AVX-512 state).
Isa detected_isa();

// What the kernels run on now: the detected set, lowered by CPDIT_KERNEL_ISA or a ScopedKernelIsa.
Isa kernel_isa();

// For tests and benchmarks: the kernels run on min(isa, detected) until the object is destroyed,
// then on what they ran on before. Not for use while kernels run on other threads.
class ScopedKernelIsa {
 public:
  explicit ScopedKernelIsa(Isa isa);
  ~ScopedKernelIsa();
  ScopedKernelIsa(const ScopedKernelIsa&) = delete;
  ScopedKernelIsa& operator=(const ScopedKernelIsa&) = delete;

 private:
  Isa previous_;
};

}  // namespace cpdit::kernels
