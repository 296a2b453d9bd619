#pragma once

// Replays an access log through limiters on a ManualClock set to each line's timestamp: a dry run of
// policies on recorded traffic. Malformed lines and keys too long for the limiter are counted, never
// fatal. Servers with several workers write lines slightly out of order (the sample log: up to 59 s), so
// the requests are put in time order first. The log is read once; each policy replays the same requests.

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <deque>
#include <istream>
#include <limits>
#include <map>
#include <numeric>
#include <stdexcept>
#include <string>
#include <unordered_map>
#include <vector>

#include <ratelimit/ratelimit.hpp>

#include "access_log.hpp"

namespace replay {

/// Which part of a request names the limited client.
enum class KeyField { client, user_agent, target };

inline const std::string& key_of(const access_log::Entry& e, KeyField field) {
  switch (field) {
    case KeyField::user_agent: return e.user_agent;
    case KeyField::target: return e.target;
    case KeyField::client: break;
  }
  return e.client;
}

/// `later - earlier` for `later >= earlier`, exact over the whole int64 range (a log may hold times from
/// 1677 to 2262, further apart than int64 nanoseconds reach).
inline std::uint64_t gap(std::int64_t later, std::int64_t earlier) noexcept {
  return static_cast<std::uint64_t>(later) - static_cast<std::uint64_t>(earlier);
}

/// A `--period` in seconds as nanoseconds. Throws `std::invalid_argument` ("--period: ...") for a value
/// that is not finite, not > 0, below 1 ns or beyond what int64 nanoseconds hold (~292 years).
inline std::chrono::nanoseconds period_from_seconds(double seconds) {
  constexpr double kMaxSeconds = 9'223'372'036.0;  // INT64_MAX ns, rounded down to whole seconds
  char given[32];
  std::snprintf(given, sizeof given, "%g", seconds);
  if (!std::isfinite(seconds) || seconds <= 0 || seconds > kMaxSeconds) {
    throw std::invalid_argument(std::string("--period: must be a finite number of seconds in (0, 9223372036], got ") +
                                given);
  }
  const auto ns = static_cast<std::int64_t>(std::llround(seconds * 1e9));
  if (ns < 1) throw std::invalid_argument(std::string("--period: must be at least 1 ns, got ") + given + " s");
  return std::chrono::nanoseconds(ns);
}

/// The requests of a log, in time order, with clients numbered.
struct Traffic {
  std::int64_t lines = 0;
  std::int64_t malformed = 0;
  std::int64_t out_of_order = 0;      // lines earlier than the line before them
  std::int64_t long_keys = 0;         // lines whose key is longer than the limiter takes: not replayed
  std::vector<std::string> clients;   // distinct keys, numbered in order of first appearance
  std::vector<std::int64_t> time_ns;  // per request, ascending
  std::vector<std::uint32_t> client;  // per request, index into `clients`
  /// The finest step between distinct timestamps (the log's resolution; Common Log Format: >= 1 s); 0
  /// with fewer than two distinct timestamps; INT64_MAX when the only step is longer than that.
  std::int64_t resolution_ns = 0;
  /// Most requests of one client that share one timestamp (seen by the limiter as one instant).
  std::int64_t most_at_one_instant = 0;
};

/// Parses every line of `log`; keys over `max_key_bytes` are counted in `long_keys` and left out.
inline Traffic read_traffic(std::istream& log, KeyField field, std::size_t max_key_bytes = 512) {
  Traffic t;
  struct Request {
    std::int64_t time_ns;
    std::uint32_t client;
  };
  std::vector<Request> requests;
  std::unordered_map<std::string, std::uint32_t> ids;
  std::string line;
  std::int64_t previous = std::numeric_limits<std::int64_t>::min();
  while (std::getline(log, line)) {
    if (line.empty()) continue;
    ++t.lines;
    auto entry = access_log::parse_line(line);
    if (!entry) {
      ++t.malformed;
      continue;
    }
    const std::int64_t at =
        std::chrono::duration_cast<std::chrono::nanoseconds>(entry->time.time_since_epoch()).count();
    if (at < previous) ++t.out_of_order;
    previous = at;
    const std::string& key = key_of(*entry, field);
    if (key.size() > max_key_bytes) {
      ++t.long_keys;
      continue;
    }
    const auto [it, added] = ids.try_emplace(key, static_cast<std::uint32_t>(t.clients.size()));
    if (added) t.clients.push_back(key);
    requests.push_back({at, it->second});
  }
  std::stable_sort(requests.begin(), requests.end(),
                   [](const auto& a, const auto& b) { return a.time_ns < b.time_ns; });
  t.time_ns.reserve(requests.size());
  t.client.reserve(requests.size());
  std::vector<std::int64_t> last(t.clients.size(), std::numeric_limits<std::int64_t>::min());
  std::vector<std::int64_t> run(t.clients.size(), 0);
  std::uint64_t resolution = 0;
  for (std::size_t i = 0; i < requests.size(); ++i) {
    const auto [at, c] = requests[i];
    if (i > 0 && at != requests[i - 1].time_ns) resolution = std::gcd(resolution, gap(at, requests[i - 1].time_ns));
    run[c] = last[c] == at ? run[c] + 1 : 1;
    last[c] = at;
    t.most_at_one_instant = std::max(t.most_at_one_instant, run[c]);
    t.time_ns.push_back(at);
    t.client.push_back(c);
  }
  constexpr auto kMax = static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max());
  t.resolution_ns = static_cast<std::int64_t>(std::min(resolution, kMax));
  return t;
}

