// examples/remote_quota_client: calls someone else's API as fast as its rate-limit header fields allow, steered by
// ratelimit::http::RemoteQuotaLimiter; prints what it sent and how the remote answered.
//
//   remote_quota_client HOST PORT PATH SECONDS
//
// Try it against the example server: `http_server --port 8080 --quota-burst 10` and
// `remote_quota_client 127.0.0.1 8080 /quota 10` (about 10 + 5 x 10 requests, no 429 after the first response).
#include <chrono>
#include <cstdio>
#include <stdexcept>
#include <string>
#include <thread>

#include "remote_quota_httplib.hpp"

int main(int argc, char** argv) {
  if (argc != 5) {
    std::fprintf(stderr, "usage: remote_quota_client HOST PORT PATH SECONDS\n");
    return 2;
  }
  int port = 0;
  double seconds = 0;
  try {
    port = std::stoi(argv[2]);
    seconds = std::stod(argv[4]);
  } catch (const std::exception&) {
    std::fprintf(stderr, "remote_quota_client: PORT and SECONDS must be numbers\n");
    return 2;
  }
  httplib::Client client(argv[1], port);
  // Before the first response, and as a ceiling whatever the remote says: 20 per second, one at a time.
  ratelimit::http::RemoteQuotaLimiter<> remote(
      ratelimit::Gcra{.limit = 20, .period = std::chrono::seconds(1), .burst = 1});
  const auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  long ok = 0, refused = 0, failed = 0;
  while (std::chrono::steady_clock::now() < end) {
    const example::Steered s = example::get_steered(remote, "remote", client, argv[3]);
    if (!s.sent) {
      std::this_thread::sleep_for(s.wait);
      continue;
    }
    if (!s.status) ++failed;
    if (s.status == 429) ++refused;
    if (s.status && *s.status != 429) ++ok;
  }
  const ratelimit::http::RemoteQuotaStats st = remote.stats();
  std::printf("sent %ld, answered 429 %ld, no answer %ld; header values ignored %lld, clamped %lld\n",
              ok + refused + failed, refused, failed, static_cast<long long>(st.malformed),
              static_cast<long long>(st.clamped));
  return 0;
}
