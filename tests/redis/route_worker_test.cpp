// RouteWorker under attack (include/ratelimit/redis/engine/route.hpp): held async calls end exactly once, by the
// task's end, their own deadline, a full queue or the worker's destruction; calls submitted while a task runs count
// against max_in_flight, those the running task serves do not. No server: the task and `place` are the test's.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include <ratelimit/redis/engine/route.hpp>

namespace {

using namespace std::chrono_literals;
using ratelimit::BackendError;
using ratelimit::BackendErrorCause;
using ratelimit::redis::engine::PipelineOp;
using ratelimit::redis::engine::Reply;
using ratelimit::redis::engine::RouteWorker;

/// An async call that counts its completions and keeps the last error.
class CountedOp final : public PipelineOp {
 public:
  explicit CountedOp(std::chrono::steady_clock::duration within = 1h) {
    deadline = std::chrono::steady_clock::now() + within;
  }
  void complete(Reply, std::optional<BackendError> e) noexcept override {
    const std::lock_guard lock(mutex_);
    ++completions_;
    error_ = std::move(e);
    done_.notify_all();
  }
  /// Waits (at most 10 s) for a first completion; returns the completions so far.
  int wait_done() {
    std::unique_lock lock(mutex_);
    done_.wait_for(lock, 10s, [&] { return completions_ > 0; });
    return completions_;
  }
  int completions() {
    const std::lock_guard lock(mutex_);
    return completions_;
  }
  std::optional<BackendErrorCause> cause() {
    const std::lock_guard lock(mutex_);
    return error_ ? std::optional(error_->cause()) : std::nullopt;
  }

 private:
  std::mutex mutex_;
  std::condition_variable done_;
  int completions_ = 0;
  std::optional<BackendError> error_;
};

/// A task that blocks until released, counting its runs.
struct Gate {
  std::mutex mutex;
  std::condition_variable cv;
  bool open = false;
  int runs = 0;
  void run() {
    std::unique_lock lock(mutex);
    ++runs;
    cv.notify_all();
    cv.wait(lock, [&] { return open; });
  }
  void wait_running(int n) {
    std::unique_lock lock(mutex);
    cv.wait_for(lock, 10s, [&] { return runs >= n; });
  }
  void release() {
    {
      const std::lock_guard lock(mutex);
      open = true;
    }
    cv.notify_all();
  }
};

/// `place` completing every call it gets (no error), counting them.
struct Placed {
  std::atomic<int> calls{0};
  void operator()(const std::vector<PipelineOp*>& ops) {
    for (PipelineOp* op : ops) {
      calls.fetch_add(1);
      op->complete(nullptr, std::nullopt);
    }
  }
};

TEST(RouteWorkerAttack, CallsSubmittedWhileATaskRunsCountAgainstMaxInFlight) {
  Gate gate;
  Placed placed;
  auto worker = std::make_unique<RouteWorker>(
      2, [&](bool, bool) { gate.run(); }, [&](const std::vector<PipelineOp*>& ops) { placed(ops); });
  (void)worker->ask();  // a run with nothing held: every call submitted now waits in the queue
  gate.wait_running(1);
  CountedOp a, b, c;
  worker->submit(a);
  worker->submit(b);
  worker->submit(c);  // the third past max_in_flight 2: refused
  EXPECT_EQ(c.wait_done(), 1);
  EXPECT_EQ(c.cause(), BackendErrorCause::timeout);
  EXPECT_EQ(worker->refused(), 1u);
  gate.release();
  EXPECT_EQ(a.wait_done(), 1);
  EXPECT_EQ(b.wait_done(), 1);
  EXPECT_EQ(a.cause(), std::nullopt);
  worker.reset();
  EXPECT_EQ(placed.calls.load(), 2);
  EXPECT_EQ(a.completions() + b.completions() + c.completions(), 3);
}

TEST(RouteWorkerAttack, CallsTheRunningTaskServesDoNotFillTheQueue) {
  Gate gate;
  Placed placed;
  RouteWorker worker(
      2, [&](bool, bool) { gate.run(); }, [&](const std::vector<PipelineOp*>& ops) { placed(ops); });
  CountedOp a;
  worker.submit(a);  // held, then served by the run it started
  gate.wait_running(1);
  CountedOp c, d, e;
  worker.submit(c);
  worker.submit(d);  // queued beside the two the running task serves: not refused
  worker.submit(e);  // the third queued: refused
  EXPECT_EQ(e.wait_done(), 1);
  EXPECT_EQ(worker.refused(), 1u);
  gate.release();
  for (CountedOp* op : {&a, &c, &d}) EXPECT_EQ(op->wait_done(), 1);
  EXPECT_EQ(e.completions(), 1);
}

TEST(RouteWorkerAttack, HeldCallEndsByItsDeadlineOnceAndIsNotPlacedAfter) {
  Gate gate;
  Placed placed;
  RouteWorker worker(
      4, [&](bool, bool) { gate.run(); }, [&](const std::vector<PipelineOp*>& ops) { placed(ops); });
  CountedOp soon(50ms), later;
  worker.submit(soon);
  worker.submit(later);
  gate.wait_running(1);
  EXPECT_EQ(soon.wait_done(), 1);  // while the task still blocks
  EXPECT_EQ(soon.cause(), BackendErrorCause::timeout);
  CountedOp after;  // the expired call freed its place: the running task served it
  worker.submit(after);
  gate.release();
  EXPECT_EQ(later.wait_done(), 1);
  EXPECT_EQ(after.wait_done(), 1);
  std::this_thread::sleep_for(50ms);  // a second completion would come now
  EXPECT_EQ(soon.completions(), 1);
  EXPECT_EQ(placed.calls.load(), 2);
}

TEST(RouteWorkerAttack, DestructionWhileATaskRunsFailsHeldCallsOnce) {
  Gate gate;
  Placed placed;
  auto worker = std::make_unique<RouteWorker>(
      4, [&](bool, bool) { gate.run(); }, [&](const std::vector<PipelineOp*>& ops) { placed(ops); });
  CountedOp a, b;
  worker->submit(a);
  gate.wait_running(1);
  worker->submit(b);  // held for the next run
  std::thread releaser([&] {
    std::this_thread::sleep_for(50ms);
    gate.release();
  });
  worker.reset();  // waits for the running task
  releaser.join();
  EXPECT_EQ(a.completions(), 1);
  EXPECT_EQ(b.completions(), 1);
  EXPECT_EQ(a.cause(), BackendErrorCause::io);
  EXPECT_EQ(b.cause(), BackendErrorCause::io);
  EXPECT_EQ(placed.calls.load(), 0);
}

TEST(RouteWorkerAttack, AskAwaitsTheNextRunNotTheRunningOne) {
  Gate gate;
  std::atomic<int> runs{0};
  RouteWorker worker(
      1,
      [&](bool, bool) {
        if (runs.fetch_add(1) == 0) gate.run();
      },
      [](const std::vector<PipelineOp*>&) {});
  (void)worker.ask();
  gate.wait_running(1);
  const std::uint64_t run = worker.ask();  // the running one started before this reason
  EXPECT_FALSE(worker.await(run, std::chrono::steady_clock::now() + 50ms));
  gate.release();
  EXPECT_TRUE(worker.await(run, std::chrono::steady_clock::now() + 10s));
  EXPECT_EQ(runs.load(), 2);
}

}  // namespace
