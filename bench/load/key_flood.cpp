// Key flood: N distinct keys through one MemoryLimiter capped at max_keys, against the same
// number of checks on one hot key. Checks that the key count stays at the cap, that peak RSS stays under a
// stated bound, and that flood throughput stays within 2x of the hot-key throughput. Also reports a floor:
// the hash, clock read and one cache miss that any check of a new key needs, to tell the store's own cost
// from the memory latency of the machine.
//
// Usage: ratelimit_key_flood [--keys N] [--max-keys M] [--rss-bound-mib B] [--min-ratio R]
//   defaults: 10,000,000 keys, max_keys 100,000, bound 64 MiB of peak RSS growth, ratio 0.5.
// Exit status 0 when every check holds, 1 otherwise. Under a sanitizer the RSS and throughput checks are
// reported but not enforced (shadow memory and instrumentation change both).
#include <algorithm>
#include <charconv>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <string_view>
#include <vector>

#include <ratelimit/detail/siphash.hpp>
#include <ratelimit/ratelimit.hpp>

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define RATELIMIT_FLOOD_SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer) || __has_feature(undefined_behavior_sanitizer)
#define RATELIMIT_FLOOD_SANITIZED 1
#endif
#endif
#ifndef RATELIMIT_FLOOD_SANITIZED
#define RATELIMIT_FLOOD_SANITIZED 0
#endif

