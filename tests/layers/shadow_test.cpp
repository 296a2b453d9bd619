// Shadow (dry-run) mode of layers (include/ratelimit/layers/README.md "Shadow mode"): the twin test per policy (a
// shadow layer's would-be denials are exactly an enforcing one's), and the mixed rules by hand: enforcing layers
// decide, a shadow layer consumes only when the request passes and it admits, never causes a rollback.
#include <gtest/gtest.h>

#include <ratelimit/layers.hpp>
#include <ratelimit/ratelimit.hpp>

#include <cstdio>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "shadow_twin.hpp"

using namespace std::chrono_literals;
using ratelimit::LayerOptions;
using ratelimit::LimiterLayer;
using ratelimit::ManualClock;
using ratelimit::MemoryLimiter;
using ratelimit::Verdict;

namespace {

template <class P>
void memory_twin(const P& policy, std::uint32_t seed) {
  ManualClock clock;
  auto make = [&clock](auto p, const std::string&) {
    return std::make_unique<MemoryLimiter<decltype(p), ManualClock>>(p, ratelimit::MemoryOptions{}, clock);
  };
  const auto counts = ratelimit_test::run_shadow_twin(policy, clock, make, 10'000, seed);
  std::printf("%s: %d calls, enforcing denials %d, shadow denials %d\n", P::kind.data(), counts.calls,
              counts.enforcing_denials, counts.shadow_denials);
  EXPECT_EQ(counts.shadow_denials, counts.enforcing_denials);
  EXPECT_GT(counts.enforcing_denials, counts.calls / 20) << "too few denials to compare";
  EXPECT_LT(counts.enforcing_denials, counts.calls * 19 / 20) << "too many denials to compare";
}

/// A limiter that is no `JointBackend`: `check_layers` goes layer by layer (consume, then refund).
template <class P>
class SeparateLimiter {
 public:
  SeparateLimiter(P policy, ManualClock clock) : inner_(policy, {}, clock) {}
  ratelimit::Decision allow(std::string_view key, std::int64_t cost = 1) { return inner_.allow(key, cost); }
  ratelimit::Decision peek(std::string_view key) { return inner_.peek(key); }
  ratelimit::Decision refund(std::string_view key, std::int64_t cost) { return inner_.refund(key, cost); }
  void reset(std::string_view key) { inner_.reset(key); }
  P policy() const { return inner_.policy(); }
  ManualClock& clock() { return inner_.clock(); }

 private:
  MemoryLimiter<P, ManualClock> inner_;
};

LayerOptions shadow_options(bool headers = false) {
  LayerOptions o;
  o.shadow = true;
  o.shadow_headers = headers;
  return o;
}

}  // namespace

TEST(ShadowTwin, FixedWindowMemory) { memory_twin(ratelimit::FixedWindow{5, 2s}, 1); }
TEST(ShadowTwin, SlidingWindowLogMemory) { memory_twin(ratelimit::SlidingWindowLog{6, 3s}, 2); }
TEST(ShadowTwin, SlidingWindowCounterMemory) { memory_twin(ratelimit::SlidingWindowCounter{7, 2s}, 3); }
TEST(ShadowTwin, TokenBucketMemory) {
  memory_twin(ratelimit::TokenBucket{.capacity = 4, .refill_tokens = 2, .refill_period = 1s}, 4);
}
TEST(ShadowTwin, GcraMemory) { memory_twin(ratelimit::Gcra{.limit = 3, .period = 1500ms, .burst = 5}, 5); }

// An enforcing layer denies: the request is denied, and the shadow layer that admitted keeps nothing.
TEST(ShadowMode, EnforcingDenialRollsBackTheShadowLayer) {
  ManualClock clock;
  MemoryLimiter<ratelimit::FixedWindow, ManualClock> strict(ratelimit::FixedWindow{1, 60s}, {}, clock);
  MemoryLimiter<ratelimit::FixedWindow, ManualClock> dry(ratelimit::FixedWindow{10, 60s}, {}, clock);
  LimiterLayer strict_layer(strict, "strict");
  LimiterLayer dry_layer(dry, "dry", shadow_options());
  ASSERT_TRUE(ratelimit::check_layers({{&strict_layer, "k"}, {&dry_layer, "k"}}));
  const auto d = ratelimit::check_layers({{&strict_layer, "k"}, {&dry_layer, "k"}});
  EXPECT_FALSE(d);
  EXPECT_EQ(d.layers[0].verdict, Verdict::limited);
  EXPECT_EQ(d.layers[1].verdict, Verdict::rolled_back);
  EXPECT_EQ(dry.peek("k").remaining, 9);  // only the passed request
  EXPECT_EQ(d.violated_policies(), std::vector<std::string>{"strict"});
}

// A shadow layer would deny: the request passes, the enforcing layer keeps its consumption, the shadow
// layer consumes nothing more, counts a would-be denial and reports it to on_limited as shadow.
TEST(ShadowMode, ShadowDenialPassesAndCausesNoRollback) {
  ManualClock clock;
  MemoryLimiter<ratelimit::FixedWindow, ManualClock> open(ratelimit::FixedWindow{10, 60s}, {}, clock);
  MemoryLimiter<ratelimit::FixedWindow, ManualClock> dry(ratelimit::FixedWindow{1, 60s}, {}, clock);
  std::vector<std::string> events;
  LayerOptions o = shadow_options();
  o.on_limited = [&](const ratelimit::LimitedEvent& e) {
    events.push_back(std::string(e.layer) + (e.shadow ? ":shadow" : ":enforced"));
  };
  LimiterLayer open_layer(open, "open");
  LimiterLayer dry_layer(dry, "dry", o);
  for (int i = 0; i < 3; ++i) {
    const auto d = ratelimit::check_layers({{&open_layer, "k"}, {&dry_layer, "k"}});
    EXPECT_TRUE(d) << i;
    EXPECT_EQ(d.layers[0].verdict, Verdict::admitted) << i;
    EXPECT_EQ(d.layers[1].verdict, i == 0 ? Verdict::admitted : Verdict::limited) << i;
    EXPECT_EQ(d.layers[1].shadow_denied(), i > 0) << i;
    EXPECT_TRUE(d.violated_policies().empty());
    EXPECT_EQ(d.shadow_denials().size(), i > 0 ? 1u : 0u);
  }
  EXPECT_EQ(open.peek("k").remaining, 7);
  EXPECT_EQ(dry.peek("k").remaining, 0);
  EXPECT_EQ(events, (std::vector<std::string>{"dry:shadow", "dry:shadow"}));
  EXPECT_EQ(dry_layer.stats().snapshot(), (ratelimit::LayerCounters{.allowed = 1, .shadow_denied = 2}));
  EXPECT_EQ(open_layer.stats().snapshot(), (ratelimit::LayerCounters{.allowed = 3}));
}

// The same rules on the layer-by-layer path (backends that cannot be checked jointly).
TEST(ShadowMode, LayerByLayerPathKeepsTheSameRules) {
  ManualClock clock;
  SeparateLimiter<ratelimit::FixedWindow> first(ratelimit::FixedWindow{10, 60s}, clock);
  SeparateLimiter<ratelimit::FixedWindow> dry(ratelimit::FixedWindow{1, 60s}, clock);
  SeparateLimiter<ratelimit::FixedWindow> last(ratelimit::FixedWindow{2, 60s}, clock);
  LimiterLayer first_layer(first, "first");
  LimiterLayer dry_layer(dry, "dry", shadow_options());
  LimiterLayer last_layer(last, "last");
  auto check = [&] { return ratelimit::check_layers({{&first_layer, "k"}, {&dry_layer, "k"}, {&last_layer, "k"}}); };
  EXPECT_TRUE(check());
  const auto second = check();  // dry would deny: no rollback, last still checked
  EXPECT_TRUE(second);
  EXPECT_TRUE(second.layers[1].shadow_denied());
  EXPECT_EQ(second.layers[2].verdict, Verdict::admitted);
  const auto third = check();  // last denies: first is given back
  EXPECT_FALSE(third);
  EXPECT_EQ(third.layers[0].verdict, Verdict::rolled_back);
  EXPECT_EQ(first.peek("k").remaining, 8);
  EXPECT_EQ(last.peek("k").remaining, 0);
}

// Lists and penalties of a shadow layer are would-be denials too; a check-wide shadow mode lets
// everything pass.
TEST(ShadowMode, DenyListAndPenaltyOfAShadowLayerDoNotDeny) {
  ManualClock clock;
  MemoryLimiter<ratelimit::FixedWindow, ManualClock> a(ratelimit::FixedWindow{1, 60s}, {}, clock);
  MemoryLimiter<ratelimit::FixedWindow, ManualClock> b(ratelimit::FixedWindow{5, 60s}, {}, clock);
  LayerOptions o = shadow_options();
  o.penalty = 10min;
  LimiterLayer a_layer(a, "a", o);
  LimiterLayer b_layer(b, "b");
  b_layer.lists().deny("bad");
  EXPECT_TRUE(ratelimit::check_layers({{&a_layer, "k"}, {&b_layer, "k"}}));
  EXPECT_TRUE(ratelimit::check_layers({{&a_layer, "k"}, {&b_layer, "k"}}));  // a: limited, starts a penalty
  const auto p = ratelimit::check_layers({{&a_layer, "k"}, {&b_layer, "k"}});
  EXPECT_TRUE(p);
  EXPECT_EQ(p.layers[0].verdict, Verdict::penalized);
  EXPECT_TRUE(p.layers[0].shadow);
  EXPECT_EQ(b.peek("k").remaining, 2);
  EXPECT_FALSE(ratelimit::check_layers({{&a_layer, "x"}, {&b_layer, "bad"}}));
  const auto all =
      ratelimit::check_layers({{&a_layer, "x"}, {&b_layer, "bad"}}, ratelimit::CheckOptions{.shadow = true});
  EXPECT_TRUE(all);
  EXPECT_TRUE(all.layers[1].shadow_denied());
  EXPECT_EQ(b_layer.stats().snapshot().shadow_denied, 1u);
}

// Header entries of shadow layers: left out by default; with shadow_headers, an admitting entry with the
// layer's would-be numbers (no Retry-After: the request passed).
TEST(ShadowMode, HeadersOnlyWithShadowHeaders) {
  ManualClock clock;
  MemoryLimiter<ratelimit::FixedWindow, ManualClock> e(ratelimit::FixedWindow{10, 60s}, {}, clock);
  MemoryLimiter<ratelimit::FixedWindow, ManualClock> quiet(ratelimit::FixedWindow{1, 60s}, {}, clock);
  MemoryLimiter<ratelimit::FixedWindow, ManualClock> loud(ratelimit::FixedWindow{1, 60s}, {}, clock);
  LimiterLayer e_layer(e, "e");
  LimiterLayer quiet_layer(quiet, "quiet", shadow_options(false));
  LimiterLayer loud_layer(loud, "loud", shadow_options(true));
  auto check = [&] { return ratelimit::check_layers({{&e_layer, "k"}, {&quiet_layer, "k"}, {&loud_layer, "k"}}); };
  (void)check();
  const auto d = check();
  ASSERT_TRUE(d);
  const auto entries = d.policy_decisions();
  ASSERT_EQ(entries.size(), 2u);
  EXPECT_EQ(entries[0].policy->name, "e");
  EXPECT_EQ(entries[1].policy->name, "loud");
  EXPECT_TRUE(entries[1].decision.allowed);
  EXPECT_EQ(entries[1].decision.retry_after, 0ns);
  EXPECT_EQ(entries[1].decision.remaining, 0);
  EXPECT_TRUE(d.decision.allowed);
  EXPECT_EQ(d.reported_by, 2u);  // the smallest remaining
  EXPECT_EQ(d.decision.remaining, 0);
}

// A passed request that failed downstream is refunded: a shadow layer that would have denied it consumed
// nothing, so nothing may be given back to it (its enforcing twin denied the request and was never
// refunded). Refunding it anyway gave back units of earlier requests: the shadow layer then admitted more
// than enforcement would. So is a layer whose backend failed open (it consumed nothing either).
TEST(ShadowMode, RefundOfAPassedRequestSkipsShadowDenials) {
  ManualClock clock;
  MemoryLimiter<ratelimit::FixedWindow, ManualClock> strict(ratelimit::FixedWindow{1, 60s}, {}, clock);
  MemoryLimiter<ratelimit::FixedWindow, ManualClock> loose(ratelimit::FixedWindow{10, 60s}, {}, clock);
  LimiterLayer<decltype(strict)> shadow(strict, "shadow", shadow_options());
  LimiterLayer<decltype(loose)> enforcing(loose, "enforcing");
  const ratelimit::LayerRequest requests[] = {{&enforcing, "k", 1}, {&shadow, "k", 1}};
  ASSERT_TRUE(ratelimit::check_layers(requests));  // both admit: the shadow layer holds 1 of 1
  const auto passed = ratelimit::check_layers(requests);
  ASSERT_TRUE(passed);
  ASSERT_TRUE(passed.layers[1].shadow_denied());
  ratelimit::refund_layers(requests, passed);  // the downstream call failed
  EXPECT_EQ(strict.peek("k").remaining, 0);    // still the first request's unit: enforcement would say so
  EXPECT_EQ(loose.peek("k").remaining, 9);
  EXPECT_EQ(shadow.stats().snapshot().refunded, 0u);
  EXPECT_EQ(enforcing.stats().snapshot().refunded, 1u);
  // Denied requests consumed nothing: nothing to give back.
  const ratelimit::LayerRequest denied_requests[] = {{&shadow, "k", 1}, {&enforcing, "k", 20}};
  const auto denied = ratelimit::check_layers(denied_requests);
  ASSERT_FALSE(denied);
  ratelimit::refund_layers(denied_requests, denied);
  EXPECT_EQ(loose.peek("k").remaining, 9);
  const ratelimit::LayerRequest other[] = {{&enforcing, "k", 1}};
  EXPECT_THROW(ratelimit::refund_layers(other, passed), std::invalid_argument);  // not this decision's request
}

// A shadow layer on the same limiter and key as an enforcing layer of the same check changes nothing
// the client sees, in either order, on the joint path (shard locks) and layer by layer: every answer
// and every state are those of the enforcing layer alone. It is not checked (its consumption would
// be the enforcing layer's too).
template <class L>
void shadow_sharing_an_enforcing_state(ManualClock& clock, L& limiter, L& alone) {
  LimiterLayer<L> enforcing(limiter, "enforcing");
  LimiterLayer<L> dry(limiter, "dry", shadow_options());
  LimiterLayer<L> reference(alone, "enforcing");
  for (const bool shadow_first : {true, false}) {
    SCOPED_TRACE(shadow_first ? "shadow first" : "enforcing first");
    for (int i = 0; i < 3; ++i) {
      const auto d = shadow_first ? ratelimit::check_layers({{&dry, "k"}, {&enforcing, "k"}})
                                  : ratelimit::check_layers({{&enforcing, "k"}, {&dry, "k"}});
      const auto want = ratelimit::check_layers({{&reference, "k"}});
      EXPECT_EQ(d.decision, want.decision) << "call " << i;
      EXPECT_EQ(d.layers[shadow_first ? 1 : 0].verdict, want.layers[0].verdict) << "call " << i;
      EXPECT_EQ(d.layers[shadow_first ? 0 : 1].verdict, Verdict::unchecked) << "call " << i;
      EXPECT_EQ(limiter.peek("k"), alone.peek("k")) << "call " << i;
    }
    clock.advance(60s);
  }
  EXPECT_EQ(dry.stats().snapshot().allowed + dry.stats().snapshot().shadow_denied, 0u);
}

TEST(ShadowMode, AShadowLayerSharingAnEnforcingStateChangesNothing) {
  {
    ManualClock clock;
    MemoryLimiter<ratelimit::FixedWindow, ManualClock> limiter(ratelimit::FixedWindow{1, 60s}, {}, clock);
    MemoryLimiter<ratelimit::FixedWindow, ManualClock> alone(ratelimit::FixedWindow{1, 60s}, {}, clock);
    shadow_sharing_an_enforcing_state(clock, limiter, alone);
  }
  {
    ManualClock clock;
    SeparateLimiter<ratelimit::FixedWindow> limiter(ratelimit::FixedWindow{1, 60s}, clock);
    SeparateLimiter<ratelimit::FixedWindow> alone(ratelimit::FixedWindow{1, 60s}, clock);
    shadow_sharing_an_enforcing_state(clock, limiter, alone);
  }
}
