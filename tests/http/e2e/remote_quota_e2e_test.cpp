// RemoteQuotaLimiter over real HTTP on loopback: a client steered by the example server's header fields reaches
// the route's full throughput without a 429, and a hostile server's fields never take it past its own maxima
// (include/ratelimit/http/README.md "Calling someone else's API").
#include <gtest/gtest.h>
#include <httplib.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <string>
#include <thread>

#include "../../../examples/remote_quota_httplib.hpp"
#include "server_process.hpp"

using namespace std::chrono_literals;
namespace http = ratelimit::http;

namespace {

/// The example's /quota burst. B = 10 makes the advertised window w = B x 200 ms = 2 s a whole second count, so
/// the rate a client reads (q / w = 10 / 2 s) is the route's exact 5/s; a B that is not a multiple of 5 would be
/// advertised with w rounded up, a slower rate than the route's (safe, but short of full throughput). And 10 is a
/// burst large enough that spending it at once (the first B of the B + 50 requests) is part of the test.
constexpr std::int64_t kBurst = 10;
constexpr auto kRun = 10s;

/// What the client saw in one steered run.
struct SteeredRun {
  long ok = 0;
  long refused_after_first = 0;
  long refused_first = 0;
  long failed = 0;
};

/// Sends GET `path` as fast as `remote` lets it for `duration` after the first send.
template <class C>
SteeredRun steer(http::RemoteQuotaLimiter<C>& remote, httplib::Client& client, const std::string& path,
                 std::chrono::nanoseconds duration) {
  SteeredRun run;
  bool first = true;
  const auto end = std::chrono::steady_clock::now() + duration;
  while (std::chrono::steady_clock::now() < end) {
    const example::Steered s = example::get_steered(remote, "remote", client, path);
    if (!s.sent) {
      std::this_thread::sleep_for(std::min<std::chrono::nanoseconds>(s.wait, end - std::chrono::steady_clock::now()));
      continue;
    }
    if (!s.status) ++run.failed;
    if (s.status == 429) ++(first ? run.refused_first : run.refused_after_first);
    if (s.status == 200) ++run.ok;
    first = false;
  }
  return run;
}

}  // namespace

TEST(RemoteQuotaE2E, ReachesFullThroughputWithoutTooManyRequests) {
  ServerProcess server({"--quota-burst", std::to_string(kBurst)});
  httplib::Client client("127.0.0.1", server.port());
  client.set_keep_alive(true);
  // 20/s one at a time: the ceiling before and after the first response, above the route's 5/s.
  http::RemoteQuotaLimiter<> remote(ratelimit::Gcra{.limit = 20, .period = 1s, .burst = 1});
  const SteeredRun run = steer(remote, client, "/quota", kRun);
  const double best = static_cast<double>(kBurst + 5 * 10);
  std::printf("admitted %ld of at most %.0f; 429: first %ld, after %ld; failed %ld\n", run.ok, best, run.refused_first,
              run.refused_after_first, run.failed);
  EXPECT_EQ(run.refused_after_first, 0);
  EXPECT_EQ(run.failed, 0);
  EXPECT_GE(static_cast<double>(run.ok), 0.95 * best);
  EXPECT_LE(static_cast<double>(run.ok), best + 1);  // the route's own limit (one more at the very end)
  EXPECT_EQ(remote.stats().malformed, 0);
}

/// A server whose rate-limit fields lie: /api claims ever more quota in broken ways, /block answers with Retry-After
/// values no client should believe.
void serve_hostile(httplib::Server& server, std::atomic<long>& received) {
  server.Get("/api", [&](const httplib::Request&, httplib::Response& res) {
    switch (received.fetch_add(1) % 3) {
      case 0:
        res.set_header("X-RateLimit-Remaining", "1000000000000000000");  // 10^18
        res.set_header("X-RateLimit-Reset", "-30");
        break;
      case 1:
        res.set_header("RateLimit-Policy", "\"p\";q=999999999999999;w=1");
        res.set_header("RateLimit", "\"p\";r=999999999999999;t=0");
        break;
      default:
        res.set_header("RateLimit", "garbage;;r=");
        res.set_header("X-RateLimit-Remaining", "lots");
        break;
    }
    res.set_content("{}", "application/json");
  });
  server.Get("/block", [&](const httplib::Request&, httplib::Response& res) {
    const bool date = received.fetch_add(1) % 2 == 1;
    res.status = 429;
    res.set_header("Retry-After", date ? "Fri, 31 Dec 9999 23:59:59 GMT" : "999999999999");
    res.set_content("{}", "application/json");
  });
}

TEST(RemoteQuotaE2E, HostileHeadersStayWithinConfiguredMaxima) {
  httplib::Server hostile;
  std::atomic<long> received{0};
  serve_hostile(hostile, received);
  const int port = hostile.bind_to_any_port("127.0.0.1");
  ASSERT_GT(port, 0);
  std::thread serving([&] { hostile.listen_after_bind(); });  // bound: connections queue until it accepts

  http::RemoteQuotaOptions options;
  options.maxima.retry_after = 1s;  // the longest wait any response may impose
  options.maxima.quota = 100;
  http::RemoteQuotaLimiter<> remote(ratelimit::Gcra{.limit = 10, .period = 1s, .burst = 5}, options);
  httplib::Client client("127.0.0.1", port);
  auto start = std::chrono::steady_clock::now();
  (void)steer(remote, client, "/api", 2s);
  const double api_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const long api = received.exchange(0);
  start = std::chrono::steady_clock::now();
  (void)steer(remote, client, "/block", 3s);
  const double block_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const long blocked = received.load();
  hostile.stop();
  serving.join();

  std::printf("/api: %ld sent in %.2f s; /block: %ld sent in %.2f s\n", api, api_s, blocked, block_s);
  // The local policy (5 at once, then 10/s) bounds the sends whatever the fields claim; the claims of 10^18 and the
  // negative or garbage values hold the client up no more than the local policy does.
  EXPECT_LE(static_cast<double>(api), 5 + 10 * api_s + 1);
  EXPECT_GE(static_cast<double>(api), 5 + 10 * api_s * 0.6);
  // Retry-After of 31,000 years and of the year 9999: each holds the client up maxima.retry_after (1 s), no more.
  EXPECT_GE(blocked, 2);
  EXPECT_LE(static_cast<double>(blocked), block_s + 1);
  const http::RemoteQuotaStats s = remote.stats();
  EXPECT_GT(s.malformed, 0);
  EXPECT_GT(s.clamped, 0);
  EXPECT_EQ(s.too_many_requests, blocked);
}
