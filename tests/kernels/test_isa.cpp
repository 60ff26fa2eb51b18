// The kernels' run-time instruction-set choice (kernels/isa.hpp): it picks what CPUID reports, a
// test can lower it and gets the old choice back, and CPDIT_KERNEL_ISA lowers it for a whole
// process (checked in a child process: the variable is read once, before main).
#include <cpdit/kernels/cpu.hpp>
#include <cpdit/kernels/isa.hpp>

#include <gtest/gtest.h>

#include <array>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <sys/wait.h>

namespace cpdit::kernels {
namespace {

// What this CPU offers, asked independently of the library.
Isa cpuid_isa() {
  __builtin_cpu_init();
  if (!__builtin_cpu_supports("avx512f")) return Isa::portable;
  return __builtin_cpu_supports("avx512bf16") ? Isa::avx512_bf16 : Isa::avx512;
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

bool environment_forces_portable() {
  const char* text = std::getenv("CPDIT_KERNEL_ISA");
  return text != nullptr && std::string(text) == "portable";
}

// In a portable build (-DCPDIT_NATIVE=OFF) as in a native one: the AVX-512 kernels run where the
// CPU has them.
TEST(KernelIsa, PicksWhatTheCpuHas) {
  EXPECT_EQ(detected_isa(), cpuid_isa());
  EXPECT_EQ(kernel_isa(), environment_forces_portable() ? Isa::portable : cpuid_isa()) << isa_name(kernel_isa());
}

TEST(KernelIsa, ScopedChoiceLowersAndRestores) {
  const Isa before = kernel_isa();
  {
    const ScopedKernelIsa portable(Isa::portable);
    EXPECT_EQ(kernel_isa(), Isa::portable);
    {
      const ScopedKernelIsa best(Isa::avx512_bf16);  // never above what the CPU has
      EXPECT_EQ(kernel_isa(), detected_isa());
    }
    EXPECT_EQ(kernel_isa(), Isa::portable);
  }
  EXPECT_EQ(kernel_isa(), before);
}

// The child re-runs PicksWhatTheCpuHas, which expects portable when the variable says so.
TEST(KernelIsa, EnvironmentForcesThePortableLoops) {
  if (environment_forces_portable()) GTEST_SKIP() << "this is the child run";
  const Child child = run_self("CPDIT_KERNEL_ISA=portable", "--gtest_filter=KernelIsa.PicksWhatTheCpuHas");
  EXPECT_EQ(child.exit_code, 0) << child.output;
  EXPECT_NE(child.output.find("[  PASSED  ] 1 test"), std::string::npos) << child.output;
}

TEST(KernelIsa, UnknownEnvironmentValueIsAOneLineError) {
  const Child child = run_self("CPDIT_KERNEL_ISA=sse9", "--gtest_list_tests");
  EXPECT_EQ(child.exit_code, 2);
  EXPECT_EQ(child.output, "cpdit: error: CPDIT_KERNEL_ISA=sse9 is not a choice; use portable or auto\n");
}

// The AMX tile kernels (bf16 and block-quantised Linear) are chosen at run time like the others: in
// a portable build too where the CPU has AMX, and never below the top kernel_isa() level.
TEST(KernelIsa, AmxFollowsTheRunTimeChoice) {
  __builtin_cpu_init();
  const bool cpu_has_amx = __builtin_cpu_supports("amx-tile") && __builtin_cpu_supports("amx-bf16");
  // Linux may still refuse the tile state; where it grants it, the CPU has AMX.
  if (!cpu_has_amx || kernel_isa() != Isa::avx512_bf16) {
    EXPECT_FALSE(amx_available());
  } else {
    EXPECT_TRUE(amx_available()) << "Linux refused the AMX tile state";
  }
  const ScopedKernelIsa below(Isa::avx512);
  EXPECT_FALSE(amx_available());
}

}  // namespace
}  // namespace cpdit::kernels
