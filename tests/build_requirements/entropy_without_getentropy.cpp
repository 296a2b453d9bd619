// A system whose getentropy fails although it has entropy (a kernel before 3.17, or a seccomp sandbox that
// refuses getrandom with ENOSYS or EPERM): the keyed hash's seed comes from another source (std::random_device
// reads /dev/urandom or the CPU's generator, as the in-memory store did before it used getentropy), so a
// MemoryLimiter is still made. This program's getentropy stands in for the C library's.
#include <cerrno>
#include <cstddef>
#include <cstdio>
#include <exception>

#include <ratelimit/ratelimit.hpp>

extern "C" int getentropy(void*, std::size_t) {
  errno = ENOSYS;
  return -1;
}

int main() {
  try {
    ratelimit::MemoryLimiter<ratelimit::Gcra> limiter(
        ratelimit::Gcra{.limit = 10, .period = std::chrono::seconds(1), .burst = 1});
    if (!limiter.allow("k").allowed) {
      std::puts("the first check was denied");
      return 1;
    }
  } catch (const std::exception& e) {
    std::printf("MemoryLimiter not made without getentropy: %s\n", e.what());
    return 1;
  }
  std::puts("made and checked without getentropy");
  return 0;
}
