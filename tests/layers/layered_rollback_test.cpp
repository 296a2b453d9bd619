// The consume-then-refund path of check_layers when a refund of the rollback throws (a backend under
// on_error = raise): every other admitted layer is still given back, and the error that stopped the
// check is the one reported.
#include <gtest/gtest.h>

#include <ratelimit/layers.hpp>
#include <ratelimit/ratelimit.hpp>

#include <functional>
#include <stdexcept>
#include <string>

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
  Decision peek(std::string_view key) { return inner_.peek(key); }
  Decision refund(std::string_view key, std::int64_t cost) {
    if (fail_refund) throw std::runtime_error(name_ + " refund failed");
    return inner_.refund(key, cost);
  }
  void reset(std::string_view key) { inner_.reset(key); }
  ratelimit::FixedWindow policy() const { return inner_.policy(); }
  ManualClock& clock() { return inner_.clock(); }

  bool fail_allow = false;
  bool fail_refund = false;

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
