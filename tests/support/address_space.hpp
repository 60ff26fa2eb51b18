#pragma once
// Limits this process's address space to what it has mapped now plus `room` bytes, so that a test
// (in a death-test child) can make allocations and thread stacks fail on purpose. Not usable under a
// sanitizer, which maps terabytes of shadow memory up front.
#include <cstddef>
#include <fstream>
#include <string>
#include <sys/resource.h>

namespace cpdit::testing {

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
constexpr bool kAddressSpaceLimitWorks = false;
#else
constexpr bool kAddressSpaceLimitWorks = true;
#endif

// False when the limit could not be set.
inline bool limit_address_space(size_t room) {
  size_t kib = 0;
  std::ifstream status("/proc/self/status");
  for (std::string key; status >> key;)
    if (key == "VmSize:" && status >> kib) break;
  const rlimit limit{kib * 1024 + room, RLIM_INFINITY};
  return kib > 0 && setrlimit(RLIMIT_AS, &limit) == 0;
}

}  // namespace cpdit::testing
