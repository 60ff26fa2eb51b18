#pragma once
// AMX's tile registers, shared by every kernel that uses them (bf16_pairs, linear_amx). The tile
// kernels are compiled in every build (isa_target.hpp) and run at the amx kernel_isa() level only, so
// a ScopedKernelIsa or CPDIT_KERNEL_ISA below it turns them off. Each thread sets the tile shapes
// before its first tile instruction.
namespace cpdit::kernels::amx {

// Whether AMX-BF16 tile products may run now: kernel_isa() is amx, which the CPU has only where Linux
// granted this process the tile state.
bool granted();

// Configures the calling thread's eight tiles as 16 rows of 64 bytes (16 f32, or 16 pairs of bf16,
// a row). Call only when granted(); release with release_tiles() when done.
void configure_tiles();
void release_tiles();

}  // namespace cpdit::kernels::amx
