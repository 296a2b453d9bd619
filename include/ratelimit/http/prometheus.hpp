#pragma once

/// @file
/// `http::MetricsCollector`: the layers' and limiters' counters as Prometheus metric families, through
/// prometheus-cpp (link `ratelimit::prometheus`, defined when prometheus-cpp is found). Register it with
/// a `prometheus::Exposer` (`RegisterCollectable`) or serialize `Collect()` (`prometheus::TextSerializer`). Nothing is
/// added to the check path: the collector reads, at scrape time, the counters every layer and limiter already keeps
/// (relaxed atomics).

#include <prometheus/client_metric.h>
#include <prometheus/collectable.h>
#include <prometheus/metric_family.h>
#include <prometheus/metric_type.h>

#include <cstdint>
#include <cstddef>
#include <functional>
#include <limits>
#include <mutex>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "ratelimit/detail/arithmetic.hpp"
#include "ratelimit/layers/layer.hpp"

namespace ratelimit::http {

/// Collects, at each scrape, the counters of the layers and limiters added to it (include/ratelimit/http/README.md
/// "Metrics"). Label values are the configured layer and limiter names, never keys, so the number of series is bounded
/// by the configuration whatever the number of keys. Thread-safe: adding and collecting may happen from any threads;
/// the layers and limiters added must outlive the collector.
/// Example:
///   ratelimit::MemoryLimiter<ratelimit::Gcra> per_ip(
///       ratelimit::Gcra{.limit = 10, .period = std::chrono::seconds(1), .burst = 10});
///   ratelimit::LimiterLayer layer(per_ip, "ip");
///   auto collector = std::make_shared<ratelimit::http::MetricsCollector>();  // made after what it reads
///   collector->add_layer(layer);
///   collector->add_limiter("ip-limiter", per_ip);
///   // exposer.RegisterCollectable(collector) with prometheus-cpp's Exposer, or serialize a scrape:
///   const std::vector<prometheus::MetricFamily> scrape = collector->Collect();
class MetricsCollector final : public ::prometheus::Collectable {
 public:
  /// Adds a layer: `ratelimit_decisions_total{layer, outcome}` (allowed, denied, shadow_denied,
  /// rolled_back), `ratelimit_refunds_total{layer}`, `ratelimit_layer_backend_errors_total{layer}`.
  /// Throws `std::invalid_argument` naming `MetricsCollector.add_layer` when the layer's name is not valid
  /// UTF-8 (Prometheus refuses the whole scrape then) or a layer of that name was added already (its
  /// series would be duplicates, which Prometheus drops).
  void add_layer(const Layer& layer) {
    const std::string name(layer.name());
    std::lock_guard guard(mutex_);
    check_name("MetricsCollector.add_layer", name, layer_names_);
    layers_.push_back(&layer);
    layer_names_.push_back(name);
  }

