// MetricsCollector over a RedisLimiter (include/ratelimit/http/README.md "Metrics"): the backend latency histogram
// counts every backend call once, cumulatively over buckets in seconds, and the pool-connections gauge shows the open
// connections; label values are the configured limiter name only (never a key).
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <stdexcept>
#include <string>

#include <prometheus/text_serializer.h>

#include <ratelimit/http/prometheus.hpp>
#include <ratelimit/layers.hpp>
#include <ratelimit/ratelimit.hpp>
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

// Label values are configured names: quotes, backslashes and newlines are escaped in the text format; a
// name Prometheus cannot take is refused when it is added, not at every scrape: invalid UTF-8 (Prometheus
// rejects the whole page) and a second layer or limiter of one name (duplicate series, which it drops).
TEST(MetricsCollectorNames, EscapedAndInvalidOrDuplicateNamesRefused) {
  ratelimit::MemoryLimiter<ratelimit::FixedWindow> memory(ratelimit::FixedWindow{5, 1s});
  using Layer = ratelimit::LimiterLayer<ratelimit::MemoryLimiter<ratelimit::FixedWindow>>;
  Layer odd(memory, "a\"b\\c\nd"), dup(memory, "dup"), dup_again(memory, "dup"), bad(memory, "\xff\xfe");
  ratelimit::http::MetricsCollector collector;
  collector.add_layer(odd);
  collector.add_layer(dup);
  EXPECT_THROW(collector.add_layer(dup_again), std::invalid_argument);
  EXPECT_THROW(collector.add_layer(dup), std::invalid_argument);
  EXPECT_THROW(collector.add_layer(bad), std::invalid_argument);
  collector.add_limiter("dup", memory);  // a limiter's labels are another family's: no clash with the layer
  EXPECT_THROW(collector.add_limiter("dup", memory), std::invalid_argument);
  EXPECT_THROW(collector.add_limiter("\xc0\xaf", memory), std::invalid_argument);  // overlong "/"
  collector.add_limiter("h\xc3\xa9", memory);                                      // UTF-8 is fine
  const std::string text = ::prometheus::TextSerializer().Serialize(collector.Collect());
  EXPECT_NE(text.find(R"(ratelimit_decisions_total{layer="a\"b\\c\nd",outcome="allowed"} 0)"), std::string::npos)
      << text;
  std::size_t dup_series = 0;
  for (std::size_t at = 0; (at = text.find(R"({layer="dup",outcome="allowed"})", at)) != std::string::npos; ++at) {
    ++dup_series;
  }
  EXPECT_EQ(dup_series, 1u) << text;
}

}  // namespace
