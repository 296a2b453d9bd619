// Layered, all-or-nothing checks: hand-worked outcomes, penalties, lists, counters, the
// consume-then-refund path, and a race of many threads through three layers.
#include <gtest/gtest.h>

#include <ratelimit/http/headers.hpp>  // the header fields of layered decisions
#include <ratelimit/layers.hpp>
#include <ratelimit/ratelimit.hpp>

#include "count_new.hpp"

#include <array>
#include <atomic>
#include <cstdint>
#include <limits>
#include <new>
#include <random>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

using namespace std::chrono_literals;
using ratelimit::Decision;
using ratelimit::LayerRequest;
using ratelimit::LimiterLayer;
using ratelimit::ManualClock;
using ratelimit::MemoryLimiter;
using ratelimit::Verdict;

namespace {

/// A limiter that is no `JointBackend` (like a Redis backend across slots): it forces `check_layers`
/// onto the consume-then-refund path.
template <class P>
class UnlockableLimiter {
 public:
  UnlockableLimiter(P policy, ManualClock clock) : inner_(policy, {}, clock) {}
  Decision allow(std::string_view key, std::int64_t cost = 1) { return inner_.allow(key, cost); }
  Decision peek(std::string_view key) { return inner_.peek(key); }
  Decision refund(std::string_view key, std::int64_t cost) { return inner_.refund(key, cost); }
  void reset(std::string_view key) { inner_.reset(key); }
  P policy() const { return inner_.policy(); }
  ManualClock& clock() { return inner_.clock(); }

 private:
  MemoryLimiter<P, ManualClock> inner_;
};

struct ThreeLayers {
  ManualClock clock;
  MemoryLimiter<ratelimit::FixedWindow, ManualClock> ip{ratelimit::FixedWindow{10, 60s}, {}, clock};
  MemoryLimiter<ratelimit::Gcra, ManualClock> key{ratelimit::Gcra{.limit = 60, .period = 1min, .burst = 5}, {}, clock};
  MemoryLimiter<ratelimit::SlidingWindowLog, ManualClock> endpoint{ratelimit::SlidingWindowLog{2, 60s}, {}, clock};
  LimiterLayer<decltype(ip)> ip_layer{ip, "ip"};
  LimiterLayer<decltype(key)> key_layer{key, "apikey"};
  LimiterLayer<decltype(endpoint)> endpoint_layer{endpoint, "endpoint"};

  ratelimit::LayeredDecision check() {
    return ratelimit::check_layers({{&ip_layer, "1.2.3.4"}, {&key_layer, "k"}, {&endpoint_layer, "1.2.3.4:/search"}});
  }
};

}  // namespace

// A layered check of keys that are present allocates only its answer's vector of outcomes: its own
// arrays (the joint requests, handles, locks, consumptions, reported decisions) live on the stack, on the
// joint path, on its rollback and on the consume-then-refund path (include/ratelimit/layers/README.md "Layered limits,
// all or nothing").
TEST(LayeredAllocations, PresentKeysAllocateOnlyTheAnswer) {
  if (!test_support::can_count_new) GTEST_SKIP() << "operator new cannot be replaced under ThreadSanitizer";
  ManualClock clock;
  MemoryLimiter<ratelimit::Gcra, ManualClock> gcra{
      ratelimit::Gcra{.limit = 100, .period = 1s, .burst = 100}, {}, clock};
  MemoryLimiter<ratelimit::FixedWindow, ManualClock> window{ratelimit::FixedWindow{2, 60s}, {}, clock};
  MemoryLimiter<ratelimit::SlidingWindowCounter, ManualClock> counter{
      ratelimit::SlidingWindowCounter{100, 60s}, {}, clock};
  UnlockableLimiter<ratelimit::Gcra> unlockable(ratelimit::Gcra{.limit = 100, .period = 1s, .burst = 100}, clock);
  LimiterLayer<decltype(gcra)> a{gcra, "a"};
  LimiterLayer<decltype(window)> b{window, "b"};
  LimiterLayer<decltype(counter)> c{counter, "c"};
  LimiterLayer<decltype(unlockable)> d{unlockable, "d"};
  const std::array<LayerRequest, 3> joint{{{&a, "user-1"}, {&b, "user-1"}, {&c, "user-1"}}};
  const std::array<LayerRequest, 3> refunding{{{&a, "user-2"}, {&d, "user-2"}, {&b, "user-2"}}};
  ASSERT_TRUE(ratelimit::check_layers(joint));  // the keys are present from here on
  ASSERT_TRUE(ratelimit::check_layers(refunding));
  for (const auto* requests : {&joint, &refunding}) {
    for (const bool admitted : {true, false}) {  // the window's limit 2: the second round is denied
      std::size_t calls = 0;
      ratelimit::LayeredDecision decision;
      {
        const test_support::CountNew count;
        decision = ratelimit::check_layers(*requests);
        calls = count.calls();
      }
      EXPECT_EQ(decision.decision.allowed, admitted);
      EXPECT_EQ(calls, 1u) << (requests == &joint ? "joint" : "consume-then-refund") << ", admitted " << admitted;
    }
  }
}

