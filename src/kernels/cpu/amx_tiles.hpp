#pragma once
// AMX's tile registers, shared by every kernel that uses them (bf16_pairs, linear_amx). Linux hands
// a process the tile state only when it asks (once, for all its threads), and each thread sets the
// tile shapes before its first tile instruction.
namespace cpdit::kernels::amx {

// Whether this process may run AMX tile instructions: the build targets AMX-BF16 and Linux granted
// the tile state (asked on the first call).
bool granted();

// Configures the calling thread's eight tiles as 16 rows of 64 bytes (16 f32, or 16 pairs of bf16,
// a row). Call only when granted(); release with release_tiles() when done.
void configure_tiles();
void release_tiles();

}  // namespace cpdit::kernels::amx
