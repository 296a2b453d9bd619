// The fleet simulation's table (include/ratelimit/redis/README.md "Budget leases", sizing): 10, 100 and 1,000 instances
// over 100,000 keys.
#include <cstdio>
#include <cstdlib>

#include "lease_simulation.hpp"

int main(int argc, char** argv) {
  const double seconds = argc > 1 ? std::atof(argv[1]) : 10;
  std::printf(
      "| instances | keys | checks | fleet admitted | exact limiter admitted | under-admission | hottest key "
      "admitted / bound | Redis calls per check | 10 hottest keys: calls per check | intervals over the bound |\n"
      "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n");
  int failures = 0;
  for (const int n : {10, 100, 1000}) {
    const auto r = ratelimit_test::simulate(n, 100'000, 20'000, seconds, 42);
    const double under = 1.0 - static_cast<double>(r.admitted) / static_cast<double>(r.exact_admitted);
    std::printf("| %d | %zu | %llu | %llu | %llu | %.2f %% | %.3f | %.4f | %.4f | %llu |\n", n, r.keys,
                static_cast<unsigned long long>(r.checks), static_cast<unsigned long long>(r.admitted),
                static_cast<unsigned long long>(r.exact_admitted), 100 * under, r.hot_fraction_of_bound,
                static_cast<double>(r.redis_calls) / static_cast<double>(r.checks), r.hot_calls_per_check,
                static_cast<unsigned long long>(r.over_bound_intervals));
    std::fflush(stdout);
    if (r.over_bound_intervals != 0) ++failures;
  }
  return failures == 0 ? 0 : 1;
}