namespace {

// A field of /proc/self/status in KiB ("VmRSS", "VmHWM"), or -1.
long status_kib(const char* field) {
  std::ifstream in("/proc/self/status");
  std::string line;
  const std::size_t n = std::strlen(field);
  while (std::getline(in, line)) {
    if (line.compare(0, n, field) == 0 && line.size() > n && line[n] == ':') return std::atol(line.c_str() + n + 1);
  }
  return -1;
}

// "user:<i>" in a caller's buffer: the same work for the flood and the hot key.
std::string_view key_of(char (&buf)[32], std::uint64_t i) {
  std::memcpy(buf, "user:", 5);
  const auto r = std::to_chars(buf + 5, buf + sizeof buf, i);
  return std::string_view(buf, static_cast<std::size_t>(r.ptr - buf));
}

template <class L>
double run(L& limiter, std::uint64_t first, std::uint64_t n, bool hot, std::uint64_t& allowed) {
  char buf[32];
  const auto start = std::chrono::steady_clock::now();
  for (std::uint64_t i = first; i < first + n; ++i) {
    allowed += limiter.allow(key_of(buf, hot ? 42 : i)).allowed ? 1U : 0U;
  }
  const std::chrono::duration<double> took = std::chrono::steady_clock::now() - start;
  return took.count();
}

// The least a check of a new key can cost: the same key formatting, hash and clock read, and one
// read-modify-write of a random cache line in a buffer as large as the table (the miss that finding a new
// key's slot costs), without any table logic. Measured beside the flood so the ratios can be compared.
double run_floor(std::vector<std::uint64_t>& lines, std::uint64_t first, std::uint64_t n, std::uint64_t& sink) {
  char buf[32];
  const auto start = std::chrono::steady_clock::now();
  for (std::uint64_t i = first; i < first + n; ++i) {
    const std::uint64_t h = ratelimit::detail::siphash<1, 3>(0x1234, 0x5678, key_of(buf, i));
    __extension__ using u128 = unsigned __int128;
    std::uint64_t& word = lines[static_cast<std::size_t>((u128{h} * (lines.size() / 8)) >> 64) * 8];
    word += static_cast<std::uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count());
    sink += word;
  }
  const std::chrono::duration<double> took = std::chrono::steady_clock::now() - start;
  return took.count();
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  std::uint64_t keys = 10'000'000, max_keys = 100'000;
  double rss_bound_mib = 64, min_ratio = 0.5;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string_view a = argv[i];
    if (a == "--keys")
      keys = std::strtoull(argv[i + 1], nullptr, 10);
    else if (a == "--max-keys")
      max_keys = std::strtoull(argv[i + 1], nullptr, 10);
    else if (a == "--rss-bound-mib")
      rss_bound_mib = std::atof(argv[i + 1]);
    else if (a == "--min-ratio")
      min_ratio = std::atof(argv[i + 1]);
    else {
      std::fprintf(stderr, "usage: %s [--keys N] [--max-keys M] [--rss-bound-mib B] [--min-ratio R]\n", argv[0]);
      return 2;
    }
  }
  // 10 per hour, burst 10: a key stays in use (not full) for 6 min after a request, longer than the flood
  // takes even under ThreadSanitizer, so at the cap each new key evicts one (the worst case; full keys
  // would just be reclaimed).
  const ratelimit::Gcra policy{.limit = 10, .period = std::chrono::hours(1), .burst = 10};
  const ratelimit::MemoryOptions options{.max_keys = max_keys};
  const long rss_before = status_kib("VmRSS");

  // Hot key, flood and floor run in alternating chunks of the same size, so that load from other
  // processes on a shared machine falls on all alike; each ratio is the median over the chunk rounds.
  constexpr std::uint64_t kChunk = 1U << 16;
  ratelimit::MemoryLimiter hot(policy, options);
  ratelimit::MemoryLimiter flood(policy, options);
  // 64 bytes per key at the cap: about the table's size (its RSS is subtracted below).
  std::vector<std::uint64_t> floor_lines(static_cast<std::size_t>(max_keys) * 8, 1);
  const double floor_mib = static_cast<double>(floor_lines.size() * sizeof(std::uint64_t)) / (1024.0 * 1024.0);
  std::uint64_t hot_allowed = 0, allowed = 0, sink = 0;
  (void)run(hot, 0, kChunk, true, hot_allowed);  // warm up
  std::vector<double> flood_ratios, floor_ratios;
  double hot_seconds = 0, flood_seconds = 0, floor_seconds = 0;
  for (std::uint64_t done = 0; done < keys;) {
    const std::uint64_t n = std::min(kChunk, keys - done);
    const double h = run(hot, 0, n, true, hot_allowed);
    const double f = run(flood, done, n, false, allowed);
    const double m = run_floor(floor_lines, done, n, sink);
    hot_seconds += h;
    flood_seconds += f;
    floor_seconds += m;
    flood_ratios.push_back(h / f);
    floor_ratios.push_back(h / m);
    done += n;
  }
  const double hot_rate = static_cast<double>(keys) / hot_seconds;
  const double flood_rate = static_cast<double>(keys) / flood_seconds;
  const double floor_rate = static_cast<double>(keys) / floor_seconds;
  const double ratio = median(flood_ratios);
  const long peak = status_kib("VmHWM");
  const double growth_mib = static_cast<double>(peak - rss_before) / 1024.0 - floor_mib;

  std::printf("key flood: %llu distinct keys, max_keys %llu%s\n", static_cast<unsigned long long>(keys),
              static_cast<unsigned long long>(max_keys), RATELIMIT_FLOOD_SANITIZED ? " (sanitizer build)" : "");
  std::printf("  hot key    %12.0f checks/s\n", hot_rate);
  std::printf("  flood      %12.0f checks/s   median chunk ratio flood/hot %.2f (must be >= %.2f)\n", flood_rate, ratio,
              min_ratio);
  std::printf("  miss floor %12.0f checks/s   median chunk ratio floor/hot %.2f (hash, clock, one random line; %llu)\n",
              floor_rate, median(floor_ratios), static_cast<unsigned long long>(sink % 10));
  std::printf("  keys held  %zu (cap %llu), evictions %zu, table %.1f MiB\n", flood.size(),
              static_cast<unsigned long long>(max_keys), flood.evictions(),
              static_cast<double>(flood.table_bytes()) / (1024.0 * 1024.0));
  std::printf("  RSS before %.1f MiB, peak %.1f MiB, growth %.1f MiB without the floor's %.1f MiB (bound %.1f MiB)\n",
              static_cast<double>(rss_before) / 1024.0, static_cast<double>(peak) / 1024.0, growth_mib, floor_mib,
              rss_bound_mib);

  bool ok = true;
  auto expect = [&ok](bool cond, const char* what) {
    if (!cond) {
      std::printf("  FAILED: %s\n", what);
      ok = false;
    }
  };
  expect(allowed == keys, "every fresh key is admitted");
  expect(flood.size() <= max_keys, "keys held <= max_keys");
  expect(flood.evictions() + flood.size() == keys, "every key beyond the cap evicted one");
  if (!RATELIMIT_FLOOD_SANITIZED) {
    expect(growth_mib <= rss_bound_mib, "peak RSS growth within the bound");
    expect(ratio >= min_ratio, "flood throughput within 2x of the hot key");
  }
  std::printf("%s\n", ok ? "key flood: PASS" : "key flood: FAIL");
  return ok ? 0 : 1;
}
