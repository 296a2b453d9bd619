// Settling a layered request after the response (include/ratelimit/README.md "Settling after the response"):
// `settle_layers` settles every layer the request consumed in, each with its own charge and actual cost; a layer
// whose limiter cannot debit refuses before any layer changes; the header fields after a settle tell the truth.
#include <gtest/gtest.h>

#include <ratelimit/http/headers.hpp>  // the header fields after a settle
#include <ratelimit/layers.hpp>
#include <ratelimit/ratelimit.hpp>

#include "invalid_message.hpp"

#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace {
namespace settle_layers_test {  // named: the unity build joins this file with others

using namespace std::chrono_literals;
using ratelimit::Decision;
using ratelimit::LayerRequest;
using ratelimit::LimiterLayer;
using ratelimit::ManualClock;
using ratelimit::MemoryLimiter;

// A limiter with `refund` but no `settle` (as a Redis limiter of an older build): its layer cannot debit.
class RefundOnly {
 public:
  explicit RefundOnly(ManualClock clock) : inner_(ratelimit::FixedWindow{.limit = 5, .window = 60s}, {}, clock) {}
  Decision allow(std::string_view key, std::int64_t cost = 1) { return inner_.allow(key, cost); }
  Decision peek(std::string_view key) { return inner_.peek(key); }
  Decision refund(std::string_view key, std::int64_t cost) { return inner_.refund(key, cost); }
  void reset(std::string_view key) { inner_.reset(key); }
  ratelimit::FixedWindow policy() const { return inner_.policy(); }
  ManualClock& clock() { return inner_.clock(); }

