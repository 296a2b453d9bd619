// fork() while a parent's thread waits for another's Redis call on the same key of a LeasedLimiter: the child
// destroys the limiter it inherited (include/ratelimit/redis/README.md "Redis engine", fork: make a new one in the
// child) and exits; nothing there waits for the parent's threads, which the child does not have.
#include <gtest/gtest.h>

#include <unistd.h>

#include <chrono>
#include <memory>
#include <thread>

#include <ratelimit/redis.hpp>

#include "../support/fault_proxy.hpp"
#include "fork_support.hpp"
#include "test_support.hpp"

namespace {
namespace lease_fork {

using namespace std::chrono_literals;

TEST(LeaseFork, ChildDestroysTheLimiterWhileAParentThreadWaitsForTheKeysCall) {
  RATELIMIT_REQUIRE_REDIS();
  ratelimit_test::RedisServer server(ratelimit_test::redis_server_binary());
  ratelimit_test::FaultProxy proxy("127.0.0.1", server.port());
  ratelimit::redis::RedisOptions o = ratelimit_test::client_options(server);
  o.port = proxy.port();
  o.on_error = ratelimit::FailurePolicy::fail_open;
  o.command_timeout = 1500ms;
  o.connect_timeout = 1000ms;
  proxy.set(ratelimit_test::Direction::to_client, ratelimit_test::FaultSpec::delay(1000ms));
  using Limiter = ratelimit::redis::LeasedLimiter<ratelimit::Gcra>;
  auto limiter = std::make_unique<Limiter>(ratelimit::Gcra{.limit = 1000, .period = 1s, .burst = 1000}, o);
  std::thread first([&limiter] { (void)limiter->allow("k"); });  // asks Redis for the key's lease
  std::this_thread::sleep_for(100ms);
  std::thread second([&limiter] { (void)limiter->allow("k"); });  // waits for the first one's call
  std::this_thread::sleep_for(200ms);
  const pid_t child = ::fork();
  if (child == 0) {
    limiter.reset();
    ::_exit(0);
  }
  ASSERT_GT(child, 0);
  int status = 0;
  const bool exited = ratelimit_test::exits_within(child, 5s, status);
  EXPECT_TRUE(exited) << "the child hung destroying the limiter it inherited (killed after 5 s)";
  first.join();
  second.join();
  proxy.clear();
}

}  // namespace lease_fork
}  // namespace