// The counter behind the allocation tests sees over-aligned allocations too (operator new with align_val_t):
// otherwise an allocation of an alignas(64) type on a checked path would pass unseen.
namespace {
struct alignas(128) AlignedLine {
  char bytes[128];
};
AlignedLine* volatile aligned_sink = nullptr;  // keeps the compiler from eliding the allocation
}  // namespace

TEST(LayeredAllocations, OverAlignedAllocationsAreCounted) {
  if (!test_support::can_count_new) GTEST_SKIP() << "operator new cannot be replaced under ThreadSanitizer";
  std::size_t calls = 0;
  std::size_t bytes = 0;
  {
    const test_support::CountNew count;
    aligned_sink = new AlignedLine{};
    calls = count.calls();
    bytes = count.bytes();
  }
  EXPECT_EQ(reinterpret_cast<std::uintptr_t>(aligned_sink) % alignof(AlignedLine), 0u);
  delete aligned_sink;
  EXPECT_EQ(calls, 1u);
  EXPECT_EQ(bytes, sizeof(AlignedLine));
}

// Every replaceable form is counted and paired: arrays (the store's slot arrays and shards; under ASan they went
// to its own operators, uncounted), nothrow forms (released by plain delete), and an over-aligned size too large
// to round up is refused rather than wrapped to a tiny block.
TEST(LayeredAllocations, ArrayAndNothrowFormsAreCountedAndHugeSizesRefused) {
  if (!test_support::can_count_new) GTEST_SKIP() << "operator new cannot be replaced under ThreadSanitizer";
  std::size_t calls = 0;
  std::size_t bytes = 0;
  {
    const test_support::CountNew count;
    // Through volatile pointers: a new-expression whose pointer does not escape may be elided.
    AlignedLine* volatile lines = new AlignedLine[3];
    char* volatile chars = new char[10];
    AlignedLine* volatile nothrow_line = new (std::nothrow) AlignedLine;
    calls = count.calls();
    bytes = count.bytes();
    delete nothrow_line;
    delete[] chars;
    delete[] lines;
  }
  // A size the compiler cannot see (it would warn of an object past its maximum size), outside the count.
  const volatile std::size_t huge_size = std::numeric_limits<std::size_t>::max() - 10;
  EXPECT_EQ(::operator new (huge_size, std::align_val_t{64}, std::nothrow), nullptr);
  EXPECT_EQ(calls, 3u);
  EXPECT_GE(bytes, 3 * sizeof(AlignedLine) + 10 + sizeof(AlignedLine));
}

