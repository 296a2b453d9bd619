// The fault proxy itself (tests/support/fault_proxy.hpp), seen by a raw socket speaking RESP to the shared
// redis-server through it: each fault does what its documentation says, so the engine's fault tests
// (fault_proxy_test.cpp) test what they claim.
#include <gtest/gtest.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <memory>
#include <string>
#include <thread>

#include "../support/fault_proxy.hpp"
#include "test_support.hpp"

namespace {

using namespace std::chrono_literals;
using Steady = std::chrono::steady_clock;
using ratelimit_test::Admission;
using ratelimit_test::Direction;
using ratelimit_test::FaultProxy;
using ratelimit_test::FaultSpec;

/// A client socket with a 1 s receive timeout; `error` holds the errno of a failed connect.
struct Client {
  int fd = -1;
  int error = 0;
  explicit Client(int port) {
    fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    addr.sin_port = htons(static_cast<std::uint16_t>(port));
    if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) error = errno;
    const timeval second{1, 0};
    ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &second, sizeof second);
  }
  ~Client() { ::close(fd); }
  Client(const Client&) = delete;
  Client& operator=(const Client&) = delete;

  /// Sends PING and reads until "+PONG\r\n", end of stream or an error (`error` then holds its errno,
  /// EAGAIN for the timeout). Returns what was read.
  std::string ping() {
    (void)::send(fd, "PING\r\n", 6, MSG_NOSIGNAL);
    std::string got;
    char buf[64];
    while (got.find("\r\n") == std::string::npos) {
      const ssize_t n = ::recv(fd, buf, sizeof buf, 0);
      if (n <= 0) {
        error = n == 0 ? 0 : errno;
        eof = n == 0;
        break;
      }
      got.append(buf, static_cast<std::size_t>(n));
    }
    return got;
  }
  bool eof = false;
};

class FaultProxyMechanics : public testing::Test {
 protected:
  void SetUp() override {
    RATELIMIT_REQUIRE_REDIS();
    proxy_ = std::make_unique<FaultProxy>("127.0.0.1", ratelimit_test::shared_redis()->port());
  }
  std::unique_ptr<FaultProxy> proxy_;
};

TEST_F(FaultProxyMechanics, ForwardsAndCounts) {
  Client c(proxy_->port());
  ASSERT_EQ(c.error, 0);
  EXPECT_EQ(c.ping(), "+PONG\r\n");
  // Counted just after each write: the reply may be read first.
  const auto until = Steady::now() + 1s;
  while ((proxy_->bytes(Direction::to_server) < 6 || proxy_->bytes(Direction::to_client) < 7) &&
         Steady::now() < until) {
    std::this_thread::sleep_for(1ms);
  }
  EXPECT_EQ(proxy_->accepted(), 1);
  EXPECT_EQ(proxy_->bytes(Direction::to_server), 6);
  EXPECT_EQ(proxy_->bytes(Direction::to_client), 7);
  EXPECT_EQ(proxy_->live(), 1);
}

TEST_F(FaultProxyMechanics, DelayAndTricklePaceAReply) {
  Client c(proxy_->port());
  proxy_->set(Direction::to_client, FaultSpec::delay(100ms));
  auto t0 = Steady::now();
  EXPECT_EQ(c.ping(), "+PONG\r\n");
  EXPECT_GE(Steady::now() - t0, 100ms);
  proxy_->set(Direction::to_client, FaultSpec::trickle(30ms));
  t0 = Steady::now();
  EXPECT_EQ(c.ping(), "+PONG\r\n");
  EXPECT_GE(Steady::now() - t0, 6 * 30ms);  // seven bytes, the first at once
}

TEST_F(FaultProxyMechanics, StallHoldsTheRestUntilCleared) {
  Client c(proxy_->port());
  proxy_->set(Direction::to_client, FaultSpec::stall(2));
  EXPECT_EQ(c.ping(), "+P");
  EXPECT_EQ(c.error, EAGAIN);
  proxy_->clear();
  char buf[16];
  const ssize_t n = ::recv(c.fd, buf, sizeof buf, 0);
  EXPECT_EQ(std::string(buf, static_cast<std::size_t>(n > 0 ? n : 0)), "ONG\r\n");
}

TEST_F(FaultProxyMechanics, ResetAndHalfCloseCutAReply) {
  {
    Client c(proxy_->port());
    proxy_->set(Direction::to_client, FaultSpec::reset(3));
    EXPECT_EQ(c.ping(), "+PO");
    EXPECT_EQ(c.error, ECONNRESET);
  }
  proxy_->set(Direction::to_client, FaultSpec::half_close(3));
  Client c(proxy_->port());
  EXPECT_EQ(c.ping(), "+PO");
  EXPECT_TRUE(c.eof);
}

TEST_F(FaultProxyMechanics, BlackholeAcceptsAndNeverAnswersRefuseRefuses) {
  proxy_->set_admission(Admission::blackhole);
  std::this_thread::sleep_for(30ms);
  {
    Client c(proxy_->port());
    EXPECT_EQ(c.error, 0);
    EXPECT_EQ(c.ping(), "");
    EXPECT_EQ(c.error, EAGAIN);
  }
  proxy_->set_admission(Admission::refuse);
  std::this_thread::sleep_for(30ms);
  EXPECT_EQ(Client(proxy_->port()).error, ECONNREFUSED);
  proxy_->clear();
  std::this_thread::sleep_for(30ms);
  Client c(proxy_->port());  // the same port again
  EXPECT_EQ(c.ping(), "+PONG\r\n");
}

}  // namespace
