// examples/http_server: the layers and plans of the service (see main.cpp for the table), on one backend.
#include "limits.hpp"

#include <atomic>
#include <cstdio>
#include <fstream>
#include <limits>
#include <map>
#include <optional>
#include <string_view>
#include <type_traits>
#include <utility>

#include <nlohmann/json.hpp>
#include <ratelimit/concurrency.hpp>
#include <ratelimit/layers.hpp>
#include <ratelimit/ratelimit.hpp>
#if RATELIMIT_EXAMPLE_REDIS
#include <ratelimit/redis.hpp>
#endif

#if RATELIMIT_EXAMPLE_PROMETHEUS
#include <prometheus/text_serializer.h>
#include <ratelimit/http/prometheus.hpp>
#endif

#include "../redis_url.hpp"
#include "plan_file.hpp"

namespace example {
namespace {

using namespace std::chrono_literals;

#if RATELIMIT_EXAMPLE_REDIS
/// One line on stderr per failed Redis call, at most one per second (an outage fails every probe).
void log_backend_failure(const ratelimit::BackendError& e) {
  static std::atomic<std::int64_t> last_ns{0};
  const std::int64_t now = std::chrono::steady_clock::now().time_since_epoch().count();
  std::int64_t last = last_ns.load();
  if (now - last < 1'000'000'000 || !last_ns.compare_exchange_strong(last, now)) return;
  std::fprintf(stderr, "ratelimit: Redis failed: %s\n", e.what());
}
#endif

/// Makes the in-process limiters: layered checks over them are atomic (one global lock order).
struct MemoryBackend {
  ServerClock clock;
  template <class P>
  std::unique_ptr<ratelimit::MemoryLimiter<P, ServerClock>> operator()(P policy, std::string_view /*name*/) const {
    return std::make_unique<ratelimit::MemoryLimiter<P, ServerClock>>(policy, ratelimit::MemoryOptions{}, clock);
  }
  /// At most `permits` requests at once per key, in this process.
  std::unique_ptr<ratelimit::ConcurrencyLimiter<ServerClock>> concurrency(std::int64_t permits,
                                                                          std::string_view /*name*/) const {
    return std::make_unique<ratelimit::ConcurrencyLimiter<ServerClock>>(
        ratelimit::ConcurrencyOptions{.permits = permits}, clock);
  }
};

#if RATELIMIT_EXAMPLE_REDIS
/// Makes Redis limiters sharing one connection pool, so several server processes share every limit.
/// Each limiter is named after its layer (`LimiterOptions::name`, include/ratelimit/redis/README.md "Which limiters
/// share state"): the name, not the parameters, is its identity, so each layer has keys of its own and editing a plan's
/// numbers keeps its usage. Layered checks over them consume in order and refund on a denial. With `Leased` (--leases),
/// the fixed-window, GCRA and token-bucket layers are `LeasedLimiter`s (include/ratelimit/redis/README.md "Budget
/// leases"): a hot key costs one Redis call per slice, not per request; they are checked layer by layer.
template <bool Leased>
struct RedisBackend {
  std::shared_ptr<ratelimit::redis::ConnectionPool> pool;
  ServerClock clock;
  template <class P>
  static constexpr bool kLeased = Leased &&
                                  (std::is_same_v<P, ratelimit::FixedWindow> || std::is_same_v<P, ratelimit::Gcra> ||
                                   std::is_same_v<P, ratelimit::TokenBucket>);
  template <class P>
  using LimiterOf = std::conditional_t<kLeased<P>, ratelimit::redis::LeasedLimiter<P, ServerClock>,
                                       ratelimit::redis::RedisLimiter<P, ServerClock>>;
  template <class P>
  std::unique_ptr<LimiterOf<P>> operator()(P policy, std::string_view name) const {
    ratelimit::redis::LimiterOptions options = pool->limiter_defaults();
    options.name = std::string(name);
    if constexpr (kLeased<P>) {
      return std::make_unique<LimiterOf<P>>(policy, pool, options, ratelimit::redis::LeaseOptions{}, clock);
    } else {
      return std::make_unique<LimiterOf<P>>(policy, pool, options, clock);
    }
  }
  /// At most `permits` requests at once per key over every server process (permits expire 30 s after
  /// their last renewal, so a crashed process gives its permits back).
  std::unique_ptr<ratelimit::redis::RedisConcurrencyLimiter> concurrency(std::int64_t permits,
                                                                         std::string_view name) const {
    return std::make_unique<ratelimit::redis::RedisConcurrencyLimiter>(
        ratelimit::redis::RedisConcurrencyOptions{.permits = permits, .name = std::string(name)}, pool);
  }
};
#endif

/// One line on stderr when the shadow adaptive limit of /backend moved, at most one a second.
void log_would_be_limit(std::int64_t from, std::int64_t to, std::int64_t enforced) {
  static std::atomic<std::int64_t> last_ns{0};
  const std::int64_t now = std::chrono::steady_clock::now().time_since_epoch().count();
  std::int64_t last = last_ns.load();
  if (now - last < 1'000'000'000 || !last_ns.compare_exchange_strong(last, now)) return;
  std::fprintf(stderr, "http_server: /backend adaptive limit would be %lld (was %lld; enforcing %lld)\n",
               static_cast<long long>(to), static_cast<long long>(from), static_cast<long long>(enforced));
}

/// The in-flight limit of /backend (--backend-limit): an adaptive algorithm (include/ratelimit/concurrency/README.md
/// "Adaptive limits in the limiter") or a static number; in memory whatever the backend, as the simulated backend's
/// capacity is this process's. One key: the limit guards one service. Null without --backend-capacity.
std::unique_ptr<ratelimit::ConcurrencyLimiter<ServerClock>> backend_limiter(const Config& config,
                                                                            const ServerClock& clock) {
  if (config.backend_capacity == 0) return nullptr;
  ratelimit::ConcurrencyOptions o;
  const std::string& kind = config.backend_limit;
  if (kind == "aimd") {
    ratelimit::AimdOptions aimd;  // AIMD needs a latency target: 1.5 x the unloaded service time
    aimd.latency_threshold = std::chrono::milliseconds(config.backend_ms) * 3 / 2;
    o.adaptive = std::make_shared<ratelimit::AimdLimit>(aimd);
  } else if (kind == "gradient") {
    o.adaptive = std::make_shared<ratelimit::GradientLimit>();
  } else if (kind == "vegas") {
    o.adaptive = std::make_shared<ratelimit::VegasLimit>();
  }
  if (!o.adaptive) {
    o.permits = std::stoll(kind);  // checked by the command line
  } else if (config.backend_shadow > 0) {
    o.permits = config.backend_shadow;
    o.adaptive_shadow = true;
    o.on_limit_change = [enforced = o.permits](std::int64_t from, std::int64_t to) {
      log_would_be_limit(from, to, enforced);
    };
  } else {
    o.permits = std::numeric_limits<std::int64_t>::max();  // no ceiling: the algorithm's max_limit bounds it
  }
  return std::make_unique<ratelimit::ConcurrencyLimiter<ServerClock>>(o, clock);
}

/// The limiters and layers of the service on one backend.
template <class Backend>
class BackendLimits final : public Limits {
 public:
  using IpLimiter =
      typename std::invoke_result_t<const Backend&, ratelimit::FixedWindow, std::string_view>::element_type;
  using EndpointLimiter =
      typename std::invoke_result_t<const Backend&, ratelimit::SlidingWindowLog, std::string_view>::element_type;
  using ConcurrencyLimiter =
      typename decltype(std::declval<const Backend&>().concurrency(std::int64_t{}, std::string_view{}))::element_type;

  BackendLimits(const Config& config, const Backend& make, ServerClock clock)
      : ip_(make(ratelimit::FixedWindow{.limit = 1000, .window = 1min}, "ip")),
        search_(make(ratelimit::SlidingWindowLog{.limit = 10, .window = 1min}, "search")),
        export_(make(ratelimit::SlidingWindowLog{.limit = 5, .window = 1min}, "export")),
        login_(make(ratelimit::SlidingWindowLog{.limit = 5, .window = 5min}, "login")),
        export_running_(make.concurrency(2, "export-concurrency")),
        ip_layer_(*ip_, "ip"),
        search_layer_(*search_, "search"),
        export_layer_(*export_, "export"),
        login_layer_(*login_, "login", {.penalty = 15min}),
        export_running_layer_("export-concurrency", *export_running_),
        tiers_(
            tier_options(), [this](std::string_view key) { return plan_of(key); }, make, clock),
        make_(make),
        backend_running_(backend_limiter(config, clock)) {
    if (backend_running_) backend_layer_.emplace("backend-concurrency", *backend_running_);
    add_quota_route(config, make);
    for (const auto& [key, plan] : config.api_keys) directory_[key] = plan;
    for (const std::string& ip : config.deny) ip_layer_.lists().deny(ip);
#if RATELIMIT_EXAMPLE_PROMETHEUS
    for_each_layer([this](ratelimit::Layer& layer) { collector_.add_layer(layer); });
    collector_.add_limiter("ip", *ip_);
    collector_.add_limiter("search", *search_);
    collector_.add_limiter("export", *export_);
    collector_.add_limiter("login", *login_);
    if (backend_running_) collector_.add_limiter("backend", *backend_running_);
#endif
  }

  void layers_for(const std::string& path, const std::string& ip, const std::string& api_key,
                  std::vector<std::string>& keys, std::vector<ratelimit::LayerRequest>& out) override {
    if (path == "/backend") return;          // an internal service: its in-flight limit only
    if (path == "/quota" && quota_layer_) {  // its own limit only, so a client sees one policy
      keys.push_back(ip);
      out.push_back({&*quota_layer_, keys[0], 1});
      return;
    }
    keys.reserve(3);
    keys.push_back(ip);
    // Only a key in the directory is a client of its own; missing and unknown keys are the free plan per
    // IP, so inventing a new key per request gains nothing (not the free plan, not /search or /export).
    keys.push_back(!api_key.empty() && directory_.contains(api_key) ? "key:" + api_key : "ip:" + ip);
    out.push_back({&ip_layer_, keys[0], 1});
    tiers_.append_layers(keys[1], 1, out);
    if (path == "/search") out.push_back({&search_layer_, keys[1], 1});
    if (path == "/export") out.push_back({&export_layer_, keys[1], 1});
    if (path == "/login") out.push_back({&login_layer_, keys[0], 1});
  }

  void concurrency_for(const std::string& path, const std::vector<std::string>& keys,
                       std::vector<ratelimit::ConcurrencyRequest>& out) override {
    if (path == "/export") out.push_back({&export_running_layer_, keys.at(1), 1});
    if (path == "/backend" && backend_layer_) out.push_back({&*backend_layer_, "backend", 1});
  }

  std::string metrics() override {
#if RATELIMIT_EXAMPLE_PROMETHEUS
    return ::prometheus::TextSerializer().Serialize(collector_.Collect());
#else
    // Without prometheus-cpp: the layers' counters in the same families, written by hand.
    std::string out = "# TYPE ratelimit_decisions_total counter\n";
    for_each_layer([&](ratelimit::Layer& layer) {
      const auto c = layer.stats().snapshot();
      const std::string l = "ratelimit_decisions_total{layer=\"" + std::string(layer.name()) + "\",outcome=\"";
      out += l + "allowed\"} " + std::to_string(c.allowed) + "\n";
      out += l + "denied\"} " + std::to_string(c.denied) + "\n";
      out += l + "shadow_denied\"} " + std::to_string(c.shadow_denied) + "\n";
      out += l + "rolled_back\"} " + std::to_string(c.rolled_back) + "\n";
    });
    if (backend_running_) {
      const ratelimit::ConcurrencyStats st = backend_running_->stats();
      out += "ratelimit_concurrency_limit{limiter=\"backend\"} " + std::to_string(st.limit) + "\n";
      out += "ratelimit_concurrency_adaptive_limit{limiter=\"backend\"} " + std::to_string(st.adaptive_limit) + "\n";
      out += "ratelimit_concurrency_in_flight{limiter=\"backend\"} " + std::to_string(st.in_flight) + "\n";
      out += "ratelimit_concurrency_denied_total{limiter=\"backend\"} " + std::to_string(st.denied) + "\n";
    }
    return out;
#endif
  }

 private:
  static ratelimit::TierOptions tier_options() {
    ratelimit::TierOptions o;
    o.plans = {{"free", 30, 1'000, 10}, {"pro", 300, 50'000, 50}, {"enterprise", 3'000, 500'000, 200}};
    o.default_plan = "free";
    return o;
  }
  std::string reload_plans(const std::string& path) override {
    if constexpr (!requires(IpLimiter & l) { l.set_policy(ratelimit::FixedWindow{}); }) {
      return "plan reload needs limiters with set_policy (not --leases: LeasedLimiter has none)";
    } else {
      try {
        std::vector<std::string> names;
        for (std::size_t i = 0; i < tiers_.plan_count(); ++i) names.push_back(tiers_.plan_at(i).plan.name);
        const std::map<std::string, PlanNumbers> plans = read_plan_file(path, names);
        // The same layers as TierOptions builds (include/ratelimit/layers/README.md "Tiers"). Every new policy is
        // checked first, by a throwaway limiter of the backend (it refuses what set_policy would), so a bad number
        // changes no plan.
        struct Change {
          std::size_t plan;
          ratelimit::FixedWindow minute, day;
          ratelimit::TokenBucket burst;
        };
        std::vector<Change> changes;
        for (std::size_t i = 0; i < tiers_.plan_count(); ++i) {
          const auto it = plans.find(names[i]);
          if (it == plans.end()) continue;  // not in the file: keeps its numbers
          const PlanNumbers& n = it->second;
          Change c{i, {n.per_minute, 1min}, {n.per_day, 24h}, {n.burst, n.per_minute, 1min}};
          (void)make_(c.minute, names[i] + "-minute");
          (void)make_(c.day, names[i] + "-day");
          (void)make_(c.burst, names[i] + "-burst");
          changes.push_back(c);
        }
        for (const Change& c :
             changes) {  // usage carried (include/ratelimit/README.md "Changing a policy at run time")
          auto& p = tiers_.plan_at(c.plan);
          p.minute->set_policy(c.minute);
          p.day->set_policy(c.day);
          p.burst->set_policy(c.burst);
        }
        return {};
      } catch (const std::exception& e) {  // bad JSON, a missing field, a bad number: the old plans stay
        return path + ": " + e.what();
      }
    }
  }

  template <class Fn>
  void for_each_layer(Fn fn) {
    fn(ip_layer_);
    for (std::size_t i = 0; i < tiers_.plan_count(); ++i) {
      auto& p = tiers_.plan_at(i);
      fn(p.minute_layer);
      fn(p.day_layer);
      fn(p.burst_layer);
    }
    fn(search_layer_);
    fn(export_layer_);
    fn(login_layer_);
  }

  std::optional<std::string> plan_of(std::string_view key) const {
    if (key.rfind("key:", 0) != 0) return std::nullopt;
    const auto it = directory_.find(key.substr(4));
    return it == directory_.end() ? std::nullopt : std::optional<std::string>(it->second);
  }

  /// With --quota-burst B: /quota, 5 per second with burst B per client IP (GCRA: RateLimit-Policy q=B,
  /// w=ceil(B/5) s), a remote API for clients that steer by its header fields (RemoteQuotaLimiter).
  void add_quota_route(const Config& config, const Backend& make) {
    if (config.quota_burst == 0) return;
    quota_ = make(ratelimit::Gcra{.limit = 5, .period = 1s, .burst = config.quota_burst}, "quota");
    quota_layer_.emplace(*quota_, "quota");
  }

  std::map<std::string, std::string, std::less<>> directory_{{"demo-pro", "pro"}, {"demo-enterprise", "enterprise"}};
  std::unique_ptr<IpLimiter> ip_;
  std::unique_ptr<EndpointLimiter> search_, export_, login_;
  std::unique_ptr<ConcurrencyLimiter> export_running_;  // /export at most 2 at once per client
  ratelimit::LimiterLayer<IpLimiter> ip_layer_;
  ratelimit::LimiterLayer<EndpointLimiter> search_layer_, export_layer_, login_layer_;
  ratelimit::ConcurrencyLayer export_running_layer_;
  ratelimit::BasicTieredLimiter<Backend, ServerClock> tiers_;
  Backend make_;  // makes the throwaway limiters that check a reloaded plan file
  std::unique_ptr<ratelimit::ConcurrencyLimiter<ServerClock>> backend_running_;  // /backend, with --backend-capacity
  std::optional<ratelimit::ConcurrencyLayer> backend_layer_;
  using QuotaLimiter = typename std::invoke_result_t<const Backend&, ratelimit::Gcra, std::string_view>::element_type;
  std::unique_ptr<QuotaLimiter> quota_;  // /quota, with --quota-burst
  std::optional<ratelimit::LimiterLayer<QuotaLimiter>> quota_layer_;
#if RATELIMIT_EXAMPLE_PROMETHEUS
  ratelimit::http::MetricsCollector collector_;  // reads the layers' and limiters' counters at each scrape
#endif
};

}  // namespace

std::unique_ptr<Limits> make_limits(const Config& config, const ServerClock& clock) {
  if (config.redis.empty()) return std::make_unique<BackendLimits<MemoryBackend>>(config, MemoryBackend{clock}, clock);
#if RATELIMIT_EXAMPLE_REDIS
  ratelimit::redis::RedisOptions options;
  options.connection() = redis_connection(config.redis, "--redis");  // checked by the command line
  // Connections are shared and pipelined (include/ratelimit/redis/README.md "Redis engine"): every worker thread's
  // checks join the same writes, so two carry them all; more would only split the batches.
  options.pool_size = 2;
  options.key_prefix = "ratelimit:example:";
  // With --manual-clock every process runs on the test's time; otherwise Redis's TIME is the clock.
  options.time_source = clock.manual() ? ratelimit::redis::TimeSource::client : ratelimit::redis::TimeSource::server;
  // --on-redis-error: fail open (the default), closed, or each process's share in memory
  // (include/ratelimit/redis/README.md "Fallback during outages"); every failure is logged either way, so an outage
  // answered by admitting is never silent.
  options.on_error = config.on_redis_error == "closed"     ? ratelimit::FailurePolicy::fail_closed
                     : config.on_redis_error == "fallback" ? ratelimit::FailurePolicy::fallback
                                                           : ratelimit::FailurePolicy::fail_open;
  options.fallback.instances = config.fallback_instances;
  options.on_backend_failure = [](const ratelimit::BackendError& e) { log_backend_failure(e); };
  auto pool = std::make_shared<ratelimit::redis::ConnectionPool>(options.connection(), options.limiter());
  if (config.leases)
    return std::make_unique<BackendLimits<RedisBackend<true>>>(config, RedisBackend<true>{pool, clock}, clock);
  return std::make_unique<BackendLimits<RedisBackend<false>>>(config, RedisBackend<false>{pool, clock}, clock);
#else
  return nullptr;
#endif
}

}  // namespace example