/// Most events of one series within any `window` (times in `(t - window, t]`); times ascending.
class WindowPeak {
 public:
  void add(std::int64_t t_ns, std::int64_t window_ns) {
    times_.push_back(t_ns);
    // front() <= t_ns - window_ns, without the subtraction that overflows near 1677.
    while (gap(t_ns, times_.front()) >= static_cast<std::uint64_t>(window_ns)) times_.pop_front();
    peak_ = std::max(peak_, static_cast<std::int64_t>(times_.size()));
  }
  [[nodiscard]] std::int64_t peak() const { return peak_; }

 private:
  std::deque<std::int64_t> times_;
  std::int64_t peak_ = 0;
};

/// Per client, the most requests within any `window_ns`: the offered peak rate.
inline std::vector<std::int64_t> offered_peaks(const Traffic& t, std::int64_t window_ns) {
  std::vector<WindowPeak> peaks(t.clients.size());
  for (std::size_t i = 0; i < t.time_ns.size(); ++i) peaks[t.client[i]].add(t.time_ns[i], window_ns);
  std::vector<std::int64_t> out;
  out.reserve(peaks.size());
  for (const WindowPeak& p : peaks) out.push_back(p.peak());
  return out;
}

/// How many `window_ns`-aligned windows (as a fixed window counts them) hold at least one request, and
/// how many of them follow a window that does too (edges with traffic on both sides, where the window
/// policies can differ).
struct Coverage {
  std::int64_t active = 0;
  std::int64_t adjacent = 0;
};
inline Coverage coverage(const Traffic& t, std::int64_t window_ns) {
  Coverage c;
  std::int64_t last = 0;
  for (std::size_t i = 0; i < t.time_ns.size(); ++i) {
    const std::int64_t w = t.time_ns[i] / window_ns - (t.time_ns[i] % window_ns < 0 ? 1 : 0);
    if (i == 0 || w != last) {
      ++c.active;
      if (i > 0 && w > last && w - 1 == last) ++c.adjacent;
    }
    last = w;
  }
  return c;
}

/// What one policy did with the traffic.
struct PolicyRun {
  std::int64_t admitted = 0;
  std::int64_t denied = 0;
  std::vector<std::int64_t> denied_by_client;  // per client
  std::vector<std::int64_t> peak_admitted;     // per client, most admitted within any window
  std::vector<bool> allowed;                   // per request
  /// Times a client was sent away: a run of denials of one client up to its next admitted request.
  std::int64_t waits = 0;
  /// The Retry-After (ns) told at the start of each wait with a finite one, ascending.
  std::vector<std::int64_t> wait_ns;

  [[nodiscard]] std::size_t limited_clients() const {
    return static_cast<std::size_t>(
        std::count_if(denied_by_client.begin(), denied_by_client.end(), [](std::int64_t d) { return d > 0; }));
  }
  [[nodiscard]] std::int64_t worst_burst() const {
    return peak_admitted.empty() ? 0 : *std::max_element(peak_admitted.begin(), peak_admitted.end());
  }
};

