#pragma once
// AMX's tile registers, shared by every kernel that uses them (bf16_pairs, linear_amx). The tile
// kernels are compiled in every build (isa_target.hpp) and run at the top kernel_isa() level only, so a ScopedKernelIsa or CPDIT_KERNEL_ISA below it turns them off. Linux
// hands a process the tile state only when it asks (once, for all its threads), and each thread sets
// the tile shapes before its first tile instruction.
namespace cpdit::kernels::amx {

// Whether AMX-BF16 tile products may run now: the CPU has them, Linux granted the tile state (asked
// on the first call) and kernel_isa() is at its top level.
bool granted();

// Configures the calling thread's eight tiles as 16 rows of 64 bytes (16 f32, or 16 pairs of bf16,
// a row). Call only when granted(); release with release_tiles() when done.
void configure_tiles();
void release_tiles();

}  // namespace cpdit::kernels::amx
