// The one unit of the program that compiles the core's limiters (<ratelimit/src.hpp>).
#include <ratelimit/src.hpp>
