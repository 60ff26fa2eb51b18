// The kernels' run-time instruction-set choice (kernels/isa.hpp): it picks what CPUID reports, a
// test can lower it and gets the old choice back, and CPDIT_KERNEL_ISA sets it for a whole process,
// oneDNN's cap included (checked in child processes: the variable is read once, before main).
#include <cpdit/core/error.hpp>
#include <cpdit/kernels/cpu.hpp>
#include <cpdit/kernels/isa.hpp>

#include <gtest/gtest.h>
#include <oneapi/dnnl/dnnl.h>

#include <array>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

namespace cpdit::kernels {
namespace {

constexpr Isa kLevels[] = {Isa::portable, Isa::avx512, Isa::avx512_bf16, Isa::amx};

// What this CPU offers, asked independently of the library (AMX: the CPU has the tiles and Linux
// grants this process their state, asked as the library asks).
Isa cpuid_isa() {
  __builtin_cpu_init();
  if (!__builtin_cpu_supports("avx512f")) return Isa::portable;
  if (!__builtin_cpu_supports("avx512bf16") || !__builtin_cpu_supports("avx512vnni")) return Isa::avx512;
  constexpr long kReqPermission = 0x1023, kTileData = 18;
  const bool amx = __builtin_cpu_supports("amx-tile") && __builtin_cpu_supports("amx-bf16") &&
                   syscall(SYS_arch_prctl, kReqPermission, kTileData) == 0;
  return amx ? Isa::amx : Isa::avx512_bf16;
}

struct Child {
  int exit_code;
  std::string output;
};

// This test binary run again with `env` set, stdout and stderr together.
Child run_self(const std::string& env, const std::string& args) {
  const std::string command = env + " /proc/" + std::to_string(getpid()) + "/exe " + args + " 2>&1";
  Child child{-1, ""};
  FILE* pipe = popen(command.c_str(), "r");
  if (pipe == nullptr) return child;
  std::array<char, 4096> buffer;
  while (fgets(buffer.data(), int(buffer.size()), pipe) != nullptr) child.output += buffer.data();
  const int status = pclose(pipe);
  child.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return child;
}

// The level CPDIT_KERNEL_ISA names in this process, or the CPU's when it names none.
Isa environment_level() {
  const char* text = std::getenv("CPDIT_KERNEL_ISA");
  for (Isa isa : kLevels)
    if (text != nullptr && std::string(text) == isa_name(isa)) return isa;
  return cpuid_isa();
}

// In a portable build (-DCPDIT_NATIVE=OFF) as in a native one: the AVX-512 and AMX kernels run where
// the CPU has them, unless the environment names a lower level.
TEST(KernelIsa, PicksWhatTheCpuHas) {
  EXPECT_EQ(detected_isa(), cpuid_isa());
  EXPECT_EQ(kernel_isa(), environment_level()) << isa_name(kernel_isa());
}

// oneDNN's own kernels are capped at the process's level: below amx its bf16 matmul must not use AMX,
// below avx512_bf16 not AVX512-BF16, and so on. Its effective set is the cap where the CPU has the
// capped set (at avx512: VNNI only where the CPU has it).
TEST(KernelIsa, OneDnnIsCappedAtTheProcessLevel) {
  __builtin_cpu_init();
  const dnnl_cpu_isa_t effective = dnnl_get_effective_cpu_isa();
  switch (kernel_isa()) {
    case Isa::portable: EXPECT_EQ(effective, dnnl_cpu_isa_avx2); break;
    case Isa::avx512:
      EXPECT_EQ(effective,
                __builtin_cpu_supports("avx512vnni") ? dnnl_cpu_isa_avx512_core_vnni : dnnl_cpu_isa_avx512_core);
      break;
    case Isa::avx512_bf16: EXPECT_EQ(effective, dnnl_cpu_isa_avx512_core_bf16); break;
    case Isa::amx: EXPECT_EQ(effective, dnnl_cpu_isa_avx512_core_amx); break;
  }
}

TEST(KernelIsa, ScopedChoiceLowersAndRestores) {
  const Isa before = kernel_isa();
  {
    const ScopedKernelIsa portable(Isa::portable);
    EXPECT_EQ(kernel_isa(), Isa::portable);
    {
      const ScopedKernelIsa best(Isa::amx);  // never above what the CPU has
      EXPECT_EQ(kernel_isa(), detected_isa());
    }
    EXPECT_EQ(kernel_isa(), Isa::portable);
  }
  EXPECT_EQ(kernel_isa(), before);
}

// For each level the CPU has, a child re-runs the two tests above, which expect that level in
// cpdit's kernels and in oneDNN's cap when the variable names it.
TEST(KernelIsa, EnvironmentSetsEveryLevelTheCpuHas) {
  if (std::getenv("CPDIT_KERNEL_ISA") != nullptr) GTEST_SKIP() << "this is a child run";
  for (Isa isa : kLevels) {
    if (isa > detected_isa()) continue;  // a level above the CPU's is refused (next tests)
    SCOPED_TRACE(isa_name(isa));
    const Child child =
        run_self(std::string("CPDIT_KERNEL_ISA=") + isa_name(isa),
                 "--gtest_filter=KernelIsa.PicksWhatTheCpuHas:KernelIsa.OneDnnIsCappedAtTheProcessLevel");
    EXPECT_EQ(child.exit_code, 0) << child.output;
    EXPECT_NE(child.output.find("[  PASSED  ] 2 tests"), std::string::npos) << child.output;
  }
}

TEST(KernelIsa, UnknownEnvironmentValueIsAOneLineError) {
  const Child child = run_self("CPDIT_KERNEL_ISA=sse9", "--gtest_list_tests");
  EXPECT_EQ(child.exit_code, 2);
  EXPECT_EQ(child.output,
            "cpdit: error: CPDIT_KERNEL_ISA=sse9 is not a choice; use portable, avx512, avx512_bf16, amx or auto\n");
}

// A level above the CPU's is refused by name, whatever this CPU is: isa_named is the parser the
// variable goes through (its errors reach stderr as the test above shows), given each CPU in turn.
TEST(KernelIsa, LevelAboveTheCpuIsAOneLineError) {
  for (Isa cpu : kLevels)
    for (Isa asked : kLevels) {
      SCOPED_TRACE(std::string(isa_name(asked)) + " on a CPU with " + isa_name(cpu));
      if (asked <= cpu) {
        EXPECT_EQ(isa_named(isa_name(asked), cpu), asked);
        continue;
      }
      try {
        isa_named(isa_name(asked), cpu);
        ADD_FAILURE() << "accepted";
      } catch (const Error& e) {
        EXPECT_EQ(e.kind(), ErrorKind::unsupported);
        EXPECT_EQ(std::string(e.what()), std::string("CPDIT_KERNEL_ISA=") + isa_name(asked) +
                                             " needs an instruction set this CPU lacks (it offers up to " +
                                             isa_name(cpu) + ")");
      }
    }
  EXPECT_EQ(isa_named("auto", Isa::avx512), Isa::avx512);
  EXPECT_EQ(isa_named("", Isa::amx), Isa::amx);
}

// The AMX tile kernels (bf16 and block-quantised Linear) are chosen at run time like the others: in
// a portable build too where the CPU has AMX, and never below the amx level.
TEST(KernelIsa, AmxFollowsTheRunTimeChoice) {
  EXPECT_EQ(amx_available(), kernel_isa() == Isa::amx);
  EXPECT_EQ(amx_available(), environment_level() == Isa::amx);
  const ScopedKernelIsa below(Isa::avx512_bf16);
  EXPECT_FALSE(amx_available());
}

}  // namespace
}  // namespace cpdit::kernels
