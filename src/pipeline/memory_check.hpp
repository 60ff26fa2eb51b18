#pragma once
// Refuses a generate that cannot fit in memory before any rank starts, naming the estimate and what
// is available, instead of failing deep in the loop or being ended by the kernel's OOM killer.
#include <cstdint>

namespace cpdit::pipeline {

// Bytes this process can still get: MemAvailable (/proc/meminfo), lowered to the cgroup v2 limit
// minus the cgroup's usage when it has one.
double available_memory_bytes();

// The estimate is a lower bound, only what the loop certainly holds at once: the resident weights;
// the initial noise, the running latents and the model's output (`latent_elements` f32 each); and
// every token's hidden state (`tokens` x `hidden` f32) as a block's input and its output, summed
// over the ranks. A run refused here could not have finished; one let through may still not fit.
void check_generate_fits(double latent_elements, double tokens, double hidden);

}  // namespace cpdit::pipeline
