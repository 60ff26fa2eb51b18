// Run-time choice of the kernels' instruction set (kernels/isa.hpp).
#include <cpdit/kernels/isa.hpp>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace cpdit::kernels {
namespace {

Isa detect() {
  __builtin_cpu_init();
  // libgcc's answer includes the OS check (XCR0 saves the ZMM and opmask state).
  if (!__builtin_cpu_supports("avx512f")) return Isa::portable;
  if (!__builtin_cpu_supports("avx512bf16")) return Isa::avx512;
  return Isa::avx512_bf16;
}

// Read once, before main: kernels consult it inside OpenMP teams, where an exception cannot leave.
Isa from_environment(Isa detected) {
  const char* text = std::getenv("CPDIT_KERNEL_ISA");
  if (text == nullptr || *text == '\0' || std::strcmp(text, "auto") == 0) return detected;
  if (std::strcmp(text, "portable") == 0) return Isa::portable;
  std::fprintf(stderr, "cpdit: error: CPDIT_KERNEL_ISA=%s is not a choice; use portable or auto\n", text);
  std::_Exit(2);
}

const Isa kDetected = detect();
std::atomic<Isa> chosen{from_environment(kDetected)};

}  // namespace

const char* isa_name(Isa isa) {
  switch (isa) {
    case Isa::portable: return "portable";
    case Isa::avx512: return "avx512";
    case Isa::avx512_bf16: return "avx512_bf16";
  }
  return "?";
}

Isa detected_isa() { return kDetected; }

Isa kernel_isa() { return chosen.load(std::memory_order_relaxed); }

ScopedKernelIsa::ScopedKernelIsa(Isa isa) : previous_(kernel_isa()) {
  chosen.store(std::min(isa, kDetected), std::memory_order_relaxed);
}

ScopedKernelIsa::~ScopedKernelIsa() { chosen.store(previous_, std::memory_order_relaxed); }

}  // namespace cpdit::kernels