  /// Adds a limiter under `name`: for a limiter with `size()` and `evictions()` (`MemoryLimiter`) the
  /// gauge `ratelimit_keys{limiter}` and the counter `ratelimit_evictions_total{limiter}`; for one with
  /// `stats()` (`redis::RedisLimiter`) `ratelimit_backend_calls_total{limiter}`,
  /// `ratelimit_backend_failures_total{limiter, cause}` (io, timeout, protocol, reply),
  /// `ratelimit_script_reloads_total{limiter}`, `ratelimit_connects_total{limiter}`,
  /// `ratelimit_dropped_connections_total{limiter}`, the gauge `ratelimit_pool_connections{limiter}`
  /// (open now) and the histogram `ratelimit_backend_call_duration_seconds{limiter}` (each backend call,
  /// buckets 100 us to 1 s); for one with an in-memory fallback in its `stats()`
  /// (`redis::RedisLimiter`, `redis::LeasedLimiter`, include/ratelimit/redis/README.md "Fallback during outages") the
  /// gauge `ratelimit_fallback_active{limiter}` (1 while Redis is considered down) and the counter
  /// `ratelimit_fallback_checks_total{limiter}`; for a `ConcurrencyLimiter` (its `stats()`,
  /// include/ratelimit/concurrency/README.md "Adaptive limits in the limiter") the gauges
  /// `ratelimit_concurrency_limit{limiter}` (in force per key), `ratelimit_concurrency_in_flight{limiter}` and
  /// `ratelimit_concurrency_queued{limiter}` (units, all keys), the counters
  /// `ratelimit_concurrency_denied_total{limiter}` and `ratelimit_concurrency_releases_total{limiter, outcome}`
  /// (succeeded, failed, dropped, unused), and with an adaptive limit the gauges
  /// `ratelimit_concurrency_adaptive_limit{limiter}` (in shadow mode: the limit it would use),
  /// `ratelimit_concurrency_adaptive_shadow{limiter}` and `ratelimit_concurrency_min_rtt_seconds{limiter}`. `name`
  /// is a configured name (never a key): one series set per limiter. Throws `std::invalid_argument` naming
  /// `MetricsCollector.add_limiter` when `name` is not valid UTF-8 or was added already (as `add_layer`).
  template <class L>
  void add_limiter(std::string name, const L& limiter) {
    std::lock_guard guard(mutex_);
    check_name("MetricsCollector.add_limiter", name, limiter_names_);
    std::function<void(Sink&)> read = [name, &limiter](Sink& sink) {
      if constexpr (requires {
                      limiter.size();
                      limiter.evictions();
                    }) {
        sink.gauge("ratelimit_keys", {{"limiter", name}}, static_cast<double>(limiter.size()));
        sink.counter("ratelimit_evictions_total", {{"limiter", name}}, static_cast<double>(limiter.evictions()));
      }
      if constexpr (requires { limiter.stats().script_reloads; }) {
        const auto s = limiter.stats();
        sink.counter("ratelimit_backend_calls_total", {{"limiter", name}}, static_cast<double>(s.calls));
        const std::pair<const char*, std::uint64_t> causes[] = {
            {"io", s.io_errors}, {"timeout", s.timeouts}, {"protocol", s.protocol_errors}, {"reply", s.reply_errors}};
        for (const auto& [cause, n] : causes) {
          sink.counter("ratelimit_backend_failures_total", {{"limiter", name}, {"cause", cause}},
                       static_cast<double>(n));
        }
        sink.counter("ratelimit_script_reloads_total", {{"limiter", name}}, static_cast<double>(s.script_reloads));
        sink.counter("ratelimit_connects_total", {{"limiter", name}}, static_cast<double>(s.connects));
        sink.counter("ratelimit_dropped_connections_total", {{"limiter", name}},
                     static_cast<double>(s.dropped_connections));
        // Open now: every connection opened and not dropped (the pool's or, on a cluster, all nodes').
        sink.gauge("ratelimit_pool_connections", {{"limiter", name}},
                   static_cast<double>(s.connects >= s.dropped_connections ? s.connects - s.dropped_connections : 0));
        if constexpr (requires { s.latency.sum_us; }) {
          sink.histogram("ratelimit_backend_call_duration_seconds", {{"limiter", name}}, s.latency);
        }
      }
      if constexpr (requires { limiter.stats().fallback_checks; }) {
        const auto s = limiter.stats();
        sink.gauge("ratelimit_fallback_active", {{"limiter", name}}, s.fallback_active ? 1.0 : 0.0);
        sink.counter("ratelimit_fallback_checks_total", {{"limiter", name}}, static_cast<double>(s.fallback_checks));
      }
      if constexpr (requires { limiter.stats().adaptive_limit; }) add_concurrency(sink, name, limiter.stats());
    };
    limiters_.push_back(std::move(read));
    limiter_names_.push_back(std::move(name));
  }

  /// Every family, one sample per layer/limiter and label set; families in a fixed order. Thread-safe.
  std::vector<::prometheus::MetricFamily> Collect() const override {
    Sink sink;
    std::lock_guard guard(mutex_);
    for (const Layer* layer : layers_) {
      const LayerCounters c = layer->stats().snapshot();
      const std::string name(layer->name());
      const std::pair<const char*, std::uint64_t> outcomes[] = {{"allowed", c.allowed},
                                                                {"denied", c.denied},
                                                                {"shadow_denied", c.shadow_denied},
                                                                {"rolled_back", c.rolled_back}};
      for (const auto& [outcome, n] : outcomes) {
        sink.counter("ratelimit_decisions_total", {{"layer", name}, {"outcome", outcome}}, static_cast<double>(n));
      }
      sink.counter("ratelimit_refunds_total", {{"layer", name}}, static_cast<double>(c.refunded));
      sink.counter("ratelimit_layer_backend_errors_total", {{"layer", name}}, static_cast<double>(c.backend_errors));
    }
    for (const auto& read : limiters_) read(sink);
    return std::move(sink.families);
  }