TEST(Layered, DenialByOneLayerLeavesNoConsumptionInTheOthers) {
  ThreeLayers s;
  EXPECT_TRUE(s.check());
  EXPECT_TRUE(s.check());
  const auto d = s.check();  // the endpoint layer (2 per minute) denies
  ASSERT_FALSE(d);
  ASSERT_EQ(d.layers.size(), 3u);
  EXPECT_EQ(d.layers[0].verdict, Verdict::rolled_back);
  EXPECT_EQ(d.layers[1].verdict, Verdict::rolled_back);
  EXPECT_EQ(d.layers[2].verdict, Verdict::limited);
  // Rolled-back layers report the state after the give-back: 10 - 2 and 5 - 2.
  EXPECT_EQ(d.layers[0].decision, (Decision{.allowed = true, .limit = 10, .remaining = 8, .reset_after = 60s}));
  EXPECT_EQ(d.layers[1].decision, (Decision{.allowed = true, .limit = 5, .remaining = 3, .reset_after = 2s}));
  EXPECT_EQ(s.ip.peek("1.2.3.4").remaining, 8);
  EXPECT_EQ(s.key.peek("k").remaining, 3);
  EXPECT_EQ(s.endpoint.peek("1.2.3.4:/search").remaining, 0);
  // The reported decision is the endpoint's: retry when the oldest entry (t = 0) leaves, 60 s.
  EXPECT_EQ(d.reported_by, 2u);
  EXPECT_EQ(d.decision.retry_after, 60s);
  EXPECT_EQ(d.violated_policies(), std::vector<std::string>{"endpoint"});
  EXPECT_EQ(d.policy_decisions().size(), 3u);
  EXPECT_EQ(s.ip_layer.stats().snapshot(), (ratelimit::LayerCounters{.allowed = 2, .rolled_back = 1}));
  EXPECT_EQ(s.endpoint_layer.stats().snapshot(), (ratelimit::LayerCounters{.allowed = 2, .denied = 1}));
}

TEST(Layered, AllowedReportsTheMostRestrictiveLayer) {
  ThreeLayers s;
  const auto d = s.check();
  ASSERT_TRUE(d);
  // remaining: ip 9, apikey 4, endpoint 1 -> the endpoint binds.
  EXPECT_EQ(d.reported_by, 2u);
  EXPECT_EQ(d.decision, (Decision{.allowed = true, .limit = 2, .remaining = 1, .reset_after = 60s}));
  EXPECT_TRUE(d.violated_policies().empty());
}

TEST(Layered, SameLayerAndKeyTwiceConsumesBothOrNeither) {
  ManualClock clock;
  MemoryLimiter<ratelimit::FixedWindow, ManualClock> l(ratelimit::FixedWindow{3, 60s}, {}, clock);
  LimiterLayer<decltype(l)> layer(l, "l");
  EXPECT_FALSE(ratelimit::check_layers({{&layer, "k", 2}, {&layer, "k", 2}}));
  EXPECT_EQ(l.peek("k").remaining, 3);
  EXPECT_EQ(l.size(), 0u);  // the rolled-back key is reclaimed: it is full again
  EXPECT_TRUE(ratelimit::check_layers({{&layer, "k", 1}, {&layer, "k", 2}}));
  EXPECT_EQ(l.peek("k").remaining, 0);
}

TEST(Layered, PenaltyDeniesFromMemoryAndChecksNoOtherLayer) {
  ManualClock clock;
  MemoryLimiter<ratelimit::FixedWindow, ManualClock> a(ratelimit::FixedWindow{1, 10s}, {}, clock);
  MemoryLimiter<ratelimit::FixedWindow, ManualClock> b(ratelimit::FixedWindow{100, 10s}, {}, clock);
  LimiterLayer<decltype(a)> strict(a, "strict", {.penalty = 30s});
  LimiterLayer<decltype(b)> loose(b, "loose");
  auto check = [&] { return ratelimit::check_layers({{&loose, "ip"}, {&strict, "ip"}}); };
  EXPECT_TRUE(check());
  const auto over = check();
  ASSERT_FALSE(over);
  EXPECT_EQ(over.layers[1].verdict, Verdict::limited);
  EXPECT_EQ(over.decision.retry_after, 30s);  // the penalty this denial starts
  clock.advance(15s);                         // the window has refilled, the penalty (until 30 s) has not run out
  const auto blocked = check();
  ASSERT_FALSE(blocked);
  EXPECT_EQ(blocked.layers[0].verdict, Verdict::unchecked);
  EXPECT_EQ(blocked.layers[1].verdict, Verdict::penalized);
  EXPECT_EQ(blocked.decision,
            (Decision{.allowed = false, .limit = 1, .remaining = 0, .retry_after = 15s, .reset_after = 15s}));
  EXPECT_EQ(blocked.policy_decisions().size(), 1u);
  EXPECT_EQ(b.peek("ip").remaining, 100);  // window 1: nothing consumed by the penalized request
  clock.advance(15s);
  EXPECT_TRUE(check());
  EXPECT_EQ(strict.stats().snapshot().denied, 2u);
}

