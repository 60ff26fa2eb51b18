// Run-time choice of the kernels' instruction set (kernels/isa.hpp), and oneDNN's cap to match it.
#include <cpdit/core/error.hpp>
#include <cpdit/kernels/isa.hpp>

#include <oneapi/dnnl/dnnl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>

namespace cpdit::kernels {
namespace {

constexpr Isa kLevels[] = {Isa::portable, Isa::avx512, Isa::avx512_bf16, Isa::amx};

// Linux hands a process AMX's tile state only when it asks (ARCH_REQ_XCOMP_PERM for
// XFEATURE_XTILEDATA, once for all its threads); without it the first tile instruction faults.
bool amx_tiles_granted() {
  constexpr long kReqPermission = 0x1023, kTileData = 18;
  return __builtin_cpu_supports("amx-tile") && __builtin_cpu_supports("amx-bf16") &&
         syscall(SYS_arch_prctl, kReqPermission, kTileData) == 0;
}

Isa detect() {
  __builtin_cpu_init();
  // libgcc's answer includes the OS check (XCR0 saves the ZMM and opmask state).
  if (!__builtin_cpu_supports("avx512f")) return Isa::portable;
  if (!__builtin_cpu_supports("avx512bf16") || !__builtin_cpu_supports("avx512vnni")) return Isa::avx512;
  return amx_tiles_granted() ? Isa::amx : Isa::avx512_bf16;
}

// Read once, before main: kernels consult it inside OpenMP teams, where an exception cannot leave.
Isa from_environment(Isa detected) {
  const char* text = std::getenv("CPDIT_KERNEL_ISA");
  try {
    return isa_named(text == nullptr ? "" : text, detected);
  } catch (const Error& e) {
    std::fprintf(stderr, "cpdit: error: %s\n", e.what());
    std::_Exit(2);
  }
}

// oneDNN picks its own kernels by CPUID (its bf16 matmul runs on AMX where the CPU has it), so a
// level below amx caps it at the same set; oneDNN accepts a cap only before its first primitive.
// At amx it keeps its own choice (and honours ONEDNN_MAX_CPU_ISA if the user set it).
void cap_onednn(Isa level) {
  if (level == Isa::amx) return;
  const dnnl_cpu_isa_t cap = level == Isa::portable ? dnnl_cpu_isa_avx2              // x86-64-v3, the portable build's
                             : level == Isa::avx512 ? dnnl_cpu_isa_avx512_core_vnni  // VNNI as linear_int8 may
                                                     : dnnl_cpu_isa_avx512_core_bf16;
  const dnnl_status_t status = dnnl_set_max_cpu_isa(cap);
  if (status != dnnl_success) {
    std::fprintf(stderr, "cpdit: error: oneDNN refused the instruction-set cap for CPDIT_KERNEL_ISA=%s (status %d)\n",
                 isa_name(level), int(status));
    std::_Exit(2);
  }
}

const Isa kDetected = detect();

Isa chosen_at_start() {
  const Isa isa = from_environment(kDetected);
  cap_onednn(isa);
  return isa;
}

std::atomic<Isa> chosen{chosen_at_start()};

}  // namespace

const char* isa_name(Isa isa) {
  switch (isa) {
    case Isa::portable: return "portable";
    case Isa::avx512: return "avx512";
    case Isa::avx512_bf16: return "avx512_bf16";
    case Isa::amx: return "amx";
  }
  return "?";
}

Isa isa_named(const std::string& name, Isa detected) {
  if (name.empty() || name == "auto") return detected;
  for (Isa isa : kLevels) {
    if (name != isa_name(isa)) continue;
    CPDIT_CHECK(isa <= detected, unsupported, "CPDIT_KERNEL_ISA=", name, " needs an instruction set this CPU lacks (",
                "it offers up to ", isa_name(detected), ")");
    return isa;
  }
  fail(ErrorKind::invalid_argument, "CPDIT_KERNEL_ISA=", name,
       " is not a choice; use portable, avx512, avx512_bf16, amx or auto");
}

Isa detected_isa() { return kDetected; }

Isa kernel_isa() { return chosen.load(std::memory_order_relaxed); }

ScopedKernelIsa::ScopedKernelIsa(Isa isa) : previous_(kernel_isa()) {
  chosen.store(std::min(isa, kDetected), std::memory_order_relaxed);
}

ScopedKernelIsa::~ScopedKernelIsa() { chosen.store(previous_, std::memory_order_relaxed); }

}  // namespace cpdit::kernels
