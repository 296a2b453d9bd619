#pragma once

// The shadow twin: the same random calls through an enforcing layer and through its shadow twin
// (include/ratelimit/layers/README.md "Shadow mode"). Each twin is a layered check of the layer under test plus an
// enforcing layer that never denies, so the joint path (shard locks; on Redis one script) is the one exercised. The
// shadow twin's would-be denials must be exactly the enforcing twin's denials, call by call, with equal decisions.

#include <gtest/gtest.h>

#include <ratelimit/layers.hpp>
#include <ratelimit/ratelimit.hpp>

#include <array>
#include <chrono>
#include <cstdint>
#include <random>
#include <string>

namespace ratelimit_test {

/// Counts of one twin run.
struct TwinCounts {
  int calls = 0;
  int enforcing_denials = 0;
  int shadow_denials = 0;
};

/// Runs `calls` random calls (4 keys, costs 0-3, steps of 0-400 ms in whole microseconds, a 300 ms
/// penalty on the layer under test) through both twins. `make(policy, tag)` builds a limiter on `clock`
/// (distinct state per tag). The second half of the calls puts the shadow twin's every layer in shadow
/// mode through `CheckOptions` instead of the layer's own switch.
template <class Policy, class Make>
TwinCounts run_shadow_twin(const Policy& policy, ratelimit::ManualClock& clock, Make make, int calls,
                           std::uint32_t seed) {
  using namespace std::chrono_literals;
  const ratelimit::FixedWindow never_denies{1'000'000'000, std::chrono::hours(24 * 365)};
  auto enforcing = make(policy, "enforcing");
  auto shadow = make(policy, "shadow");
  auto enforcing_base = make(never_denies, "enforcing-base");
  auto shadow_base = make(never_denies, "shadow-base");
  ratelimit::LayerOptions penalty;
  penalty.penalty = 300ms;
  ratelimit::LayerOptions shadow_penalty = penalty;
  shadow_penalty.shadow = true;
  ratelimit::LimiterLayer e_layer(*enforcing, "under-test", penalty);
  ratelimit::LimiterLayer s_layer(*shadow, "under-test", shadow_penalty);
  ratelimit::LimiterLayer e_base(*enforcing_base, "base");
  ratelimit::LimiterLayer s_base(*shadow_base, "base");
  const std::array<std::string, 4> keys{"a", "b", "c", "d"};
  std::mt19937 rng(seed);
  TwinCounts counts;
  std::array<std::int64_t, 4> e_passed{}, s_passed{};  // cost units the base layers must hold, per key
  for (int i = 0; i < calls; ++i) {
    clock.advance(std::chrono::microseconds(rng() % 4 == 0 ? 0 : rng() % 400'000));
    const std::size_t k = rng() % keys.size();
    const std::string& key = keys[k];
    const std::int64_t cost = rng() % 8 == 0 ? 0 : 1 + static_cast<std::int64_t>(rng() % 3 == 0 ? rng() % 3 : 0);
    const bool all_shadow = i >= calls / 2;
    s_layer.set_shadow(!all_shadow);  // the second half: shadow through CheckOptions only
    const auto e = ratelimit::check_layers({{&e_base, key, cost}, {&e_layer, key, cost}});
    const auto s = ratelimit::check_layers({{&s_base, key, cost}, {&s_layer, key, cost}},
                                           ratelimit::CheckOptions{.shadow = all_shadow});
    ++counts.calls;
    const auto& eo = e.layers[1];
    const auto& so = s.layers[1];
    if (eo.denied()) ++counts.enforcing_denials;
    if (so.shadow_denied()) ++counts.shadow_denials;
    EXPECT_TRUE(s.decision.allowed) << "call " << i << ": a shadow layer denied the request";
    EXPECT_EQ(s.layers[0].verdict, ratelimit::Verdict::admitted) << "call " << i << ": a shadow denial rolled back";
    if (e) e_passed[k] += cost;
    s_passed[k] += cost;
    if (e.layers[0].verdict != ratelimit::Verdict::unchecked) {
      EXPECT_EQ(e.layers[0].decision.remaining, never_denies.limit - e_passed[k]) << "call " << i;
    }
    EXPECT_EQ(s.layers[0].decision.remaining, never_denies.limit - s_passed[k]) << "call " << i << ": base not kept";
    EXPECT_EQ(so.verdict, eo.verdict) << "call " << i;
    EXPECT_EQ(so.decision, eo.decision) << "call " << i << " key " << key << " cost " << cost;
    EXPECT_EQ(e.decision.allowed, !eo.denied()) << "call " << i;
    if (::testing::Test::HasFailure()) break;  // the first divergence is the one to read
  }
  EXPECT_EQ(s_layer.stats().snapshot().shadow_denied, static_cast<std::uint64_t>(counts.shadow_denials));
  EXPECT_EQ(s_layer.stats().snapshot().denied, 0u);
  EXPECT_EQ(e_layer.stats().snapshot().denied, static_cast<std::uint64_t>(counts.enforcing_denials));
  EXPECT_EQ(e_layer.stats().snapshot().allowed, s_layer.stats().snapshot().allowed);
  return counts;
}

}  // namespace ratelimit_test
