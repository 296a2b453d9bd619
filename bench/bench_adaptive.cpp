// Adaptive concurrency limits on a simulated service (include/ratelimit/concurrency/README.md "Evaluation"):
// a discrete-event simulation on simulated time, fixed seed, no arguments needed.
//
// The service: capacity C = 100. Each admitted request brings work drawn from an exponential distribution
// of mean 10 ms; with n requests in service each progresses at rate min(1, C / n) (at or below C a request
// takes its work's time; above, every request in service slows in proportion: mean 10 ms x n / C).
// Open-loop Poisson arrivals. In front of it a gate: at most `limit` in service (the algorithm's current
// limit, or a static one); a request finding no room waits in a FIFO queue of at most kQueueLimit requests
// for at most kMaxWait, else it is refused (dropped). Each completion is one `LatencySample` for the
// algorithm (round trip = completion - grant; in flight at grant, itself included); a raised limit admits
// queued requests at once.
//
// Usage: bench_adaptive [--series FILE] [--quick]
//   --series FILE  writes the capacity-change run as a time series (limit and p99 per 100 ms) for the chart
//                  (bench/adaptive.gp); --quick shortens every run (for the CTest smoke run).
// Prints a table of every run, then, last, one JSON line per adaptive algorithm.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <deque>
#include <functional>
#include <limits>
#include <memory>
#include <optional>
#include <queue>
#include <random>
#include <string>
#include <vector>

#include <ratelimit/concurrency/adaptive.hpp>

using namespace std::chrono_literals;

namespace {

constexpr double kCapacity = 100;                   // C, requests in service at full speed
constexpr double kMeanWorkNs = 10e6;                // mean service time at or below C
constexpr double kCapacityRate = kCapacity / 1e-2;  // completions per second at capacity (10,000)
constexpr std::size_t kQueueLimit = 100;            // FIFO queue in front of the service, requests
constexpr double kMaxWaitNs = 10e6;                 // longest wait in that queue (one mean service time)
constexpr double kBucketNs = 100e6;                 // time-series resolution
constexpr std::uint64_t kSeed = 20261204;
constexpr int kChangeSeeds = 5;  // capacity-change runs per limiter; the JSON reports the worst

/// A gate's limit: an adaptive algorithm, or a static number when `algorithm` is null.
struct Limiter {
  std::string name;
  std::unique_ptr<ratelimit::AdaptiveAlgorithm> algorithm;
  std::int64_t static_limit = 0;
  [[nodiscard]] std::int64_t limit() const { return algorithm ? algorithm->limit() : static_limit; }
};

/// Capacity from `at_ns` on.
struct CapacityStep {
  double at_ns;
  double capacity;
};

struct RunSpec {
  double load;  // arrival rate / kCapacityRate
  double duration_ns;
  double warmup_ns;  // completions before this are not measured
  std::vector<CapacityStep> capacity;
  bool series = false;
};

struct SeriesRow {
  double t_s;
  double capacity;
  std::int64_t limit;
  double p99_ms;
};

struct RunResult {
  std::vector<double> latency_ms;  // arrival to completion, measured completions
  std::int64_t arrived = 0;
  std::int64_t completed = 0;
  std::int64_t refused = 0;
  std::int64_t timed_out = 0;
  double measured_s = 0;
  std::vector<std::pair<double, std::int64_t>> limit_changes;  // (t ns, limit), the first at t = 0
  std::vector<SeriesRow> series;
};

double percentile(std::vector<double> v, double q) {
  if (v.empty()) return 0;
  const auto k = static_cast<std::size_t>(q * static_cast<double>(v.size() - 1));
  std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(k), v.end());
  return v[k];
}

/// The simulation of one run: service, gate, queue, arrivals, on simulated time in ns (doubles).
class Simulation {
 public:
  Simulation(const RunSpec& spec, Limiter& limiter, std::uint64_t seed)
      : spec_(spec), limiter_(limiter), random_(seed) {}

  RunResult run() {
    capacity_ = spec_.capacity.front().capacity;
    std::size_t next_step = 1;
    next_arrival_ = gap();
    result_.limit_changes.emplace_back(0.0, limiter_.limit());
    next_bucket_ = kBucketNs;
    while (true) {
      const double rate = service_rate();
      const double t_done = service_.empty() ? kNever : now_ + (service_.top().finish_v - virtual_) / rate;
      const double t_expire = queue_.empty() ? kNever : queue_.front().deadline;
      const double t_step = next_step < spec_.capacity.size() ? spec_.capacity[next_step].at_ns : kNever;
      const double t = std::min({t_done, t_expire, t_step, next_arrival_, next_bucket_});
      if (t >= spec_.duration_ns) break;
      virtual_ += (t - now_) * rate;
      now_ = t;
      if (t == t_done) {
        complete();
      } else if (t == t_expire) {
        queue_.pop_front();
        ++result_.timed_out;
      } else if (t == t_step) {
        capacity_ = spec_.capacity[next_step++].capacity;
      } else if (t == next_bucket_) {
        close_bucket();
      } else {
        arrive();
      }
    }
    result_.measured_s = (spec_.duration_ns - spec_.warmup_ns) / 1e9;
    return std::move(result_);
  }

