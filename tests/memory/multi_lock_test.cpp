// The joint check's lock set: every distinct lock taken once, in ascending address order, whatever the
// order and repeats of the input, for a few locks (insertion sort) and for many (qsort); all released after.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <random>
#include <vector>

#include <ratelimit/memory/joint_check.hpp>

namespace {

using ratelimit::detail::MultiLock;
using ratelimit::detail::SpinLock;

void check_set(std::size_t distinct, std::size_t requests, unsigned seed) {
  std::vector<SpinLock> locks(distinct);
  std::mt19937 random(seed);
  std::vector<SpinLock*> input(requests);
  for (std::size_t i = 0; i < requests; ++i) input[i] = &locks[i < distinct ? i : random() % distinct];
  std::shuffle(input.begin(), input.end(), random);
  {
    MultiLock hold(input);
    // The input's front now holds the distinct locks in ascending order.
    for (std::size_t i = 1; i < distinct; ++i) {
      EXPECT_TRUE(std::less<>()(input[i - 1], input[i])) << "position " << i;
    }
    for (SpinLock& l : locks) EXPECT_FALSE(l.try_lock()) << "a lock was not taken";
  }
  for (SpinLock& l : locks) {
    EXPECT_TRUE(l.try_lock()) << "a lock was not released";
    l.unlock();
  }
}

TEST(MultiLock, FewLocksWithRepeats) {
  for (unsigned seed = 0; seed < 20; ++seed) check_set(5, 12, seed);
}

TEST(MultiLock, ManyLocksWithRepeats) {
  for (unsigned seed = 0; seed < 20; ++seed) check_set(40, 100, seed);
}

TEST(MultiLock, EmptyAndOne) {
  check_set(0, 0, 1);
  check_set(1, 3, 1);
}

}  // namespace