 private:
  struct Sink;
  /// The families of a concurrency limiter's `stats()` (`ConcurrencyStats`).
  template <class Stats>
  static void add_concurrency(Sink& sink, const std::string& name, const Stats& s) {
    sink.gauge("ratelimit_concurrency_limit", {{"limiter", name}}, static_cast<double>(s.limit));
    sink.gauge("ratelimit_concurrency_in_flight", {{"limiter", name}}, static_cast<double>(s.in_flight));
    sink.gauge("ratelimit_concurrency_queued", {{"limiter", name}}, static_cast<double>(s.queued));
    sink.counter("ratelimit_concurrency_denied_total", {{"limiter", name}}, static_cast<double>(s.denied));
    const std::pair<const char*, std::uint64_t> outcomes[] = {
        {"succeeded", s.succeeded}, {"failed", s.failed}, {"dropped", s.dropped}, {"unused", s.unused}};
    for (const auto& [outcome, n] : outcomes) {
      sink.counter("ratelimit_concurrency_releases_total", {{"limiter", name}, {"outcome", outcome}},
                   static_cast<double>(n));
    }
    if (s.adaptive_limit == 0) return;  // no adaptive limit
    sink.gauge("ratelimit_concurrency_adaptive_limit", {{"limiter", name}}, static_cast<double>(s.adaptive_limit));
    sink.gauge("ratelimit_concurrency_adaptive_shadow", {{"limiter", name}}, s.shadow ? 1.0 : 0.0);
    sink.gauge("ratelimit_concurrency_min_rtt_seconds", {{"limiter", name}},
               static_cast<double>(s.min_rtt.count()) / 1e9);
  }

  /// Families being built, found by name (few: a linear search).
  struct Sink {
    std::vector<::prometheus::MetricFamily> families;