 private:
  static constexpr double kNever = std::numeric_limits<double>::infinity();
  struct InService {
    double finish_v;  // virtual time at which its work is done
    double arrived;
    double granted;
    std::int64_t in_flight;  // at grant, itself included
    bool operator>(const InService& o) const { return finish_v > o.finish_v; }
  };
  struct Waiting {
    double arrived;
    double deadline;
  };

  [[nodiscard]] double service_rate() const {
    const auto n = static_cast<double>(service_.size());
    return n <= capacity_ ? 1.0 : capacity_ / n;
  }
  double gap() {
    const double rate_per_ns = spec_.load * kCapacityRate / 1e9;
    return now_ - std::log1p(-uniform()) / rate_per_ns;
  }
  double uniform() { return static_cast<double>(random_() >> 11) * 0x1.0p-53; }

  void arrive() {
    ++result_.arrived;
    next_arrival_ = gap();
    if (queue_.empty() && static_cast<std::int64_t>(service_.size()) < limiter_.limit()) {
      grant(now_);
    } else if (queue_.size() < kQueueLimit) {
      queue_.push_back({now_, now_ + kMaxWaitNs});
    } else {
      ++result_.refused;
    }
  }

  void grant(double arrived) {
    const double work = -std::log1p(-uniform()) * kMeanWorkNs;
    service_.push({virtual_ + work, arrived, now_, static_cast<std::int64_t>(service_.size()) + 1});
  }

  void complete() {
    const InService done = service_.top();
    service_.pop();
    const double latency_ms = (now_ - done.arrived) / 1e6;
    if (now_ >= spec_.warmup_ns) {
      ++result_.completed;
      result_.latency_ms.push_back(latency_ms);
    }
    if (spec_.series) bucket_ms_.push_back(latency_ms);
    if (limiter_.algorithm) {
      const std::int64_t before = limiter_.limit();
      limiter_.algorithm->on_sample({.now_ns = std::llround(now_),
                                     .rtt_ns = std::llround(now_ - done.granted),
                                     .in_flight = done.in_flight,
                                     .outcome = ratelimit::PermitOutcome::succeeded});
      if (limiter_.limit() != before) result_.limit_changes.emplace_back(now_, limiter_.limit());
    }
    while (!queue_.empty() && static_cast<std::int64_t>(service_.size()) < limiter_.limit()) {
      grant(queue_.front().arrived);
      queue_.pop_front();
    }
  }

  void close_bucket() {
    if (spec_.series) {
      result_.series.push_back({now_ / 1e9, capacity_, limiter_.limit(), percentile(bucket_ms_, 0.99)});
      bucket_ms_.clear();
    }
    next_bucket_ += kBucketNs;
  }

  const RunSpec& spec_;
  Limiter& limiter_;
  std::mt19937_64 random_;
  RunResult result_;
  double now_ = 0;
  double virtual_ = 0;
  double capacity_ = kCapacity;
  double next_arrival_ = 0;
  double next_bucket_ = 0;
  std::priority_queue<InService, std::vector<InService>, std::greater<>> service_;
  std::deque<Waiting> queue_;
  std::vector<double> bucket_ms_;
};

/// The adaptive algorithms as the harness runs them: the library's defaults, except AIMD's latency
/// threshold, which has no default that fits every service (1.2 x the unloaded mean service time here).
std::vector<std::function<std::unique_ptr<ratelimit::AdaptiveAlgorithm>()>> algorithms() {
  return {
      [] { return std::make_unique<ratelimit::AimdLimit>(ratelimit::AimdOptions{.latency_threshold = 12ms}); },
      [] { return std::make_unique<ratelimit::GradientLimit>(); },
      [] { return std::make_unique<ratelimit::VegasLimit>(); },
  };
}

Limiter adaptive(int index) {
  auto algorithm = algorithms()[static_cast<std::size_t>(index)]();
  std::string name(algorithm->name());
  return Limiter{name, std::move(algorithm), 0};
}
Limiter fixed(std::int64_t limit) { return Limiter{"static_" + std::to_string(limit), nullptr, limit}; }

