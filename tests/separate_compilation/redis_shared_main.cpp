// Runs the limiter of the test's shared library (redis_shared_library.cpp), which links ratelimit::redis_compiled.
#include <cstdio>

#include "separate_compilation/redis_shared_library.hpp"

int main() {
  const bool ok = separate_shared::fail_closed_denies();
  std::printf("a limiter in a shared library, nothing listening, fail_closed: %s\n", ok ? "denied" : "WRONG");
  return ok ? 0 : 1;
}
