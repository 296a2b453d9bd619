// MetricsCollector over a ConcurrencyLimiter (include/ratelimit/concurrency/README.md "Adaptive limits in the
// limiter"): the limit in force, the adaptive limit and its shadow flag, min RTT, in flight, queued, denials and
// releases by outcome, as Prometheus families.
#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include <prometheus/text_serializer.h>
#include <ratelimit/concurrency.hpp>
#include <ratelimit/http/prometheus.hpp>

namespace {

using namespace std::chrono_literals;

/// The value of the one sample of `family` whose labels include `label`=`value` (any when `label` is empty).
double sample(const std::vector<::prometheus::MetricFamily>& all, const std::string& family,
              const std::string& label = "", const std::string& value = "") {
  for (const auto& f : all) {
    if (f.name != family) continue;
    for (const auto& m : f.metric) {
      bool match = label.empty();
      for (const auto& l : m.label) match = match || (l.name == label && l.value == value);
      if (match) return f.type == ::prometheus::MetricType::Counter ? m.counter.value : m.gauge.value;
    }
  }
  ADD_FAILURE() << "no sample of " << family << " " << label << "=" << value;
  return -1;
}

bool has_family(const std::vector<::prometheus::MetricFamily>& all, const std::string& family) {
  for (const auto& f : all) {
    if (f.name == family) return true;
  }
  return false;
}

TEST(AdaptiveMetrics, CollectorExportsLimitsInFlightQueueAndOutcomes) {
  ratelimit::ManualClock clock;
  ratelimit::AimdOptions aimd;
  aimd.initial_limit = 2;
  aimd.max_limit = 50;
  aimd.window_samples = 1;
  aimd.latency_threshold = 10ms;
  ratelimit::ConcurrencyOptions o;
  o.permits = 50;
  o.queue_limit = 5;
  o.adaptive = std::make_shared<ratelimit::AimdLimit>(aimd);
  ratelimit::ConcurrencyLimiter<ratelimit::ManualClock> limiter(o, clock);
  ratelimit::ConcurrencyOptions fixed;
  fixed.permits = 3;
  ratelimit::ConcurrencyLimiter<> plain(fixed);
  ratelimit::http::MetricsCollector collector;
  collector.add_limiter("backend", limiter);
  collector.add_limiter("plain", plain);

  ratelimit::PermitResult a = limiter.try_acquire("k");
  ratelimit::PermitResult b = limiter.try_acquire("k");
  ASSERT_TRUE(a && b);
  EXPECT_EQ(limiter.try_acquire("k").status, ratelimit::PermitStatus::busy);
  limiter.acquire_async("k", 1, 1s, [](ratelimit::PermitResult) {});
  auto all = collector.Collect();
  EXPECT_EQ(sample(all, "ratelimit_concurrency_limit", "limiter", "backend"), 2);
  EXPECT_EQ(sample(all, "ratelimit_concurrency_in_flight", "limiter", "backend"), 2);
  EXPECT_EQ(sample(all, "ratelimit_concurrency_queued", "limiter", "backend"), 1);
  EXPECT_EQ(sample(all, "ratelimit_concurrency_denied_total", "limiter", "backend"), 1);

  clock.advance(1ms);
  a.permit.release(ratelimit::PermitOutcome::dropped);  // AIMD backs off: max(1, 2 x 0.9) = 1
  all = collector.Collect();
  EXPECT_EQ(sample(all, "ratelimit_concurrency_adaptive_limit", "limiter", "backend"), 1);
  EXPECT_EQ(sample(all, "ratelimit_concurrency_limit", "limiter", "backend"), 1);
  EXPECT_EQ(sample(all, "ratelimit_concurrency_adaptive_shadow", "limiter", "backend"), 0);
  EXPECT_EQ(sample(all, "ratelimit_concurrency_queued", "limiter", "backend"), 1);  // 1 held = the limit
  EXPECT_GE(sample(all, "ratelimit_concurrency_min_rtt_seconds", "limiter", "backend"), 0);
  double dropped = -1;
  for (const auto& f : all) {
    if (f.name != "ratelimit_concurrency_releases_total") continue;
    for (const auto& m : f.metric) {
      bool backend = false, is_dropped = false;
      for (const auto& l : m.label) {
        backend = backend || (l.name == "limiter" && l.value == "backend");
        is_dropped = is_dropped || (l.name == "outcome" && l.value == "dropped");
      }
      if (backend && is_dropped) dropped = m.counter.value;
    }
  }
  EXPECT_EQ(dropped, 1);
  // A limiter without an adaptive limit has the common families only.
  EXPECT_EQ(sample(all, "ratelimit_concurrency_limit", "limiter", "plain"), 3);
  const std::string text = ::prometheus::TextSerializer().Serialize(all);
  EXPECT_EQ(text.find("ratelimit_concurrency_adaptive_limit{limiter=\"plain\"}"), std::string::npos) << text;
  EXPECT_TRUE(has_family(all, "ratelimit_concurrency_releases_total"));
}

}  // namespace