TEST(Layered, TheDenialThatStartsAPenaltyCarriesThePenaltysWait) {
  // A client that waited the first 429's Retry-After (the window's 10 s) was denied again for the rest of
  // the 30 s penalty: the first denial must already say 30 s.
  ManualClock clock;
  MemoryLimiter<ratelimit::FixedWindow, ManualClock> a(ratelimit::FixedWindow{1, 10s}, {}, clock);
  MemoryLimiter<ratelimit::FixedWindow, ManualClock> b(ratelimit::FixedWindow{100, 10s}, {}, clock);
  LimiterLayer<decltype(a)> strict(a, "strict", {.penalty = 30s});
  LimiterLayer<decltype(b)> loose(b, "loose");
  EXPECT_TRUE(ratelimit::check_layers({{&loose, "ip"}, {&strict, "ip"}}));
  clock.advance(2s);
  const auto first = ratelimit::check_layers({{&loose, "ip"}, {&strict, "ip"}});
  ASSERT_FALSE(first);
  EXPECT_EQ(first.layers[1].verdict, Verdict::limited);
  EXPECT_EQ(first.layers[1].decision.retry_after, 30s);
  EXPECT_EQ(first.layers[1].decision.reset_after, 30s);
  EXPECT_EQ(first.decision,
            (Decision{.allowed = false, .limit = 1, .remaining = 0, .retry_after = 30s, .reset_after = 30s}));
  EXPECT_EQ(first.reported_by, 1u);
  const auto fields = ratelimit::http::rate_limit_fields(first.policy_decisions());
  bool retry_after_30 = false;
  for (const auto& [name, value] : fields) retry_after_30 = retry_after_30 || (name == "Retry-After" && value == "30");
  EXPECT_TRUE(retry_after_30);
  clock.advance(30s - 1ns);  // obeying the header a moment too early is still denied ...
  EXPECT_FALSE(ratelimit::check_layers({{&loose, "ip"}, {&strict, "ip"}}));
  clock.advance(1ns);  // ... and obeying it is admitted
  EXPECT_TRUE(ratelimit::check_layers({{&loose, "ip"}, {&strict, "ip"}}));
}

TEST(Layered, APenaltyShorterThanTheWaitLeavesTheWait) {
  ManualClock clock;
  MemoryLimiter<ratelimit::FixedWindow, ManualClock> a(ratelimit::FixedWindow{1, 60s}, {}, clock);
  std::chrono::nanoseconds reported{0};
  LimiterLayer<decltype(a)> layer(a, "a", {.penalty = 5s, .on_limited = [&](const ratelimit::LimitedEvent& e) {
                                             reported = e.decision.retry_after;
                                           }});
  EXPECT_TRUE(ratelimit::check_layers({{&layer, "k"}}));
  const auto denied = ratelimit::check_layers({{&layer, "k"}});
  EXPECT_EQ(denied.decision.retry_after, 60s);
  EXPECT_EQ(denied.decision.reset_after, 60s);
  EXPECT_EQ(reported, 60s);
}

TEST(Layered, NoPenaltyForARequestThatCanNeverPass) {
  ManualClock clock;
  MemoryLimiter<ratelimit::FixedWindow, ManualClock> a(ratelimit::FixedWindow{2, 10s}, {}, clock);
  LimiterLayer<decltype(a)> layer(a, "a", {.penalty = 30s});
  const auto huge = ratelimit::check_layers({{&layer, "k", 3}});
  EXPECT_EQ(huge.decision.retry_after, Decision::never);
  EXPECT_TRUE(ratelimit::check_layers({{&layer, "k", 1}}));
}

