// Compiled with -fno-exceptions, and as C++17, by CTest tests that expect the library's #error, not raw compiler
// errors.
#include <ratelimit/ratelimit.hpp>

int main() { return 0; }
