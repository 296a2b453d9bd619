// The adaptive algorithms on synthetic samples with explicit times (include/ratelimit/concurrency/README.md
// "Adaptive algorithms"): each raises its limit under low latency, cuts it under rising latency and on drops,
// stays within its bounds whatever the samples, and refuses bad options naming the field.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <limits>
#include <memory>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include <ratelimit/concurrency.hpp>

namespace {

using namespace std::chrono_literals;
using ratelimit::AdaptiveAlgorithm;
using ratelimit::LatencySample;
using ratelimit::PermitOutcome;

constexpr std::int64_t kMs = 1'000'000;
constexpr std::int64_t kInt64Max = std::numeric_limits<std::int64_t>::max();

/// Feeds samples 1 ms apart on its own time line, each granted at the algorithm's current limit.
struct Feeder {
  std::int64_t now_ns = 0;

  /// `count` samples of `rtt_ns`; in flight at grant is the current limit unless `in_flight` > 0.
  std::int64_t feed(AdaptiveAlgorithm& a, int count, std::int64_t rtt_ns, std::int64_t in_flight = 0,
                    PermitOutcome outcome = PermitOutcome::succeeded) {
    for (int i = 0; i < count; ++i) {
      now_ns += kMs;
      a.on_sample(
          {.now_ns = now_ns, .rtt_ns = rtt_ns, .in_flight = in_flight > 0 ? in_flight : a.limit(), .outcome = outcome});
    }
    return a.limit();
  }
};

// Small windows and rare probes, so a few hundred samples show a trend.
ratelimit::AimdOptions aimd_options() { return {.initial_limit = 10, .latency_threshold = 20ms, .window_samples = 10}; }
ratelimit::GradientOptions gradient_options() {
  return {.initial_limit = 10, .window_samples = 10, .probe = {.interval = 1h, .samples = 10}};
}
ratelimit::VegasOptions vegas_options() {
  return {.initial_limit = 10, .window_samples = 10, .probe = {.interval = 1h, .samples = 10}};
}

std::vector<std::function<std::unique_ptr<AdaptiveAlgorithm>()>> all_algorithms() {
  return {[] { return std::make_unique<ratelimit::AimdLimit>(aimd_options()); },
          [] { return std::make_unique<ratelimit::GradientLimit>(gradient_options()); },
          [] { return std::make_unique<ratelimit::VegasLimit>(vegas_options()); }};
}

TEST(AdaptiveAlgorithm, EachRaisesItsLimitUnderLowLatency) {
  for (const auto& make : all_algorithms()) {
    auto a = make();
    Feeder f;
    const std::int64_t start = a->limit();
    f.feed(*a, 200, 10 * kMs);  // the first window and the first probe measure 10 ms
    const std::int64_t after = f.feed(*a, 200, 10 * kMs);
    EXPECT_GT(after, start) << a->name();
    const std::int64_t later = f.feed(*a, 200, 10 * kMs);
    EXPECT_TRUE(later > after || later == 1000) << a->name() << ": " << later << " after " << after;
  }
}

TEST(AdaptiveAlgorithm, EachCutsItsLimitUnderRisingLatency) {
  for (const auto& make : all_algorithms()) {
    auto a = make();
    Feeder f;
    const std::int64_t grown = f.feed(*a, 600, 10 * kMs);
    ASSERT_GT(grown, 20) << a->name();
    const std::int64_t cut = f.feed(*a, 30, 40 * kMs);  // 4 x the unloaded RTT, for three windows
    EXPECT_LT(cut, grown * 3 / 4) << a->name();
    EXPECT_LE(f.feed(*a, 100, 40 * kMs), cut) << a->name() << ": keeps cutting while RTTs stay high";
  }
}

TEST(AdaptiveAlgorithm, EachCutsItsLimitOnDrops) {
  for (const auto& make : all_algorithms()) {
    auto a = make();
    Feeder f;
    const std::int64_t grown = f.feed(*a, 600, 10 * kMs);
    const std::int64_t cut = f.feed(*a, 10, 10 * kMs, 0, PermitOutcome::dropped);  // one window, low RTTs
    EXPECT_LT(cut, grown) << a->name();
    EXPECT_LT(f.feed(*a, 50, 10 * kMs, 0, PermitOutcome::dropped), cut) << a->name();
  }
}

TEST(AdaptiveAlgorithm, EachLeavesAnUnusedLimit) {
  for (const auto& make : all_algorithms()) {
    auto a = make();
    Feeder f;
    f.feed(*a, 100, 10 * kMs);  // past the first window and probe
    const std::int64_t before = f.feed(*a, 30, 10 * kMs);
    // Low RTTs, but the caller keeps 2 units in flight: the service, not the limit, holds the load back.
    EXPECT_EQ(f.feed(*a, 300, 10 * kMs, 2), before) << a->name();
  }
}

TEST(AdaptiveAimd, AddsOnePerWindowAndMultipliesByTheBackoff) {
  ratelimit::AimdLimit a(aimd_options());
  Feeder f;
  EXPECT_EQ(f.feed(a, 9, 5 * kMs), 10);  // the window is not complete
  EXPECT_EQ(f.feed(a, 1, 5 * kMs), 11);
  EXPECT_EQ(f.feed(a, 10, 5 * kMs), 12);
  EXPECT_EQ(f.feed(a, 10, 21 * kMs), 10);  // 12 x 0.9 = 10.8, rounded down
  EXPECT_EQ(f.feed(a, 9, 21 * kMs) + f.feed(a, 1, 5 * kMs, 0, PermitOutcome::dropped), 10 + 9);
}

TEST(AdaptiveVegas, ProbeLowersTheLimitAndMeasuresTheUnloadedRtt) {
  ratelimit::VegasLimit a(
      {.initial_limit = 10, .window_samples = 10, .probe = {.interval = 1s, .jitter = 0, .ratio = 0.5, .samples = 20}});
  Feeder f;
  const std::int64_t grown = f.feed(a, 500, 10 * kMs);  // first window, first probe, growth; 0.5 s
  EXPECT_EQ(a.min_rtt_ns(), 10 * kMs);
  ASSERT_FALSE(a.probing());
  const std::int64_t grown_at_ns = f.now_ns;
  while (!a.probing() && f.now_ns < 2'000'000'000) f.feed(a, 1, 10 * kMs);
  ASSERT_TRUE(a.probing());
  EXPECT_GE(f.now_ns, 1'000'000'000);  // one interval (1 s, no jitter) after the first probe ended
  EXPECT_LE(f.now_ns, grown_at_ns + 1'000'000'000);
  const std::int64_t lowered = a.limit();
  EXPECT_LE(lowered, grown);  // half the concurrency served without queueing
  // Samples granted above the probe's limit do not count; those under it, after 7 min RTTs, do.
  f.feed(a, 70, 100 * kMs, kInt64Max);
  f.feed(a, 20, 6 * kMs);
  EXPECT_FALSE(a.probing());
  EXPECT_EQ(a.min_rtt_ns(), 6 * kMs);
  EXPECT_GT(a.limit(), lowered);
}

TEST(AdaptiveGradient, ProbeEndsAfterItsMaximumAgeKeepingTheOldMinRtt) {
  ratelimit::GradientLimit a({.initial_limit = 10,
                              .window_samples = 10,
                              .probe = {.interval = 1s, .jitter = 0, .samples = 1000, .max = 200ms}});
  Feeder f;
  f.feed(a, 10, 10 * kMs);
  ASSERT_EQ(a.min_rtt_ns(), 10 * kMs);
  f.feed(a, 1, 10 * kMs);  // starts the first probe
  ASSERT_TRUE(a.probing());
  f.feed(a, 400, 20 * kMs, kInt64Max);  // none counts: granted above the probe's limit
  EXPECT_FALSE(a.probing());
  EXPECT_EQ(a.min_rtt_ns(), 10 * kMs);
}

/// Samples no limiter would send: zero, negative and INT64_MAX RTTs and in-flight counts, the clock
/// stepping back and to both ends of int64, drops.
void check_bounds_under_adversarial_samples(AdaptiveAlgorithm& a, std::int64_t min, std::int64_t max) {
  std::mt19937_64 random(34);
  const std::int64_t extremes[] = {0, -1, 1, kInt64Max, std::numeric_limits<std::int64_t>::min(), 10 * kMs};
  std::int64_t now = 0;
  for (int i = 0; i < 200'000; ++i) {
    const auto pick = [&] { return extremes[random() % std::size(extremes)]; };
    // Forward in steps of up to 20 ms, wrapping past INT64_MAX (modular in C++20), or a jump to an extreme.
    now =
        random() % 8 == 0 ? pick() : static_cast<std::int64_t>(static_cast<std::uint64_t>(now) + random() % (20 * kMs));
    const std::int64_t rtt = random() % 2 ? pick() : static_cast<std::int64_t>(random() % (50 * kMs));
    const std::int64_t in_flight = random() % 2 ? pick() : static_cast<std::int64_t>(random() % 1000);
    const auto outcome = static_cast<PermitOutcome>(random() % 3);
    const std::int64_t limit = a.on_sample({.now_ns = now, .rtt_ns = rtt, .in_flight = in_flight, .outcome = outcome});
    ASSERT_EQ(limit, a.limit());
    ASSERT_GE(limit, min) << a.name() << " sample " << i;
    ASSERT_LE(limit, max) << a.name() << " sample " << i;
  }
}

TEST(AdaptiveAlgorithm, EachStaysWithinItsBoundsUnderAdversarialSamples) {
  ratelimit::AimdLimit aimd({.initial_limit = 5, .min_limit = 3, .max_limit = 7, .window_samples = 3});
  check_bounds_under_adversarial_samples(aimd, 3, 7);
  ratelimit::GradientLimit gradient(
      {.initial_limit = 5, .min_limit = 3, .max_limit = 7, .window_samples = 3, .probe = {.samples = 3}});
  check_bounds_under_adversarial_samples(gradient, 3, 7);
  ratelimit::VegasLimit vegas(
      {.initial_limit = 5, .min_limit = 3, .max_limit = 7, .window_samples = 3, .probe = {.samples = 3}});
  check_bounds_under_adversarial_samples(vegas, 3, 7);
  // The whole range: doubling and adding near INT64_MAX must not overflow.
  ratelimit::AimdLimit aimd_wide({.initial_limit = kInt64Max - 1, .max_limit = kInt64Max, .window_samples = 3});
  check_bounds_under_adversarial_samples(aimd_wide, 1, kInt64Max);
  ratelimit::GradientLimit gradient_wide(
      {.initial_limit = kInt64Max / 2, .max_limit = kInt64Max, .window_samples = 3, .probe = {.samples = 3}});
  check_bounds_under_adversarial_samples(gradient_wide, 1, kInt64Max);
  ratelimit::VegasLimit vegas_wide(
      {.initial_limit = kInt64Max / 2, .max_limit = kInt64Max, .window_samples = 3, .probe = {.samples = 3}});
  check_bounds_under_adversarial_samples(vegas_wide, 1, kInt64Max);
}

TEST(AdaptiveAlgorithm, IsDeterministicAndClonesFresh) {
  for (const auto& make : all_algorithms()) {
    auto a = make();
    auto b = make();
    Feeder fa;
    Feeder fb;
    std::vector<std::int64_t> seen;
    for (int round = 0; round < 20; ++round) {
      const std::int64_t rtt = (round % 5 + 1) * 7 * kMs;
      seen.push_back(fa.feed(*a, 37, rtt));
      ASSERT_EQ(fb.feed(*b, 37, rtt), seen.back()) << a->name() << " round " << round;
    }
    auto fresh = a->clone();
    EXPECT_EQ(fresh->name(), a->name());
    EXPECT_EQ(fresh->limit(), 10) << a->name() << ": a clone starts at initial_limit";
    Feeder fc;
    for (int round = 0; round < 20; ++round) {
      ASSERT_EQ(fc.feed(*fresh, 37, (round % 5 + 1) * 7 * kMs), seen[static_cast<std::size_t>(round)]) << a->name();
    }
  }
}

/// `make` throws std::invalid_argument whose message starts with `field`.
void expect_refused(const std::function<void()>& make, const std::string& field) {
  try {
    make();
    ADD_FAILURE() << field << ": accepted";
  } catch (const std::invalid_argument& e) {
    EXPECT_EQ(std::string(e.what()).rfind(field + ": ", 0), 0u) << e.what();
  }
}

TEST(AdaptiveAlgorithm, BadOptionsThrowNamingTheField) {
  using A = ratelimit::AimdOptions;
  auto aimd = [](A o) { return [o] { ratelimit::AimdLimit a(o); }; };
  expect_refused(aimd({.min_limit = 0}), "AimdOptions.min_limit");
  expect_refused(aimd({.initial_limit = 5, .min_limit = 5, .max_limit = 4}), "AimdOptions.max_limit");
  expect_refused(aimd({.initial_limit = 0}), "AimdOptions.initial_limit");
  expect_refused(aimd({.initial_limit = 2000}), "AimdOptions.initial_limit");
  expect_refused(aimd({.latency_threshold = 0ns}), "AimdOptions.latency_threshold");
  expect_refused(aimd({.backoff_ratio = 1.0}), "AimdOptions.backoff_ratio");
  expect_refused(aimd({.backoff_ratio = 0.0}), "AimdOptions.backoff_ratio");
  expect_refused(aimd({.additive_increase = -1}), "AimdOptions.additive_increase");
  expect_refused(aimd({.additive_increase = std::numeric_limits<double>::infinity()}), "AimdOptions.additive_increase");
  expect_refused(aimd({.window_samples = 0}), "AimdOptions.window_samples");
  expect_refused(aimd({.window_max = -1s}), "AimdOptions.window_max");

  using G = ratelimit::GradientOptions;
  auto gradient = [](G o) { return [o] { ratelimit::GradientLimit a(o); }; };
  expect_refused(gradient({.min_limit = -3}), "GradientOptions.min_limit");
  expect_refused(gradient({.tolerance = 0.99}), "GradientOptions.tolerance");
  expect_refused(gradient({.tolerance = std::numeric_limits<double>::quiet_NaN()}), "GradientOptions.tolerance");
  expect_refused(gradient({.queue_allowance = -0.5}), "GradientOptions.queue_allowance");
  expect_refused(gradient({.smoothing = 0}), "GradientOptions.smoothing");
  expect_refused(gradient({.smoothing = 1.5}), "GradientOptions.smoothing");
  expect_refused(gradient({.probe = {.interval = 0s}}), "GradientOptions.probe.interval");
  expect_refused(gradient({.probe = {.jitter = 2}}), "GradientOptions.probe.jitter");
  expect_refused(gradient({.probe = {.ratio = 1}}), "GradientOptions.probe.ratio");
  expect_refused(gradient({.probe = {.samples = 0}}), "GradientOptions.probe.samples");
  expect_refused(gradient({.probe = {.max = 0s}}), "GradientOptions.probe.max");

  using V = ratelimit::VegasOptions;
  auto vegas = [](V o) { return [o] { ratelimit::VegasLimit a(o); }; };
  expect_refused(vegas({.max_limit = 0}), "VegasOptions.max_limit");
  expect_refused(vegas({.alpha = 0}), "VegasOptions.alpha");
  expect_refused(vegas({.alpha = 5, .beta = 4}), "VegasOptions.beta");
  expect_refused(vegas({.smoothing = -1}), "VegasOptions.smoothing");
  expect_refused(vegas({.drop_backoff = 1}), "VegasOptions.drop_backoff");
  expect_refused(vegas({.window_samples = -1}), "VegasOptions.window_samples");
  expect_refused(vegas({.probe = {.ratio = 0}}), "VegasOptions.probe.ratio");
}

}  // namespace