TEST(Layered, PenaltyAcceptsTheKeysItsLimiterAccepts) {
  // The penalty box had its own 512-byte bound, so a layer with a penalty threw for keys its limiter took.
  ManualClock clock;
  MemoryLimiter<ratelimit::FixedWindow, ManualClock> limiter(ratelimit::FixedWindow{1, 1min}, {.max_key_bytes = 4096},
                                                             clock);
  LimiterLayer<decltype(limiter)> layer(limiter, "login", {.penalty = 15min});
  const std::string key(1000, 'k');
  EXPECT_TRUE(ratelimit::check_layers({{&layer, key}}));
  const auto denied = ratelimit::check_layers({{&layer, key}});
  EXPECT_FALSE(denied);
  EXPECT_GT(layer.penalties().blocked_for(key, layer.now_ns()), 0);
  EXPECT_THROW((void)ratelimit::check_layers({{&layer, std::string(4097, 'k')}}), std::invalid_argument);
}

TEST(Layered, DenyAndAllowLists) {
  ThreeLayers s;
  s.ip_layer.lists().deny("6.6.6.6");
  s.endpoint_layer.lists().allow("1.2.3.4:/search");
  const auto denied = ratelimit::check_layers({{&s.ip_layer, "6.6.6.6"}, {&s.key_layer, "k"}});
  ASSERT_FALSE(denied);
  EXPECT_EQ(denied.layers[0].verdict, Verdict::deny_listed);
  EXPECT_EQ(denied.layers[1].verdict, Verdict::unchecked);
  EXPECT_EQ(denied.decision.retry_after, Decision::never);
  EXPECT_EQ(s.key.peek("k").remaining, 5);
  for (int i = 0; i < 3; ++i) {
    const auto d = s.check();  // the endpoint layer is skipped: only ip and apikey count
    ASSERT_TRUE(d);
    EXPECT_EQ(d.layers[2].verdict, Verdict::allow_listed);
    EXPECT_EQ(d.policy_decisions().size(), 2u);
  }
  EXPECT_EQ(s.endpoint.size(), 0u);
  s.endpoint_layer.lists().remove("1.2.3.4:/search");
  EXPECT_TRUE(s.check());
  EXPECT_TRUE(s.check());  // apikey burst 5 now used up, endpoint 2 as well
  const auto d = s.check();
  EXPECT_FALSE(d);
  EXPECT_EQ(d.violated_policies(), (std::vector<std::string>{"apikey", "endpoint"}));
}

TEST(Layered, OnLimitedRunsForEachDenyingLayer) {
  ThreeLayers s;
  std::vector<std::string> events;
  ManualClock clock;
  MemoryLimiter<ratelimit::FixedWindow, ManualClock> l(ratelimit::FixedWindow{1, 60s}, {}, clock);
  LimiterLayer<decltype(l)> layer(l, "one", {.on_limited = [&](const ratelimit::LimitedEvent& e) {
                                    events.push_back(std::string(e.layer) + "/" + std::string(e.key) + "/" +
                                                     std::to_string(e.decision.retry_after.count()));
                                  }});
  EXPECT_TRUE(ratelimit::check_layers({{&layer, "x"}}));
  EXPECT_FALSE(ratelimit::check_layers({{&layer, "x"}}));
  EXPECT_EQ(events, std::vector<std::string>{"one/x/60000000000"});
}

TEST(Layered, ConsumeThenRefundPathGivesTheSameEndState) {
  ManualClock clock;
  UnlockableLimiter<ratelimit::FixedWindow> ip(ratelimit::FixedWindow{10, 60s}, clock);
  UnlockableLimiter<ratelimit::SlidingWindowLog> ep(ratelimit::SlidingWindowLog{2, 60s}, clock);
  MemoryLimiter<ratelimit::Gcra, ManualClock> key(ratelimit::Gcra{.limit = 60, .period = 1min, .burst = 5}, {}, clock);
  LimiterLayer<decltype(ip)> ip_layer(ip, "ip");
  LimiterLayer<decltype(key)> key_layer(key, "apikey");
  LimiterLayer<decltype(ep)> ep_layer(ep, "endpoint");
  EXPECT_EQ(ip_layer.joint(), nullptr);
  auto check = [&] { return ratelimit::check_layers({{&ip_layer, "ip"}, {&key_layer, "k"}, {&ep_layer, "ip:/x"}}); };
  EXPECT_TRUE(check());
  EXPECT_TRUE(check());
  const auto d = check();
  ASSERT_FALSE(d);
  EXPECT_EQ(d.layers[0].verdict, Verdict::rolled_back);
  EXPECT_EQ(d.layers[1].verdict, Verdict::rolled_back);
  EXPECT_EQ(d.layers[2].verdict, Verdict::limited);
  EXPECT_EQ(d.layers[0].decision.remaining, 8);
  EXPECT_EQ(ip.peek("ip").remaining, 8);
  EXPECT_EQ(key.peek("k").remaining, 3);
  // The sequential path stops at the first denial: a later layer is not checked.
  const auto first_denies = ratelimit::check_layers({{&ep_layer, "ip:/x"}, {&ip_layer, "ip"}});
  EXPECT_EQ(first_denies.layers[1].verdict, Verdict::unchecked);
  EXPECT_EQ(ip.peek("ip").remaining, 8);
}