struct Durations {
  double steady_ns;
  double warmup_ns;
  double phase_ns;  // each of the three phases of the capacity-change run
};

RunResult run_steady(Limiter limiter, double load, const Durations& d, std::uint64_t seed) {
  RunSpec spec{load, d.steady_ns, d.warmup_ns, {{0, kCapacity}}};
  return Simulation(spec, limiter, seed).run();
}

RunResult run_change(Limiter& limiter, const Durations& d, bool series, std::uint64_t seed) {
  RunSpec spec{2.0, 3 * d.phase_ns, 0, {{0, kCapacity}, {d.phase_ns, kCapacity / 2}, {2 * d.phase_ns, kCapacity}}};
  spec.series = series;
  return Simulation(spec, limiter, seed).run();
}

/// One phase of constant capacity: seconds from `from_ns` until the limit stays within 20 % of `capacity` up to
/// `to_ns` (the whole phase when it is outside at the end), and the largest relative distance of the limit from
/// `capacity` in the second half of the phase (the steady state, where probes and noise move it).
struct Convergence {
  double seconds;
  double oscillation;
};

Convergence converge(const std::vector<std::pair<double, std::int64_t>>& changes, double from_ns, double to_ns,
                     double capacity) {
  auto distance = [&](std::int64_t limit) { return std::abs(static_cast<double>(limit) - capacity) / capacity; };
  // The phase as segments (start, limit): the limit in force at from_ns, then each change inside the phase.
  std::vector<std::pair<double, std::int64_t>> segments{{from_ns, changes.front().second}};
  for (const auto& [t, limit] : changes) {
    if (t <= from_ns) {
      segments.front().second = limit;
    } else if (t < to_ns) {
      segments.emplace_back(t, limit);
    }
  }
  std::size_t settled = 0;  // the first segment after the last one outside the band
  double oscillation = 0;
  const double steady_ns = (from_ns + to_ns) / 2;
  for (std::size_t i = 0; i < segments.size(); ++i) {
    if (distance(segments[i].second) > 0.2) settled = i + 1;
    const bool reaches_steady = i + 1 == segments.size() || segments[i + 1].first > steady_ns;
    if (reaches_steady) oscillation = std::max(oscillation, distance(segments[i].second));
  }
  const double seconds = settled == segments.size() ? to_ns - from_ns : segments[settled].first - from_ns;
  return {seconds / 1e9, oscillation};
}

struct Row {
  std::string name;
  double load;
  double p99_ms;
  double goodput_fraction;
  double refused_fraction;
};

Row summarise(const std::string& name, double load, const RunResult& r, double slo_ms) {
  const auto good = std::count_if(r.latency_ms.begin(), r.latency_ms.end(), [&](double l) { return l <= slo_ms; });
  const double arrived = static_cast<double>(std::max<std::int64_t>(r.arrived, 1));
  return {name, load, percentile(r.latency_ms, 0.99), static_cast<double>(good) / r.measured_s / kCapacityRate,
          static_cast<double>(r.refused + r.timed_out) / arrived};
}

void write_series(const char* path, const std::vector<std::pair<std::string, RunResult>>& runs) {
  std::FILE* out = std::fopen(path, "w");
  if (!out) {
    std::fprintf(stderr, "bench_adaptive: cannot write %s: %s\n", path, std::strerror(errno));
    std::exit(1);
  }
  std::fprintf(out,
               "# capacity-change run (load 2x of C = 100; C = 50 in the middle third), first seed; one block\n"
               "# per limiter (gnuplot index 0..5: aimd, gradient, vegas, static_50, static_100, static_400)\n");
  for (const auto& [name, run] : runs) {
    std::fprintf(out, "# %s: t_s,capacity,limit,p99_ms\n", name.c_str());
    for (const SeriesRow& row : run.series) {
      std::fprintf(out, "%.2f,%.0f,%lld,%.2f\n", row.t_s, row.capacity, static_cast<long long>(row.limit), row.p99_ms);
    }
    std::fprintf(out, "\n\n");
  }
  std::fclose(out);
}

/// What the JSON line of one limiter says.
struct Summary {
  Row at_2x;
  Convergence first, down, up;  // each the worst over the seeds of the capacity-change run
};

/// The worse of two convergences, field by field.
Convergence worst(Convergence a, Convergence b) {
  return {std::max(a.seconds, b.seconds), std::max(a.oscillation, b.oscillation)};
}

