#pragma once
// AMX's tile registers, shared by every kernel that uses them (bf16_pairs, linear_amx,
// linear_amx_int8). The tile kernels are compiled in every build (isa_target.hpp) and run at the top
// kernel_isa() level only, so a ScopedKernelIsa or CPDIT_KERNEL_ISA below it turns them off. Linux
// hands a process the tile state only when it asks (once, for all its threads), and each thread sets
// the tile shapes before its first tile instruction.
namespace cpdit::kernels::amx {

// Whether AMX-BF16 tile products may run now: the CPU has them, Linux granted the tile state (asked
// on the first call) and kernel_isa() is at its top level.
bool granted();
// The same for AMX-INT8 tile products (signed int8 x signed int8 -> int32).
bool int8_granted();

// Configures the calling thread's eight tiles as 16 rows of 64 bytes (16 f32, or 16 pairs of bf16,
// a row). Call only when granted(); release with release_tiles() when done.
void configure_tiles();
// Configures the tiles for products over one 32-value block of int8 codes: tiles 0-3 hold 16 x 16
// int32 sums, tiles 4-5 16 rows of 32 codes (the left operand), tiles 6-7 8 rows of 16 x 4 codes
// (the right operand, four consecutive k values per column). Call only when int8_granted().
void configure_int8_tiles();
void release_tiles();

}  // namespace cpdit::kernels::amx