TEST(Layered, BadInputThrowsAndConsumesNothing) {
  ThreeLayers s;
  try {
    (void)ratelimit::check_layers({{&s.ip_layer, "a"}, {&s.key_layer, "k", -1}});
    FAIL();
  } catch (const std::invalid_argument& e) {
    EXPECT_EQ(std::string(e.what()).rfind("cost:", 0), 0u) << e.what();
  }
  try {
    (void)ratelimit::check_layers({{&s.ip_layer, "a"}, {nullptr, "k"}});
    FAIL();
  } catch (const std::invalid_argument& e) {
    EXPECT_EQ(std::string(e.what()).rfind("layer:", 0), 0u) << e.what();
  }
  EXPECT_THROW((void)ratelimit::check_layers({{&s.ip_layer, "a"}, {&s.key_layer, std::string(600, 'x')}}),
               std::invalid_argument);
  EXPECT_EQ(s.ip.size(), 0u);
  EXPECT_THROW(LimiterLayer<decltype(s.ip)>(s.ip, "x", {.penalty = -1s}), std::invalid_argument);
}

TEST(Layered, RefundLayersGivesBackAndCounts) {
  ThreeLayers s;
  const std::array<LayerRequest, 2> req{{{&s.ip_layer, "1.2.3.4", 3}, {&s.key_layer, "k", 3}}};
  ASSERT_TRUE(ratelimit::check_layers(req));
  EXPECT_EQ(s.ip.peek("1.2.3.4").remaining, 7);
  ratelimit::refund_layers(req);
  EXPECT_EQ(s.ip.peek("1.2.3.4").remaining, 10);
  EXPECT_EQ(s.key.peek("k").remaining, 5);
  EXPECT_EQ(s.ip_layer.stats().snapshot().refunded, 1u);
  // Written in place, like check_layers.
  ASSERT_TRUE(ratelimit::check_layers({{&s.ip_layer, "1.2.3.4", 2}}));
  ratelimit::refund_layers({{&s.ip_layer, "1.2.3.4", 2}});
  EXPECT_EQ(s.ip.peek("1.2.3.4").remaining, 10);
}