/// Runs one limiter at every load (printing a table row each) and through the capacity change with
/// `change_seeds` seeds; the first seed's run goes to `series` when given.
Summary evaluate(const std::function<Limiter()>& make, double unloaded_p99, const Durations& d, int change_seeds,
                 std::vector<std::pair<std::string, RunResult>>* series) {
  Summary s{};
  for (double load : {0.5, 1.0, 2.0, 4.0}) {
    Limiter limiter = make();
    const std::string name = limiter.name;
    const Row row = summarise(name, load, run_steady(std::move(limiter), load, d, kSeed + 1), 2 * unloaded_p99);
    std::printf("%-12s %5.1f %9.2f %9.2f %9.3f %9.3f\n", row.name.c_str(), row.load, row.p99_ms,
                row.p99_ms / unloaded_p99, row.goodput_fraction, row.refused_fraction);
    if (load == 2) s.at_2x = row;
  }
  for (int seed = 0; seed < change_seeds; ++seed) {
    Limiter limiter = make();
    RunResult change =
        run_change(limiter, d, series != nullptr && seed == 0, kSeed + 7 + static_cast<std::uint64_t>(seed));
    s.first = worst(s.first, converge(change.limit_changes, 0, d.phase_ns, kCapacity));
    s.down = worst(s.down, converge(change.limit_changes, d.phase_ns, 2 * d.phase_ns, kCapacity / 2));
    s.up = worst(s.up, converge(change.limit_changes, 2 * d.phase_ns, 3 * d.phase_ns, kCapacity));
    if (series != nullptr && seed == 0) series->emplace_back(limiter.name, std::move(change));
  }
  return s;
}

}  // namespace

int main(int argc, char** argv) {
  const char* series_path = nullptr;
  bool quick = false;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--series") == 0 && i + 1 < argc) {
      series_path = argv[++i];
    } else if (std::strcmp(argv[i], "--quick") == 0) {
      quick = true;
    } else {
      std::fprintf(stderr, "usage: bench_adaptive [--series FILE] [--quick]\n");
      return 2;
    }
  }
  const Durations d = quick ? Durations{8e9, 3e9, 5e9} : Durations{20e9, 5e9, 10e9};
  const int change_seeds = quick ? 1 : kChangeSeeds;

  // Unloaded: no limit at all, at half the capacity.
  const RunResult unloaded = run_steady(fixed(std::numeric_limits<std::int64_t>::max()), 0.5, d, kSeed);
  const double unloaded_p99 = percentile(unloaded.latency_ms, 0.99);
  std::printf("unloaded p99 %.2f ms (no limit, 0.5x), SLO %.2f ms; queue %zu requests, max wait %.0f ms\n",
              unloaded_p99, 2 * unloaded_p99, kQueueLimit, kMaxWaitNs / 1e6);
  std::printf("%-12s %5s %9s %9s %9s %9s\n", "limiter", "load", "p99_ms", "p99_ratio", "goodput", "refused");

  std::vector<std::function<Limiter()>> limiters;
  for (int i = 0; i < static_cast<int>(algorithms().size()); ++i) limiters.emplace_back([i] { return adaptive(i); });
  for (double f : {0.5, 1.0, 4.0}) {
    limiters.emplace_back([f] { return fixed(static_cast<std::int64_t>(f * kCapacity)); });
  }
  std::vector<Summary> summaries;
  std::vector<std::pair<std::string, RunResult>> series;
  for (const auto& make : limiters) {
    summaries.push_back(evaluate(make, unloaded_p99, d, change_seeds, series_path ? &series : nullptr));
  }
  if (series_path) write_series(series_path, series);

  const double static_high_ratio = summaries.back().at_2x.p99_ms / unloaded_p99;
  std::printf("capacity change: 2x load; C 100 -> 50 at %.0f s -> 100 at %.0f s; worst of %d seeds\n", d.phase_ns / 1e9,
              2 * d.phase_ns / 1e9, change_seeds);
  for (std::size_t i = 0; i < algorithms().size(); ++i) {
    const Summary& s = summaries[i];
    const double oscillation = std::max({s.first.oscillation, s.down.oscillation, s.up.oscillation});
    std::printf(
        "{\"algorithm\":\"%s\",\"goodput_fraction\":%.3f,\"p99_ratio\":%.3f,\"converge_s\":%.3f,\"recover_s\":%.3f,"
        "\"oscillation\":%.3f,\"static_high_p99_ratio\":%.3f,\"initial_converge_s\":%.3f,\"unloaded_p99_ms\":%.2f,"
        "\"seeds\":%d}\n",
        s.at_2x.name.c_str(), s.at_2x.goodput_fraction, s.at_2x.p99_ms / unloaded_p99, s.down.seconds, s.up.seconds,
        oscillation, static_high_ratio, s.first.seconds, unloaded_p99, change_seeds);
  }
  return 0;
}
