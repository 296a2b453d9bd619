// Compiled with -fno-exceptions by a CTest test that expects the library's #error, not raw compiler errors.
#include <ratelimit/ratelimit.hpp>

int main() { return 0; }
