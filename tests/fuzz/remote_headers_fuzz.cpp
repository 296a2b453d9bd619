// libFuzzer target: reading a remote's rate-limit fields (include/ratelimit/http/README.md "Calling someone else's
// API"). The input is lines `name: value` (names drawn from the fields read, or any); each report must hold every
// value within the maxima, and a RemoteQuotaLimiter fed the fields must keep its local ceiling.
//
// Fails (abort) on: UB or a memory error (built with -fsanitize=address,undefined, no recovery), any exception,
// a value outside the maxima, or more admissions than the local policy allows.
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <ratelimit/clock.hpp>
#include <ratelimit/http/remote_quota.hpp>

namespace {

using Fields = std::vector<std::pair<std::string, std::string>>;

/// Lines of the input as fields; a line without ':' is a value of the field the line's first byte picks.
Fields fields_of(std::string_view in) {
  static constexpr std::string_view kNames[] = {
      "RateLimit",         "RateLimit-Policy",      "RateLimit-Limit",   "RateLimit-Remaining", "RateLimit-Reset",
      "x-ratelimit-limit", "X-RateLimit-Remaining", "X-RATELIMIT-RESET", "Retry-After",         "Date"};
  Fields fields;
  while (!in.empty() && fields.size() < 64) {
    const std::size_t end = in.find('\n');
    std::string_view line = in.substr(0, end);
    in = end == std::string_view::npos ? std::string_view{} : in.substr(end + 1);
    const std::size_t colon = line.find(':');
    if (colon != std::string_view::npos && colon < 32) {
      fields.emplace_back(std::string(line.substr(0, colon)), std::string(line.substr(colon + 1)));
    } else if (!line.empty()) {
      const std::string_view name = kNames[static_cast<unsigned char>(line[0]) % std::size(kNames)];
      fields.emplace_back(std::string(name), std::string(line.substr(1)));
    }
  }
  return fields;
}

void check(bool ok) {
  if (!ok) std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const Fields fields = fields_of(std::string_view(reinterpret_cast<const char*>(data), size));
  const ratelimit::http::RemoteMaxima maxima{.quota = 50,
                                             .window = std::chrono::seconds(600),
                                             .reset = std::chrono::seconds(300),
                                             .retry_after = std::chrono::seconds(60)};
  const std::int64_t now_s = size > 0 && data[0] % 2 == 0 ? 1'700'000'000 : 0;
  const ratelimit::http::RemoteReport r =
      ratelimit::http::read_remote_report(ratelimit::http::remote_fields(fields), maxima, now_s);
  check(!r.limit || (*r.limit >= 0 && *r.limit <= maxima.quota));
  check(!r.remaining || (*r.remaining >= 0 && *r.remaining <= maxima.quota));
  check(!r.reset || (r.reset->count() >= 0 && *r.reset <= maxima.reset));
  check(!r.window || (r.window->count() >= 1 && *r.window <= maxima.window));
  check(!r.retry_after || (r.retry_after->count() >= 0 && *r.retry_after <= maxima.retry_after));
  check(r.malformed >= 0 && r.clamped >= 0);

  // The limiter fed these fields after every admission for 10 s: never more than its local policy's 3 + 2/s.
  ratelimit::ManualClock clock;
  ratelimit::http::RemoteQuotaOptions options;
  options.maxima = maxima;
  options.wall_clock = [] { return std::chrono::system_clock::time_point(std::chrono::seconds(1'700'000'000)); };
  ratelimit::http::RemoteQuotaLimiter<ratelimit::ManualClock> limiter(
      ratelimit::Gcra{.limit = 2, .period = std::chrono::seconds(1), .burst = 3}, options, clock);
  int admitted = 0;
  for (int step = 0; step < 100; ++step) {
    for (int i = 0; i < 10; ++i) {
      const ratelimit::http::RemoteAdmission a = limiter.try_acquire("p");
      if (!a) break;
      ++admitted;
      limiter.record("p", a.ticket, step % 7 == 0 ? 429 : 200, fields);
    }
    clock.advance(std::chrono::milliseconds(100));
  }
  check(admitted <= 3 + 2 * 10);
  return 0;
}
