// MetricsCollector over a RedisLimiter (README "Metrics"): the backend latency histogram counts every
// backend call once, cumulatively over buckets in seconds, and the pool-connections gauge shows the open
// connections; label values are the configured limiter name only (never a key).
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <string>

#include <ratelimit/http/prometheus.hpp>
#include <ratelimit/redis.hpp>

#include "test_support.hpp"

namespace {

using namespace std::chrono_literals;

const ::prometheus::MetricFamily* metric_family(const std::vector<::prometheus::MetricFamily>& all,
                                                const std::string& name) {
  for (const auto& f : all) {
    if (f.name == name) return &f;
  }
  return nullptr;
}

TEST(MetricsRedis, LatencyHistogramAndPoolGauge) {
  RATELIMIT_REQUIRE_REDIS();
  ratelimit::redis::RedisLimiter<ratelimit::Gcra> limiter(
      ratelimit::Gcra{.limit = 100, .period = 1s, .burst = 10},
      ratelimit_test::client_options(*ratelimit_test::shared_redis()));
  ratelimit::http::MetricsCollector collector;
  collector.add_limiter("api", limiter);
  for (int i = 0; i < 5; ++i) (void)limiter.allow("user-" + std::to_string(i));
  const ratelimit::redis::Request batch[] = {{"a", 1}, {"b", 1}, {"c", 1}};
  (void)limiter.allow_many(batch);  // one backend call

  const auto all = collector.Collect();
  const auto* h = metric_family(all, "ratelimit_backend_call_duration_seconds");
  ASSERT_NE(h, nullptr);
  EXPECT_EQ(h->type, ::prometheus::MetricType::Histogram);
  ASSERT_EQ(h->metric.size(), 1u);
  const auto& m = h->metric[0];
  ASSERT_EQ(m.label.size(), 1u);
  EXPECT_EQ(m.label[0].name, "limiter");
  EXPECT_EQ(m.label[0].value, "api");
  EXPECT_EQ(m.histogram.sample_count, 6u);
  ASSERT_EQ(m.histogram.bucket.size(), ratelimit::redis::BackendLatency::kBoundsUs.size() + 1);
  EXPECT_DOUBLE_EQ(m.histogram.bucket.front().upper_bound, 0.0001);
  EXPECT_TRUE(std::isinf(m.histogram.bucket.back().upper_bound));
  EXPECT_EQ(m.histogram.bucket.back().cumulative_count, 6u);
  for (std::size_t i = 1; i < m.histogram.bucket.size(); ++i) {
    EXPECT_GE(m.histogram.bucket[i].cumulative_count, m.histogram.bucket[i - 1].cumulative_count);
  }
  EXPECT_GT(m.histogram.sample_sum, 0.0);
  EXPECT_LT(m.histogram.sample_sum, 6 * 1.0);  // loopback calls, well under a second each

  const auto* g = metric_family(all, "ratelimit_pool_connections");
  ASSERT_NE(g, nullptr);
  EXPECT_EQ(g->type, ::prometheus::MetricType::Gauge);
  ASSERT_EQ(g->metric.size(), 1u);
  EXPECT_GE(g->metric[0].gauge.value, 1.0);
  EXPECT_LE(g->metric[0].gauge.value, static_cast<double>(limiter.options().pool_size));
  for (const auto& f : all) {
    for (const auto& s : f.metric) {
      for (const auto& l : s.label) EXPECT_EQ(l.value.find("user-"), std::string::npos) << f.name;  // no keys
    }
  }
}

}  // namespace