    void counter(const char* family, std::vector<::prometheus::ClientMetric::Label> labels, double value) {
      ::prometheus::ClientMetric m;
      m.label = std::move(labels);
      m.counter.value = value;
      find(family, ::prometheus::MetricType::Counter).metric.push_back(std::move(m));
    }
    void gauge(const char* family, std::vector<::prometheus::ClientMetric::Label> labels, double value) {
      ::prometheus::ClientMetric m;
      m.label = std::move(labels);
      m.gauge.value = value;
      find(family, ::prometheus::MetricType::Gauge).metric.push_back(std::move(m));
    }
    /// A histogram in seconds from per-bucket counts with bounds in microseconds (`BackendLatency`).
    template <class Latency>
    void histogram(const char* family, std::vector<::prometheus::ClientMetric::Label> labels, const Latency& l) {
      ::prometheus::ClientMetric m;
      m.label = std::move(labels);
      std::uint64_t cumulative = 0;
      for (std::size_t i = 0; i < l.buckets.size(); ++i) {
        cumulative += l.buckets[i];
        ::prometheus::ClientMetric::Bucket b;
        b.cumulative_count = cumulative;
        b.upper_bound = i < Latency::kBoundsUs.size() ? static_cast<double>(Latency::kBoundsUs[i]) / 1e6
                                                      : std::numeric_limits<double>::infinity();
        m.histogram.bucket.push_back(b);
      }
      m.histogram.sample_count = cumulative;
      m.histogram.sample_sum = static_cast<double>(l.sum_us) / 1e6;
      find(family, ::prometheus::MetricType::Histogram).metric.push_back(std::move(m));
    }
    ::prometheus::MetricFamily& find(const char* family, ::prometheus::MetricType type) {
      for (auto& f : families) {
        if (f.name == family) return f;
      }
      families.push_back(::prometheus::MetricFamily{family, help(family), type, {}});
      return families.back();
    }
    static std::string help(const std::string& family) {
      if (family == "ratelimit_decisions_total") return "Requests per layer and outcome of the layered check";
      if (family == "ratelimit_refunds_total") return "Explicit refunds applied to a layer";
      if (family == "ratelimit_layer_backend_errors_total") return "Checks of a layer whose backend failed";
      if (family == "ratelimit_keys") return "Keys held by an in-memory limiter";
      if (family == "ratelimit_evictions_total") return "Keys evicted with usage left (max_keys or max_bytes)";
      if (family == "ratelimit_backend_calls_total") return "Checks sent to the Redis backend";
      if (family == "ratelimit_backend_failures_total") return "Redis checks answered by the failure policy, by cause";
      if (family == "ratelimit_script_reloads_total") return "NOSCRIPT replies answered with EVAL";
      if (family == "ratelimit_connects_total") return "Redis connections opened";
      if (family == "ratelimit_dropped_connections_total") return "Broken Redis connections dropped";
      if (family == "ratelimit_pool_connections") return "Redis connections open now (opened minus dropped)";
      if (family == "ratelimit_backend_call_duration_seconds") return "Latency of Redis backend calls";
      if (family == "ratelimit_fallback_active") return "1 while Redis is down and the in-memory fallback answers";
      if (family == "ratelimit_fallback_checks_total") return "Checks answered by the in-memory fallback";
      if (family == "ratelimit_concurrency_limit") return "Units in flight allowed per key now";
      if (family == "ratelimit_concurrency_in_flight") return "Units in flight over all keys";
      if (family == "ratelimit_concurrency_queued") return "Units waiting in the queues over all keys";
      if (family == "ratelimit_concurrency_denied_total") return "Acquisitions answered without a permit";
      if (family == "ratelimit_concurrency_releases_total") return "Permits returned, by the outcome reported";
      if (family == "ratelimit_concurrency_adaptive_limit") return "The adaptive algorithm's limit (shadow: would-be)";
      if (family == "ratelimit_concurrency_adaptive_shadow") return "1 while the adaptive limit runs in shadow mode";
      if (family == "ratelimit_concurrency_min_rtt_seconds") return "Unloaded latency the adaptive algorithm measured";
      return family;
    }
  };

  /// Refuses a label value Prometheus cannot take: invalid UTF-8, or one of `taken` (a duplicate series).
  static void check_name(std::string_view field, const std::string& name, const std::vector<std::string>& taken) {
    if (!valid_utf8(name))
      ratelimit::detail::invalid(field, "the name must be valid UTF-8 (it is a Prometheus label value)");
    for (const std::string& t : taken) {
      if (t == name)
        ratelimit::detail::invalid(field, "the name \"" + name + "\" was added already (duplicate series)");
    }
  }
  /// RFC 3629: no overlong forms, no surrogates, nothing above U+10FFFF.
  static bool valid_utf8(std::string_view s) noexcept {
    for (std::size_t i = 0; i < s.size();) {
      const auto b = static_cast<unsigned char>(s[i]);
      const std::size_t n = b < 0x80 ? 1 : (b >> 5) == 0x6 ? 2 : (b >> 4) == 0xE ? 3 : (b >> 3) == 0x1E ? 4 : 0;
      if (n == 0 || i + n > s.size()) return false;
      std::uint32_t cp = n == 1 ? b : b & (0x7Fu >> n);
      for (std::size_t k = 1; k < n; ++k) {
        const auto c = static_cast<unsigned char>(s[i + k]);
        if ((c >> 6) != 0x2) return false;
        cp = (cp << 6) | (c & 0x3Fu);
      }
      const std::uint32_t least[] = {0, 0, 0x80, 0x800, 0x10000};
      if (cp < least[n] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return false;
      i += n;
    }
    return true;
  }

  mutable std::mutex mutex_;
  std::vector<const Layer*> layers_;
  std::vector<std::string> layer_names_;
  std::vector<std::function<void(Sink&)>> limiters_;
  std::vector<std::string> limiter_names_;
};

}  // namespace ratelimit::http