// Many threads through three layers of different policies, time standing still (nothing refills),
// keys drawn so that every layer denies often. At the end each key's consumption must equal the
// number of admitted requests that named it: a request denied anywhere left nothing anywhere.
TEST(Layered, ConcurrentRequestsNeverLeaveConsumptionOfADeniedRequest) {
  ManualClock clock;
  MemoryLimiter<ratelimit::Gcra, ManualClock> ip(ratelimit::Gcra{.limit = 1, .period = 1h, .burst = 300}, {.shards = 4},
                                                 clock);
  MemoryLimiter<ratelimit::SlidingWindowLog, ManualClock> key(ratelimit::SlidingWindowLog{400, 1h}, {.shards = 4},
                                                              clock);
  MemoryLimiter<ratelimit::FixedWindow, ManualClock> ep(ratelimit::FixedWindow{150, 1h}, {.shards = 4}, clock);
  LimiterLayer<decltype(ip)> ip_layer(ip, "ip");
  LimiterLayer<decltype(key)> key_layer(key, "apikey");
  LimiterLayer<decltype(ep)> ep_layer(ep, "endpoint");
  const std::array<std::string, 4> ips{"10.0.0.1", "10.0.0.2", "10.0.0.3", "10.0.0.4"};
  const std::array<std::string, 3> keys{"alpha", "beta", "gamma"};
  const std::array<std::string, 6> eps{"/a", "/b", "/c", "/d", "/e", "/f"};
  std::array<std::atomic<std::int64_t>, 4> ip_ok{};
  std::array<std::atomic<std::int64_t>, 3> key_ok{};
  std::array<std::atomic<std::int64_t>, 6> ep_ok{};
  std::atomic<std::int64_t> admitted{0}, denied{0};
  constexpr int kThreads = 8;
  constexpr int kRequests = 2000;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      std::mt19937 rng(static_cast<unsigned>(t) * 7919u + 1u);
      for (int i = 0; i < kRequests; ++i) {
        const std::size_t a = rng() % ips.size(), b = rng() % keys.size(), c = rng() % eps.size();
        const std::int64_t cost = 1 + static_cast<std::int64_t>(rng() % 2);
        const auto d = ratelimit::check_layers(
            {{&ip_layer, ips[a], cost}, {&key_layer, keys[b], cost}, {&ep_layer, eps[c], cost}});
        if (d) {
          ip_ok[a] += cost;
          key_ok[b] += cost;
          ep_ok[c] += cost;
          ++admitted;
        } else {
          ++denied;
        }
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_GT(admitted.load(), 0);
  EXPECT_GT(denied.load(), 0);
  for (std::size_t i = 0; i < ips.size(); ++i) EXPECT_EQ(300 - ip.peek(ips[i]).remaining, ip_ok[i].load()) << ips[i];
  for (std::size_t i = 0; i < keys.size(); ++i)
    EXPECT_EQ(400 - key.peek(keys[i]).remaining, key_ok[i].load()) << keys[i];
  for (std::size_t i = 0; i < eps.size(); ++i) EXPECT_EQ(150 - ep.peek(eps[i]).remaining, ep_ok[i].load()) << eps[i];
  EXPECT_EQ(static_cast<std::int64_t>(ip_layer.stats().snapshot().allowed), admitted.load());
  EXPECT_EQ(static_cast<std::int64_t>(ep_layer.stats().snapshot().allowed), admitted.load());
  const auto c = ip_layer.stats().snapshot();
  EXPECT_EQ(static_cast<std::int64_t>(c.allowed + c.denied + c.rolled_back), admitted.load() + denied.load());
}

// A denied request changes nothing, also at `max_keys`: its new key must not evict a key (another key of
// the same request, or a bystander) whose usage the rollback could not bring back.
TEST(Layered, DeniedRequestAtMaxKeysEvictsNoKey) {
  ManualClock clock;
  MemoryLimiter<ratelimit::FixedWindow, ManualClock> per_key{ratelimit::FixedWindow{5, 1h}, {.max_keys = 2}, clock};
  MemoryLimiter<ratelimit::FixedWindow, ManualClock> global{ratelimit::FixedWindow{1, 1h}, {}, clock};
  LimiterLayer<decltype(per_key)> key_layer{per_key, "key"};
  LimiterLayer<decltype(global)> global_layer{global, "global"};
  ASSERT_TRUE(per_key.allow("bystander", 2));
  ASSERT_TRUE(per_key.allow("x", 1));
  ASSERT_TRUE(global.allow("all"));  // the global layer now denies
  const ratelimit::LayeredDecision d =
      ratelimit::check_layers({{&key_layer, "x"}, {&key_layer, "new"}, {&global_layer, "all"}});
  EXPECT_FALSE(d.decision.allowed);
  EXPECT_EQ(d.layers[2].verdict, Verdict::limited);
  EXPECT_EQ(d.layers[0].verdict, Verdict::rolled_back);
  EXPECT_EQ(d.layers[0].decision.remaining, 4);
  EXPECT_EQ(d.layers[1].verdict, Verdict::rolled_back);
  EXPECT_EQ(d.layers[1].decision.remaining, 5);
  EXPECT_EQ(per_key.peek("x").remaining, 4) << "x lost its usage";
  EXPECT_EQ(per_key.peek("bystander").remaining, 3) << "the bystander lost its usage";
  EXPECT_EQ(per_key.evictions(), 0u);
  EXPECT_EQ(per_key.size(), 2u);
}

// Two layers over one limiter and one key are one state: the request consumes both costs or neither.
TEST(Layered, TwoLayersOverOneLimiterAndKeyAreOneState) {
  ManualClock clock;
  MemoryLimiter<ratelimit::FixedWindow, ManualClock> shared{ratelimit::FixedWindow{3, 1h}, {}, clock};
  LimiterLayer<decltype(shared)> a{shared, "a"}, b{shared, "b"};
  EXPECT_TRUE(ratelimit::check_layers({{&a, "k", 2}, {&b, "k", 1}}).decision.allowed);
  const ratelimit::LayeredDecision d = ratelimit::check_layers({{&a, "k", 0}, {&b, "k", 1}});
  EXPECT_FALSE(d.decision.allowed);
  EXPECT_EQ(shared.peek("k").remaining, 0);
}

// A layer advertises its limiter's quota after set_policy (include/ratelimit/README.md "Changing a policy at run
// time"), in its decisions' limit and in the header fields; a policy decision taken before the change keeps the old
// quota (its reference stays valid), and going back to a former policy reuses that quota.
TEST(SetPolicyLayer, AdvertisesTheNewQuota) {
  ManualClock clock;
  MemoryLimiter<ratelimit::FixedWindow, ManualClock> limiter(ratelimit::FixedWindow{10, 60s}, {}, clock);
  LimiterLayer layer(limiter, "minute");
  const LayerRequest requests[] = {{&layer, "k"}};
  const auto before = ratelimit::check_layers(requests);
  const auto before_entries = before.policy_decisions();
  ASSERT_EQ(before_entries.size(), 1u);
  EXPECT_EQ(before_entries[0].policy->quota, 10);

  limiter.set_policy(ratelimit::FixedWindow{100, 120s});
  EXPECT_EQ(layer.quota().quota, 100);
  EXPECT_EQ(layer.quota().window, 120s);
  EXPECT_EQ(layer.name(), "minute");
  const auto after = ratelimit::check_layers(requests);
  std::string policy_field;
  for (const auto& [name, value] : ratelimit::http::rate_limit_fields(after.policy_decisions())) {
    if (name == "RateLimit-Policy") policy_field = value;
  }
  EXPECT_EQ(policy_field, "\"minute\";q=100;w=120");
  EXPECT_EQ(after.decision.limit, 100);
  EXPECT_EQ(after.decision.remaining, 98);
  EXPECT_EQ(before_entries[0].policy->quota, 10);  // still valid, still the quota it was decided under

  const ratelimit::QuotaPolicy* hundred = &layer.quota();
  limiter.set_policy(ratelimit::FixedWindow{10, 60s});
  EXPECT_EQ(&layer.quota(), before_entries[0].policy);  // a former quota is reused, not kept twice
  limiter.set_policy(ratelimit::FixedWindow{100, 120s});
  EXPECT_EQ(&layer.quota(), hundred);
}

// Checks and header entries racing with policy changes (4 threads): every quota a layer advertises is
// one of the two, and stays readable (TSan: no race between refreshing and reading).
TEST(SetPolicyLayer, QuotaRefreshRacesWithReaders) {
  ManualClock clock;
  MemoryLimiter<ratelimit::FixedWindow, ManualClock> limiter(ratelimit::FixedWindow{10, 60s}, {}, clock);
  LimiterLayer layer(limiter, "minute");
  std::atomic<bool> done{false};
  std::atomic<int> wrong{0};
  std::vector<std::thread> readers;
  for (int t = 0; t < 3; ++t) {
    readers.emplace_back([&] {
      const LayerRequest requests[] = {{&layer, "k"}};
      while (!done) {
        const auto entries = ratelimit::check_layers(requests).policy_decisions();
        const std::int64_t q = entries.empty() ? 10 : entries[0].policy->quota;
        if ((q != 10 && q != 20) || layer.name() != "minute") ++wrong;
      }
    });
  }
  for (int i = 0; i < 200; ++i) limiter.set_policy(ratelimit::FixedWindow{i % 2 == 0 ? 20 : 10, 60s});
  done = true;
  for (auto& t : readers) t.join();
  EXPECT_EQ(wrong.load(), 0);
  EXPECT_EQ(layer.quota().quota, 10);
}
