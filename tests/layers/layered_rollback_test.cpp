// The consume-then-refund path of check_layers when a refund of the rollback throws (a backend under
// on_error = raise): every other admitted layer is still given back, and the error that stopped the
// check is the one reported.
#include <gtest/gtest.h>

#include <ratelimit/layers.hpp>
#include <ratelimit/ratelimit.hpp>

#include <functional>
#include <stdexcept>
#include <string>
#include <vector>

using namespace std::chrono_literals;
using ratelimit::Decision;
using ratelimit::LimiterLayer;
using ratelimit::ManualClock;

namespace {

/// An in-memory limiter behind a backend that can fail: `allow` or `refund` throws when told to. No
/// `JointBackend`, so check_layers consumes layer by layer and refunds on a denial.
class FlakyLimiter {
 public:
  FlakyLimiter(ratelimit::FixedWindow policy, ManualClock clock, std::string name)
      : inner_(policy, {}, clock), name_(std::move(name)) {}
  Decision allow(std::string_view key, std::int64_t cost = 1) {
    if (fail_allow) throw std::runtime_error(name_ + " allow failed");
    return inner_.allow(key, cost);
  }
  /// As `allow`; with `fail_open`, the backend "fails" and its failure policy admits, consuming nothing.
  ratelimit::CheckResult check(std::string_view key, std::int64_t cost = 1) {
    if (fail_open) {
      const auto limit = inner_.policy().limit;
      return {Decision{.allowed = true, .limit = limit, .remaining = limit - cost}, ratelimit::Outcome::failure_policy};
    }
    return {allow(key, cost), ratelimit::Outcome::decided};
  }
  Decision peek(std::string_view key) { return inner_.peek(key); }
  Decision refund(std::string_view key, std::int64_t cost) {
    ++refunds;
    if (fail_refund) throw std::runtime_error(name_ + " refund failed");
    return inner_.refund(key, cost);
  }
  void reset(std::string_view key) { inner_.reset(key); }
  ratelimit::FixedWindow policy() const { return inner_.policy(); }
  ManualClock& clock() { return inner_.clock(); }

  bool fail_allow = false;
  bool fail_refund = false;
  bool fail_open = false;
  int refunds = 0;

 private:
  ratelimit::MemoryLimiter<ratelimit::FixedWindow, ManualClock> inner_;
  std::string name_;
};

std::string what_of(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const std::exception& e) {
    return e.what();
  }
  return "(nothing thrown)";
}

}  // namespace

// first and second admit, third throws; the rollback refunds second (throws) then first: first must be
// given back, and the caller sees the third layer's error, not the refund's.
TEST(LayeredRollback, ThrowingRefundDoesNotStopTheRollbackNorHideTheError) {
  ManualClock clock;
  FlakyLimiter first(ratelimit::FixedWindow{5, 1min}, clock, "first");
  FlakyLimiter second(ratelimit::FixedWindow{5, 1min}, clock, "second");
  FlakyLimiter third(ratelimit::FixedWindow{5, 1min}, clock, "third");
  LimiterLayer<FlakyLimiter> l1(first, "first"), l2(second, "second"), l3(third, "third");
  ASSERT_EQ(l1.joint(), nullptr);
  second.fail_refund = true;
  third.fail_allow = true;
  EXPECT_EQ(what_of([&] { (void)ratelimit::check_layers({{&l1, "k"}, {&l2, "k"}, {&l3, "k"}}); }),
            "third allow failed");
  EXPECT_EQ(first.peek("k").remaining, 5) << "the first layer was not given back";
  EXPECT_EQ(l2.stats().snapshot().backend_errors, 1u);
  EXPECT_EQ(l3.stats().snapshot().backend_errors, 1u);
}

// The third layer denies; the rollback's refund of the second throws: the first is still given back,
// then the refund's error is reported.
TEST(LayeredRollback, ThrowingRefundAfterADenialStillGivesTheOthersBack) {
  ManualClock clock;
  FlakyLimiter first(ratelimit::FixedWindow{5, 1min}, clock, "first");
  FlakyLimiter second(ratelimit::FixedWindow{5, 1min}, clock, "second");
  FlakyLimiter third(ratelimit::FixedWindow{1, 1min}, clock, "third");
  LimiterLayer<FlakyLimiter> l1(first, "first"), l2(second, "second"), l3(third, "third");
  ASSERT_TRUE(third.allow("k").allowed);  // exhausted: the layered check is denied there
  second.fail_refund = true;
  EXPECT_EQ(what_of([&] { (void)ratelimit::check_layers({{&l1, "k"}, {&l2, "k"}, {&l3, "k"}}); }),
            "second refund failed");
  EXPECT_EQ(first.peek("k").remaining, 5) << "the first layer was not given back";
}

// A layer its failure policy admitted consumed nothing: neither the rollback after a denial nor the one
// after an error refunds it (a refund reaching the recovered backend would admit one request too many;
// include/ratelimit/layers/README.md "Layered limits, all or nothing"), and refund_layers(requests, passed) skips it
// the same way.
TEST(LayeredRollback, AFailurePolicyAdmissionIsNeverRefunded) {
  ManualClock clock;
  FlakyLimiter open(ratelimit::FixedWindow{1, 1min}, clock, "open");
  FlakyLimiter denying(ratelimit::FixedWindow{1, 1min}, clock, "denying");
  LimiterLayer<FlakyLimiter> l1(open, "open"), l2(denying, "denying");
  ASSERT_TRUE(open.allow("k"));  // exhausted where the failing backend keeps it
  ASSERT_TRUE(denying.allow("k"));
  open.fail_open = true;
  const ratelimit::LayeredDecision d = ratelimit::check_layers({{&l1, "k"}, {&l2, "k"}});
  EXPECT_FALSE(d);
  EXPECT_TRUE(d.layers[0].backend_failed);
  EXPECT_EQ(d.layers[0].verdict, ratelimit::Verdict::rolled_back);
  EXPECT_EQ(open.refunds, 0) << "the denial's rollback refunded a fail_open layer";

  denying.fail_allow = true;  // now the second layer throws after the first admitted by its failure policy
  EXPECT_EQ(what_of([&] { (void)ratelimit::check_layers({{&l1, "k"}, {&l2, "k"}}); }), "denying allow failed");
  EXPECT_EQ(open.refunds, 0) << "the error's rollback refunded a fail_open layer";

  denying.fail_allow = false;
  denying.reset("k");
  const std::vector<ratelimit::LayerRequest> request{{&l1, "k"}, {&l2, "k"}};
  const ratelimit::LayeredDecision passed = ratelimit::check_layers(request);
  ASSERT_TRUE(passed);
  ratelimit::refund_layers(request, passed);
  EXPECT_EQ(open.refunds, 0);
  EXPECT_EQ(denying.refunds, 1);
  open.fail_open = false;
  EXPECT_EQ(open.peek("k").remaining, 0);
}
