// examples/http_server: the service's layers and plans, built from the command line's options, on the
// in-process backend or on Redis (limits.cpp).
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <ratelimit/layers/concurrency_layers.hpp>
#include <ratelimit/layers/layered.hpp>

#include "command_line.hpp"

namespace example {

/// Wall-clock time (minutes and days aligned to UTC), or, with --manual-clock, a time that starts at 0
/// and moves only when a test says so. Copies share the manual time.
class ServerClock {
 public:
  using rep = std::int64_t;
  using period = std::nano;
  using duration = std::chrono::nanoseconds;
  using time_point = std::chrono::time_point<ServerClock, duration>;

  explicit ServerClock(bool manual = false)
      : manual_ns_(manual ? std::make_shared<std::atomic<std::int64_t>>(0) : nullptr) {}

  [[nodiscard]] time_point now() const {
    if (manual_ns_) return time_point(duration(manual_ns_->load()));
    return time_point(std::chrono::duration_cast<duration>(std::chrono::system_clock::now().time_since_epoch()));
  }
  [[nodiscard]] bool manual() const { return manual_ns_ != nullptr; }
  void advance(duration d) const {
    if (manual_ns_) manual_ns_->fetch_add(d.count());
  }

 private:
  std::shared_ptr<std::atomic<std::int64_t>> manual_ns_;
};

/// The service's layers, the interface the server uses whatever the backend.
class Limits {
 public:
  virtual ~Limits() = default;
  /// The layers of one request; `keys` holds the strings the requests point into.
  virtual void layers_for(const std::string& path, const std::string& ip, const std::string& api_key,
                          std::vector<std::string>& keys, std::vector<ratelimit::LayerRequest>& out) = 0;
  /// The concurrency limits of one request (`/export`: at most 2 at once per client), keyed like its
  /// layers (`keys` as `layers_for` filled it).
  virtual void concurrency_for(const std::string& path, const std::vector<std::string>& keys,
                               std::vector<ratelimit::ConcurrencyRequest>& out) = 0;
  /// Prometheus-style text of every layer's counters.
  virtual std::string metrics() = 0;
  /// Applies the plan numbers of the JSON file `path` to the running plans, keeping each key's usage
  /// (`MemoryLimiter::set_policy`). Returns an error message, empty on success. Thread-safe.
  virtual std::string reload_plans(const std::string& path) = 0;
};

/// The layers on the backend `config` names (Redis with --redis, else in-process memory), on `clock`.
/// Null when --redis is given but the example was built without the Redis backend.
std::unique_ptr<Limits> make_limits(const Config& config, const ServerClock& clock);

}  // namespace example
