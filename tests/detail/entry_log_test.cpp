// The sliding window log's entry queue (detail::EntryLog): the same entries and total as a plain deque through
// any mix of operations, inline up to two entries, one power-of-two ring beyond, and exact heap bytes.
#include <gtest/gtest.h>

#include <cstddef>
#include <cstdint>
#include <deque>
#include <random>
#include <utility>

#include <ratelimit/detail/entry_log.hpp>

namespace {

using ratelimit::detail::EntryLog;
using ratelimit::detail::LogEntry;

std::int64_t sum(const std::deque<LogEntry>& model) {
  std::int64_t total = 0;
  for (const LogEntry& e : model) total += e.cost;
  return total;
}

void expect_same(const EntryLog& log, const std::deque<LogEntry>& model, const char* where) {
  ASSERT_EQ(log.size(), model.size()) << where;
  ASSERT_EQ(log.newest_at(), model.empty() ? INT64_MIN : model.back().at) << where;
  // The prefix at or before each entry's time (and before the oldest): what a window's view drops.
  for (std::size_t k = 0; k <= model.size() && k < 4; ++k) {
    const std::int64_t through = k == 0 ? INT64_MIN + 1 : model[k - 1].at;
    std::size_t count = 0;
    std::int64_t cost = 0;
    while (count < model.size() && model[count].at <= through) cost += model[count++].cost;
    const EntryLog::Prefix p = log.prefix_through(through);
    ASSERT_EQ(p.count, count) << where << ", through " << through;
    ASSERT_EQ(p.cost, cost) << where << ", through " << through;
  }
  ASSERT_EQ(log.empty(), model.empty()) << where;
  ASSERT_EQ(log.total(), sum(model)) << where;
  for (std::size_t i = 0; i < model.size(); ++i) {
    ASSERT_EQ(log[i].at, model[i].at) << where << ", entry " << i;
    ASSERT_EQ(log[i].cost, model[i].cost) << where << ", entry " << i;
  }
  const std::size_t bytes = log.heap_bytes();
  if (bytes != 0) {  // a ring: a power of two of at least 4 entries, holding them all
    ASSERT_EQ(bytes % sizeof(LogEntry), 0U) << where;
    const std::size_t capacity = bytes / sizeof(LogEntry);
    ASSERT_GE(capacity, 4U) << where;
    ASSERT_EQ(capacity & (capacity - 1), 0U) << where;
    ASSERT_GE(capacity, model.size()) << where;
  }
}

TEST(EntryLog, AFewEntriesStayInlineAndTheThirdTakesARingThatIsKept) {
  static_assert(sizeof(EntryLog) == 40, "the store's slot holds the log: it must not grow");
  EntryLog log;
  EXPECT_EQ(log.heap_bytes(), 0U);
  log.push_back({10, 1});
  log.push_back({11, 2});
  EXPECT_EQ(log.heap_bytes(), 0U) << "two entries need no heap block";
  EXPECT_EQ(log.total(), 3);
  log.push_back({12, 3});
  EXPECT_EQ(log.heap_bytes(), 4 * sizeof(LogEntry));
  log.push_back({13, 4});
  log.push_back({14, 5});
  EXPECT_EQ(log.heap_bytes(), 8 * sizeof(LogEntry)) << "a full ring doubles";
  log.pop_front(5, 15);
  EXPECT_TRUE(log.empty());
  EXPECT_EQ(log.total(), 0);
  EXPECT_EQ(log.heap_bytes(), 8 * sizeof(LogEntry)) << "the block is kept: growing again allocates nothing";

  EntryLog moved(std::move(log));
  EXPECT_EQ(moved.heap_bytes(), 8 * sizeof(LogEntry));
  EXPECT_EQ(log.heap_bytes(), 0U) << "moved from: empty, no block";  // NOLINT(bugprone-use-after-move)
  EXPECT_TRUE(log.empty());                                          // NOLINT(bugprone-use-after-move)
  log = EntryLog{};
  EXPECT_EQ(log.heap_bytes(), 0U);
}

// Random pushes, merges, refunds from the back, drops from the front, time moves, copies and moves: the log
// and a deque agree after every step, while the ring wraps around many times.
TEST(EntryLog, AgreesWithADequeThroughRandomOperations) {
  std::mt19937_64 random(5);
  EntryLog log;
  std::deque<LogEntry> model;
  std::int64_t now = -1000;
  for (int step = 0; step < 200'000; ++step) {
    const int op = static_cast<int>(random() % 16);
    if (op < 6) {  // the size hovers around a few dozen, and sometimes drains to zero
      now += static_cast<std::int64_t>(random() % 3);
      const LogEntry e{now, static_cast<std::int64_t>(random() % 4)};
      log.push_back(e);
      model.push_back(e);
    } else if (op < 8) {  // a commit: drops expired entries, then merges into the newest or appends
      const std::size_t n = model.empty() ? 0 : random() % (model.size() < 3 ? model.size() + 1 : 3);
      std::int64_t dropped = 0;
      for (std::size_t i = 0; i < n; ++i) dropped += model[i].cost;
      now += static_cast<std::int64_t>(random() % 2);
      const auto cost = static_cast<std::int64_t>(random() % 3 + 1);
      log.advance(n, dropped, now, cost);
      model.erase(model.begin(), model.begin() + static_cast<std::ptrdiff_t>(n));
      if (!model.empty() && (model.back().at == now || model.back().cost == 0)) {
        model.back() = LogEntry{now, model.back().cost + cost};
      } else {
        model.push_back(LogEntry{now, cost});
      }
    } else if (op < 10 && !model.empty()) {
      const auto cost = static_cast<std::int64_t>(random() % static_cast<std::uint64_t>(model.back().cost + 1));
      log.take_from_back(cost);
      model.back().cost -= cost;
      if (model.back().cost == 0) model.pop_back();
    } else if (op < 13) {
      const std::size_t count = model.empty() ? 0 : random() % (random() % 8 == 0 ? model.size() + 1 : 3);
      const std::size_t n = count < model.size() ? count : model.size();
      std::int64_t cost = 0;
      for (std::size_t i = 0; i < n; ++i) cost += model[i].cost;
      log.pop_front(n, cost);
      model.erase(model.begin(), model.begin() + static_cast<std::ptrdiff_t>(n));
    } else if (op == 13 && !model.empty()) {
      log.set_at(model.size() - 1, now + 1);
      model.back().at = ++now;
    } else if (op == 14) {
      EntryLog copy(log);  // a deep copy: the same entries, the same capacity
      ASSERT_EQ(copy.heap_bytes(), log.heap_bytes());
      expect_same(copy, model, "copy");
      EntryLog assigned;
      assigned.push_back({1, 1});
      assigned = copy;
      expect_same(assigned, model, "copy-assigned");
      log = std::move(assigned);
    } else {
      EntryLog moved(std::move(log));
      log = std::move(moved);
    }
    expect_same(log, model, "after a step");
    if (HasFatalFailure()) {
      ADD_FAILURE() << "step " << step << ", operation " << op;
      return;
    }
  }
}

}  // namespace
