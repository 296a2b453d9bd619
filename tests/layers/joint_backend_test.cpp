// check_layers with JointBackend layers (the hook Redis uses for its one-script layered check), through a
// fake backend: when the joint call is made, how its decisions become outcomes and counters, and when
// check_layers falls back to consume-then-refund.
#include <gtest/gtest.h>

#include <ratelimit/layers.hpp>
#include <ratelimit/ratelimit.hpp>

#include <stdexcept>
#include <string>
#include <vector>

using namespace std::chrono_literals;
using ratelimit::Decision;
using ratelimit::JointRequest;
using ratelimit::LimiterLayer;
using ratelimit::ManualClock;
using ratelimit::Verdict;

namespace {

enum class Joint { works, declines, throws };

/// A limiter (an in-memory one inside) that also offers joint checks in a domain chosen by the test;
/// counts joint calls and single calls.
class FakeJointLimiter final : public ratelimit::JointBackend {
 public:
  FakeJointLimiter(ratelimit::FixedWindow policy, ManualClock clock, const int* domain, Joint mode = Joint::works)
      : inner_(policy, {}, clock), domain_(domain), mode_(mode) {}
  Decision allow(std::string_view key, std::int64_t cost = 1) {
    ++single_calls;
    return inner_.allow(key, cost);
  }
  Decision peek(std::string_view key) { return inner_.peek(key); }
  Decision refund(std::string_view key, std::int64_t cost) { return inner_.refund(key, cost); }
  void reset(std::string_view key) { inner_.reset(key); }
  ratelimit::FixedWindow policy() const { return inner_.policy(); }
  ManualClock& clock() { return inner_.clock(); }

  const void* joint_domain() const noexcept override { return domain_; }
  // The reference: consume each, and on a denial give every consumption back (reporting the state).
  bool check_jointly(std::span<const JointRequest> requests, std::span<ratelimit::CheckResult> results) override {
    ++joint_calls;
    if (mode_ == Joint::declines) return false;
    if (mode_ == Joint::throws) throw std::runtime_error("backend down");
    bool all = true;
    for (std::size_t i = 0; i < requests.size(); ++i) {
      results[i].decision = static_cast<FakeJointLimiter*>(requests[i].backend)->inner_.allow(requests[i].key, requests[i].cost);
      all = all && results[i].decision.allowed;
    }
    if (!all) {
      for (std::size_t i = 0; i < requests.size(); ++i) {
        if (!results[i].decision.allowed) continue;
        results[i].decision = static_cast<FakeJointLimiter*>(requests[i].backend)->inner_.refund(requests[i].key, requests[i].cost);
      }
    }
    return true;
  }

  int joint_calls = 0;
  int single_calls = 0;

 private:
  ratelimit::MemoryLimiter<ratelimit::FixedWindow, ManualClock> inner_;
  const int* domain_;
  Joint mode_;
};

}  // namespace

TEST(JointBackendLayers, OneJointCallAllOrNothingWithOutcomesAndCounters) {
  ManualClock clock;
  const int domain = 0;
  FakeJointLimiter a(ratelimit::FixedWindow{3, 1min}, clock, &domain);
  FakeJointLimiter b(ratelimit::FixedWindow{1, 1min}, clock, &domain);
  LimiterLayer<FakeJointLimiter> la(a, "a");
  LimiterLayer<FakeJointLimiter> lb(b, "b");
  EXPECT_EQ(la.joint()->joint_domain(), &domain);
  EXPECT_EQ(la.joint(), &a);
  const auto first = ratelimit::check_layers({{&la, "k"}, {&lb, "k"}});
  ASSERT_TRUE(first);
  EXPECT_EQ(first.layers[0].verdict, Verdict::admitted);
  EXPECT_EQ(first.layers[1].verdict, Verdict::admitted);
  EXPECT_EQ(first.layers[0].decision, (Decision{.allowed = true, .limit = 3, .remaining = 2, .reset_after = 1min}));
  // b is full now: the second request is denied by b, and a's decision is its state with nothing kept.
  const auto second = ratelimit::check_layers({{&la, "k"}, {&lb, "k"}});
  ASSERT_FALSE(second);
  EXPECT_EQ(second.layers[0].verdict, Verdict::rolled_back);
  EXPECT_EQ(second.layers[0].decision, (Decision{.allowed = true, .limit = 3, .remaining = 2, .reset_after = 1min}));
  EXPECT_EQ(second.layers[1].verdict, Verdict::limited);
  EXPECT_EQ(second.reported_by, 1u);
  EXPECT_EQ(a.joint_calls + b.joint_calls, 2);
  EXPECT_EQ(a.single_calls + b.single_calls, 0);
  EXPECT_EQ(la.stats().snapshot().allowed, 1u);
  EXPECT_EQ(la.stats().snapshot().rolled_back, 1u);
  EXPECT_EQ(lb.stats().snapshot().denied, 1u);
  EXPECT_EQ(a.peek("k").remaining, 2);
}

TEST(JointBackendLayers, FallsBackForOtherDomainsADeclineOrOneActiveLayer) {
  ManualClock clock;
  const int d1 = 0, d2 = 0;
  FakeJointLimiter a(ratelimit::FixedWindow{3, 1min}, clock, &d1);
  FakeJointLimiter b(ratelimit::FixedWindow{3, 1min}, clock, &d2);
  FakeJointLimiter declining(ratelimit::FixedWindow{3, 1min}, clock, &d1, Joint::declines);
  FakeJointLimiter no_domain(ratelimit::FixedWindow{3, 1min}, clock, nullptr);
  LimiterLayer<FakeJointLimiter> la(a, "a"), lb(b, "b"), ld(declining, "d"), ln(no_domain, "n");
  EXPECT_TRUE(ratelimit::check_layers({{&la, "k"}, {&lb, "k"}}));  // two domains
  EXPECT_EQ(a.joint_calls + b.joint_calls, 0);
  EXPECT_EQ(a.single_calls + b.single_calls, 2);
  EXPECT_TRUE(ratelimit::check_layers({{&ld, "k"}, {&la, "k"}}));  // asked, declined, then one by one
  EXPECT_EQ(declining.joint_calls, 1);
  EXPECT_EQ(declining.single_calls + a.single_calls, 3);
  EXPECT_TRUE(ratelimit::check_layers({{&la, "k"}, {&ln, "k"}}));  // a null domain never joins
  EXPECT_EQ(a.joint_calls, 0);
  la.lists().allow("vip");
  EXPECT_TRUE(ratelimit::check_layers({{&la, "vip"}, {&lb, "vip"}}));  // one active layer: a plain check
  EXPECT_EQ(b.joint_calls, 0);
  EXPECT_EQ(b.single_calls, 2);
}

TEST(JointBackendLayers, BackendExceptionIsCountedOnEveryLayerAndPropagates) {
  ManualClock clock;
  const int domain = 0;
  FakeJointLimiter a(ratelimit::FixedWindow{3, 1min}, clock, &domain, Joint::throws);
  FakeJointLimiter b(ratelimit::FixedWindow{3, 1min}, clock, &domain);
  LimiterLayer<FakeJointLimiter> la(a, "a"), lb(b, "b");
  EXPECT_THROW((void)ratelimit::check_layers({{&la, "k"}, {&lb, "k"}}), std::runtime_error);
  EXPECT_EQ(la.stats().snapshot().backend_errors, 1u);
  EXPECT_EQ(lb.stats().snapshot().backend_errors, 1u);
  EXPECT_EQ(a.single_calls + b.single_calls, 0);
}