 private:
  MemoryLimiter<ratelimit::FixedWindow, ManualClock> inner_;
};

struct Layers {
  ManualClock clock;
  // Requests per user, and tokens per user (T = 1 ms per token).
  MemoryLimiter<ratelimit::FixedWindow, ManualClock> calls{
      ratelimit::FixedWindow{.limit = 10, .window = 60s}, {}, clock};
  MemoryLimiter<ratelimit::Gcra, ManualClock> tokens{
      ratelimit::Gcra{.limit = 1000, .period = 1s, .burst = 1000}, {}, clock};
  LimiterLayer<decltype(calls)> calls_layer{calls, "calls"};
  LimiterLayer<decltype(tokens)> tokens_layer{tokens, "tokens"};
};

TEST(SettleLayers, SettlesEveryLayerTheRequestPassed) {
  Layers l;
  const LayerRequest request[] = {{&l.calls_layer, "u", 1}, {&l.tokens_layer, "u", 600}};
  const ratelimit::LayeredDecision passed = ratelimit::check_layers(request);
  ASSERT_TRUE(passed);
  const std::int64_t used[] = {1, 1500};  // the answer took 1,500 tokens: 500 owed beyond the burst
  ratelimit::settle_layers(request, passed, used);
  EXPECT_EQ(l.calls.peek("u").remaining, 9);         // charged what it used
  EXPECT_EQ(l.tokens.peek("u").retry_after, 501ms);  // backlog 1.5 s: 500 ms of debt, then 1 ms for one token
  EXPECT_FALSE(ratelimit::check_layers(request));    // the next request waits for the debt
  const std::int64_t fewer[] = {0, 100};
  ratelimit::settle_layers(request, passed, fewer);  // below the charge: given back (1 call, 500 tokens)
  EXPECT_EQ(l.calls.peek("u").remaining, 10);
  EXPECT_EQ(l.tokens.peek("u").reset_after, 1000ms);  // 1,500 - 500 ms, at the same time
}

TEST(SettleLayers, ADeniedRequestSettlesNothing) {
  Layers l;
  ASSERT_TRUE(l.tokens.allow("u", 1000));
  const LayerRequest request[] = {{&l.calls_layer, "u", 1}, {&l.tokens_layer, "u", 10}};
  const ratelimit::LayeredDecision denied = ratelimit::check_layers(request);
  ASSERT_FALSE(denied);
  const Decision before = l.tokens.peek("u");
  const std::int64_t used[] = {5, 500};
  ratelimit::settle_layers(request, denied, used);
  EXPECT_EQ(l.calls.peek("u").remaining, 10);  // rolled back, and not settled
  EXPECT_EQ(l.tokens.peek("u"), before);
}

TEST(SettleLayers, ALayerThatCannotDebitRefusesBeforeAnyLayerChanges) {
  Layers l;
  RefundOnly plain(l.clock);
  LimiterLayer<RefundOnly> plain_layer(plain, "plain");
  EXPECT_FALSE(plain_layer.can_settle());
  EXPECT_TRUE(l.tokens_layer.can_settle());
  const LayerRequest request[] = {{&l.tokens_layer, "u", 100}, {&plain_layer, "u", 2}};
  const ratelimit::LayeredDecision passed = ratelimit::check_layers(request);
  ASSERT_TRUE(passed);
  const Decision tokens_before = l.tokens.peek("u");
  const std::int64_t more[] = {200, 3};
  EXPECT_THROW(ratelimit::settle_layers(request, passed, more), std::logic_error);
  EXPECT_EQ(l.tokens.peek("u"), tokens_before);
  EXPECT_EQ(plain.peek("u").remaining, 3);
  const std::int64_t less[] = {200, 1};  // at or below the charge a plain layer gives back as refund does
  ratelimit::settle_layers(request, passed, less);
  EXPECT_EQ(plain.peek("u").remaining, 4);
  EXPECT_EQ(l.tokens.peek("u").reset_after, 200ms);
}

TEST(SettleLayers, BadInputNamesTheField) {
  Layers l;
  const LayerRequest request[] = {{&l.calls_layer, "u", 1}, {&l.tokens_layer, "u", 1}};
  const ratelimit::LayeredDecision passed = ratelimit::check_layers(request);
  const std::int64_t one[] = {1};
  const std::int64_t negative[] = {1, -4};
  const std::int64_t fine[] = {1, 1};
  EXPECT_EQ(
      ratelimit_test::invalid_message([&] { ratelimit::settle_layers(request, passed, one); }).rfind("actual:", 0), 0u);
  EXPECT_EQ(ratelimit_test::invalid_message([&] { ratelimit::settle_layers(request, passed, negative); }),
            "actual[1]: must be >= 0, got -4");
  EXPECT_EQ(ratelimit_test::invalid_message([&] { ratelimit::settle_layers(request, passed, fine, -1); }),
            "max_debt: must be >= 0, got -1");
  EXPECT_EQ(l.calls.peek("u").remaining, 9);
}

TEST(SettleQuotaOverrides, SettlesUnderTheKeysOverride) {
  ManualClock clock;
  ratelimit::OverridableMemoryLimiter<ratelimit::Gcra, ManualClock> limiter(
      ratelimit::Gcra{.limit = 10, .period = 1s, .burst = 2}, {}, clock);
  ratelimit::QuotaOverrides overrides(limiter, [](std::string_view key) -> std::optional<ratelimit::Gcra> {
    if (key == "big") return ratelimit::Gcra{.limit = 10, .period = 1s, .burst = 10};
    return std::nullopt;
  });
  EXPECT_EQ(overrides.settle("big", 0, 12).reset_after, 1200ms);     // 2 owed beyond a burst of 10
  EXPECT_EQ(overrides.settle("small", 0, 3, 0).reset_after, 200ms);  // max_debt 0 under the limiter's burst 2
  LimiterLayer<decltype(overrides)> layer(overrides, "overrides");
  EXPECT_TRUE(layer.can_settle());
}

TEST(SettleHeaders, TheFieldsAfterASettleTellTheDebt) {
  ManualClock clock;
  const ratelimit::Gcra policy{.limit = 1, .period = 1s, .burst = 2};  // T = 1 s
  MemoryLimiter<ratelimit::Gcra, ManualClock> limiter(policy, {}, clock);
  const ratelimit::QuotaPolicy quota = ratelimit::http::quota_policy("tokens", policy);
  ASSERT_TRUE(limiter.allow("u"));
  const Decision owed = limiter.settle("u", 1, 7);  // backlog 7 s, tau 2 s: 5 s until the debt is paid
  const std::vector<ratelimit::http::Field> fields = ratelimit::http::rate_limit_fields(quota, owed);
  auto field = [&](std::string_view name) {
    for (const auto& [n, v] : fields) {
      if (n == name) return v;
    }
    return std::string("absent");
  };
  EXPECT_EQ(field("X-RateLimit-Remaining"), "0");
  EXPECT_EQ(field("Retry-After"), "5");
  EXPECT_EQ(field("X-RateLimit-Reset"), "7");
  EXPECT_EQ(field("RateLimit"), "\"tokens\";r=0;t=5");
  // A window policy in debt: remaining 0, reset when the debt leaves the window.
  MemoryLimiter<ratelimit::FixedWindow, ManualClock> window(ratelimit::FixedWindow{.limit = 5, .window = 10s}, {},
                                                            clock);
  clock.advance(4s);
  const Decision window_owed = window.settle("u", 0, 9);
  const auto window_fields =
      ratelimit::http::rate_limit_fields(ratelimit::http::quota_policy("w", window.policy()), window_owed);
  std::string remaining = "absent", reset = "absent";
  for (const auto& f : window_fields) {
    if (f.first == "X-RateLimit-Remaining") remaining = f.second;
    if (f.first == "X-RateLimit-Reset") reset = f.second;
  }
  EXPECT_EQ(remaining, "0");
  EXPECT_EQ(reset, "6");
}

}  // namespace settle_layers_test
}  // namespace