/// How far `run` moves the limiter's clock back from the log's times: a multiple of `window_ns` (so
/// windows stay aligned as in the log) that brings times near either end of int64 nanoseconds (1677,
/// 2262), where a limiter's clock stands still (include/ratelimit/README.md "Behaviour decisions"), close to 0. 0 when
/// the times need no move, span more than 2^61 ns (~73 years), or `window_ns` is over 2^61 ns.
inline std::int64_t clock_shift(const Traffic& t, std::int64_t window_ns) {
  constexpr std::int64_t kSafe = std::int64_t{1} << 61;  // inside the clock range of every valid policy
  if (t.time_ns.empty() || window_ns > kSafe) return 0;
  const std::int64_t first = t.time_ns.front(), last = t.time_ns.back();
  if ((first >= -kSafe && last <= kSafe) || gap(last, first) > static_cast<std::uint64_t>(kSafe)) return 0;
  const auto middle = static_cast<std::int64_t>(static_cast<std::uint64_t>(first) + gap(last, first) / 2);
  return middle / window_ns * window_ns;  // toward 0: never past the ends
}

/// Feeds every request of `t`, in time order, to `limiter` at the request's time on `clock` (which the
/// limiter reads), moved by `clock_shift`; `window_ns` is the span over which admitted bursts are
/// measured (the policy's period).
template <ratelimit::Limiter L>
PolicyRun run(const Traffic& t, L& limiter, ratelimit::ManualClock& clock, std::int64_t window_ns) {
  const std::int64_t shift = clock_shift(t, window_ns);
  PolicyRun r;
  r.denied_by_client.assign(t.clients.size(), 0);
  r.allowed.assign(t.time_ns.size(), false);
  std::vector<WindowPeak> peaks(t.clients.size());
  std::vector<bool> waiting(t.clients.size(), false);
  for (std::size_t i = 0; i < t.time_ns.size(); ++i) {
    clock.set(ratelimit::ManualClock::time_point(std::chrono::nanoseconds(t.time_ns[i] - shift)));
    const std::uint32_t c = t.client[i];
    const ratelimit::Decision d = limiter.allow(t.clients[c]);
    r.allowed[i] = d.allowed;
    if (d.allowed) {
      ++r.admitted;
      peaks[c].add(t.time_ns[i], window_ns);
      waiting[c] = false;
    } else {
      ++r.denied;
      ++r.denied_by_client[c];
      if (!waiting[c]) {
        ++r.waits;
        if (d.retry_after != ratelimit::Decision::never) r.wait_ns.push_back(d.retry_after.count());
      }
      waiting[c] = true;
    }
  }
  r.peak_admitted.reserve(peaks.size());
  for (const WindowPeak& p : peaks) r.peak_admitted.push_back(p.peak());
  std::sort(r.wait_ns.begin(), r.wait_ns.end());
  return r;
}

/// The `q`-quantile (0..1, nearest rank) of ascending `v`; 0 when empty.
inline std::int64_t quantile(const std::vector<std::int64_t>& v, double q) {
  if (v.empty()) return 0;
  const auto rank = static_cast<std::size_t>(std::ceil(q * static_cast<double>(v.size())));
  return v[std::min(v.size() - 1, rank == 0 ? 0 : rank - 1)];
}

// The single-policy report of earlier versions, kept for callers and tests.

struct ClientCounts {
  std::int64_t requests = 0;
  std::int64_t denied = 0;
};

struct Report {
  std::int64_t lines = 0;
  std::int64_t malformed = 0;
  std::int64_t out_of_order = 0;
  std::int64_t long_keys = 0;
  std::int64_t admitted = 0;
  std::int64_t denied = 0;
  std::map<std::string, ClientCounts> clients;  // by key
};

/// The longest key `limiter` takes (512, the limiters' default, when it does not say).
template <class L>
std::size_t max_key_bytes_of(const L& limiter) {
  if constexpr (requires { limiter.options().max_key_bytes; }) {
    return limiter.options().max_key_bytes;
  } else {
    return 512;
  }
}

/// Replays `log` through `limiter` and sums it up per client.
template <ratelimit::Limiter L>
Report run(std::istream& log, L& limiter, ratelimit::ManualClock& clock, KeyField field = KeyField::client) {
  const Traffic t = read_traffic(log, field, max_key_bytes_of(limiter));
  const PolicyRun r = run(t, limiter, clock, 1);
  Report report{.lines = t.lines,
                .malformed = t.malformed,
                .out_of_order = t.out_of_order,
                .long_keys = t.long_keys,
                .admitted = r.admitted,
                .denied = r.denied,
                .clients = {}};
  for (std::size_t i = 0; i < t.time_ns.size(); ++i) ++report.clients[t.clients[t.client[i]]].requests;
  for (std::size_t c = 0; c < t.clients.size(); ++c) report.clients[t.clients[c]].denied = r.denied_by_client[c];
  return report;
}

}  // namespace replay
