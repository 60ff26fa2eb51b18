#pragma once
// Which instruction set the hand-written kernels, and oneDNN's, run on, chosen at run time. The
// kernels with an AVX-512 or AMX variant (the flash kernel's softmax rows, the bf16 tile products,
// the int8 and AMX Linear) are compiled for it by target attributes in every build, so a portable
// build (-DCPDIT_NATIVE=OFF, x86-64-v3) still runs them where the CPU has the set, and a native
// build can be told to run a lower level: to compare, to rule a kernel out, or to measure what a CPU
// without AMX (Zen 4, say) gets from the same code.
//
// CPDIT_KERNEL_ISA=portable|avx512|avx512_bf16|amx runs that level (a level above what the CPU has
// is a one-line error, exit 2); unset, empty or "auto" picks the best the CPU has.
#include <string>

namespace cpdit::kernels {

// Levels in order: each has everything of the one before.
enum class Isa {
  portable,     // plain loops, vectorised as far as the build's -march lets the compiler
  avx512,       // AVX-512 F (flash rows, f32 tiles; AVX512-VNNI int8 Linear where the CPU has it)
  avx512_bf16,  // and AVX512-BF16 + AVX512-VNNI dot products (bf16 tiles), no AMX: Zen 4's set
  amx,          // and AMX-BF16 tiles that Linux lets this process use (bf16 and block-quantised Linear)
};
const char* isa_name(Isa isa);

// The best this CPU offers (CPUID, with the OS saving the AVX-512 state and granting AMX's tiles).
Isa detected_isa();

// The level `name` asks for (an isa_name, or "auto" / "" for `detected`): a cpdit::Error for a name
// that is not a level or a level above `detected`.
Isa isa_named(const std::string& name, Isa detected);

// What the kernels run on now: the detected set, lowered by CPDIT_KERNEL_ISA or a ScopedKernelIsa.
// oneDNN follows CPDIT_KERNEL_ISA only: it takes its cap once, before its first primitive, so a
// ScopedKernelIsa changes cpdit's own kernels but not oneDNN's.
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
