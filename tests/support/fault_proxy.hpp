#pragma once

// FaultProxy: a TCP proxy for socket-level fault tests (the kernel here has no netem). It listens on
// 127.0.0.1 on a port of its own and forwards each connection to an upstream host:port (a redis-server,
// plain or TLS: TLS is only bytes to it), applying faults that a test changes at run time.
//
//   FaultProxy proxy("127.0.0.1", redis.port());   // listening at once; proxy.port() is its port
//   proxy.set(Direction::to_client, FaultSpec::trickle(50ms));   // new and live connections
//   proxy.set_admission(Admission::blackhole);                   // new connections only
//   proxy.clear();                                               // back to plain forwarding
//   proxy.drop_connections();                                    // RST every live connection
//
// Per direction (`to_server`: client -> server, `to_client`: server -> client), on new and live connections
// (the setting is read before every write); `after` counts the bytes forwarded in that direction on that
// connection since the fault took effect (it was set, or the connection opened):
//   none          forward at once.
//   delay(N)      hold each chunk read N ms, then forward it (order kept).
//   trickle(N)    forward one byte every N ms.
//   stall(K)      forward K bytes, then hold the rest (the sockets stay open; clearing the fault releases
//                 what was held, in order).
//   reset(K)      forward K bytes; the next byte in that direction resets the client's connection (RST:
//                 SO_LINGER {1, 0} and close) and closes the upstream one.
//   half_close(K) forward K bytes; the next byte closes that direction's receiving side for writing
//                 (shutdown(SHUT_WR): to_client, the client reads end of stream with its socket still open
//                 for sending); later bytes of that direction are dropped, the other direction still flows.
// Per connection, for connections accepted from then on (`set_admission`):
//   forward       connect upstream and forward.
//   blackhole     accept (the kernel completes the TCP handshake, so the client's connect succeeds) and never
//                 answer: no upstream connection, nothing read, nothing sent, until the proxy stops or
//                 `drop_connections`. (On a live connection, `stall(0)` both ways is the same.)
//   refuse        stop listening (the port stays bound to the proxy): a new connect fails with ECONNREFUSED;
//                 connections waiting in the backlog are reset. Listening resumes when admission changes.
//
// Counters: `accepted()` connections, `bytes(direction)` forwarded, `live()` connections open,
// `client_closes()` forwarded connections whose client closed (end of stream or an error read from it).
// The destructor stops it: every thread joined, every socket closed, within about 20 ms (never waits for a
// peer). Thread-safe: any thread may set faults and read counters. Throws std::runtime_error when it cannot
// listen.

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <deque>
#include <list>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

namespace ratelimit_test {

/// Which way the bytes flow.
enum class Direction { to_server, to_client };

/// What a direction does to the bytes it forwards (see the file's comment).
struct FaultSpec {
  enum class Kind { none, delay, trickle, stall, reset, half_close };
  Kind kind = Kind::none;
  std::chrono::milliseconds every{0};  // delay, trickle
  std::size_t after = 0;               // stall, reset, half_close: bytes forwarded first

  static FaultSpec none() { return {}; }
  static FaultSpec delay(std::chrono::milliseconds ms) { return {Kind::delay, ms, 0}; }
  static FaultSpec trickle(std::chrono::milliseconds ms) { return {Kind::trickle, ms, 0}; }
  static FaultSpec stall(std::size_t after) { return {Kind::stall, {}, after}; }
  static FaultSpec reset(std::size_t after) { return {Kind::reset, {}, after}; }
  static FaultSpec half_close(std::size_t after) { return {Kind::half_close, {}, after}; }
};

/// What happens to a new connection.
enum class Admission { forward, blackhole, refuse };

class FaultProxy {
 public:
  using Clock = std::chrono::steady_clock;

  /// Listens on 127.0.0.1 (a port the kernel picks) and forwards to `host`:`port` (an IPv4 address or name).
  FaultProxy(std::string host, int port) : upstream_(resolve(host, port)) {
    listen_on_loopback();
    acceptor_ = std::thread([this] { accept_loop(); });
  }
  ~FaultProxy() {
    stop_ = true;
    acceptor_.join();
    std::lock_guard lock(connections_mutex_);
    connections_.clear();  // each joins its pumps (they see stop_ within a tick), then closes its sockets
    for (const int fd : blackholed_) ::close(fd);
    ::close(listener_);
  }
  FaultProxy(const FaultProxy&) = delete;
  FaultProxy& operator=(const FaultProxy&) = delete;

  /// The port it listens on (127.0.0.1).
  [[nodiscard]] int port() const noexcept { return port_; }

  /// Sets the fault of `direction`, for new and live connections.
  void set(Direction direction, FaultSpec fault) {
    std::lock_guard lock(config_mutex_);
    faults_[index(direction)] = fault;
    ++generation_[index(direction)];
  }
  /// Sets what happens to connections accepted from now on.
  void set_admission(Admission admission) { admission_ = admission; }
  /// No faults, plain forwarding.
  void clear() {
    set(Direction::to_server, FaultSpec::none());
    set(Direction::to_client, FaultSpec::none());
    set_admission(Admission::forward);
  }
  /// Resets every live connection (RST to its client, close upstream), blackholed ones too.
  void drop_connections() {
    std::lock_guard lock(connections_mutex_);
    for (auto& c : connections_) c->abort_with_reset();
    for (const int fd : blackholed_) reset_close(fd);
    blackholed_.clear();
  }

  /// Connections accepted (forwarded or blackholed; not refused ones).
  [[nodiscard]] std::int64_t accepted() const noexcept { return accepted_; }
  /// Bytes forwarded in `direction`, over every connection.
  [[nodiscard]] std::int64_t bytes(Direction direction) const noexcept { return bytes_[index(direction)]; }
  /// Forwarded connections whose pumps still run.
  [[nodiscard]] std::int64_t live() const noexcept { return live_; }
  /// Forwarded connections whose client closed (end of stream, or an error read from its socket).
  [[nodiscard]] std::int64_t client_closes() const noexcept { return client_closes_; }

 private:
  static constexpr auto kTick = std::chrono::milliseconds(10);  // how often a waiting thread looks at stop_

  static std::size_t index(Direction d) noexcept { return d == Direction::to_server ? 0 : 1; }

  static sockaddr_in resolve(const std::string& host, int port) {
    addrinfo hints{};
    hints.ai_family = AF_INET;
    hints.ai_socktype = SOCK_STREAM;
    addrinfo* found = nullptr;
    if (::getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &found) != 0 || found == nullptr) {
      throw std::runtime_error("FaultProxy: cannot resolve " + host);
    }
    sockaddr_in addr{};
    std::memcpy(&addr, found->ai_addr, sizeof addr);
    ::freeaddrinfo(found);
    return addr;
  }

  /// Binds the listener to an explicit port: one the kernel picked stays bound only while listening, and
  /// `refuse` stops listening.
  void listen_on_loopback() {
    for (int attempt = 0; attempt < 50; ++attempt) {
      sockaddr_in addr{};
      addr.sin_family = AF_INET;
      addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
      socklen_t len = sizeof addr;
      const int probe = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
      const bool picked = probe >= 0 && ::bind(probe, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0 &&
                          ::getsockname(probe, reinterpret_cast<sockaddr*>(&addr), &len) == 0;
      if (probe >= 0) ::close(probe);
      listener_ = picked ? ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0) : -1;
      const int one = 1;  // so that listening again after `refuse` does not clash with accepted connections
      if (listener_ >= 0 && ::setsockopt(listener_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) == 0 &&
          ::bind(listener_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0 && ::listen(listener_, 64) == 0) {
        port_ = ntohs(addr.sin_port);
        return;
      }
      if (listener_ >= 0) ::close(listener_);  // another process took the port in between: pick again
    }
    throw std::runtime_error("FaultProxy: cannot listen on 127.0.0.1");
  }

  static void reset_close(int fd) noexcept {
    const linger hard{1, 0};
    ::setsockopt(fd, SOL_SOCKET, SO_LINGER, &hard, sizeof hard);
    ::close(fd);
  }

  /// The fault of `direction` and its generation (a pump restarts its byte count when that changes).
  std::pair<FaultSpec, std::uint64_t> fault(std::size_t direction) const {
    std::lock_guard lock(config_mutex_);
    return {faults_[direction], generation_[direction]};
  }

  class Connection;

  /// One direction of one connection: reads `from`, applies the fault, writes `to`.
  class Pump {
   public:
    Pump(FaultProxy& proxy, Connection& connection, std::size_t direction, int from, int to)
        : proxy_(proxy), connection_(connection), direction_(direction), from_(from), to_(to) {}
    void run();

   private:
    struct Chunk {
      Clock::time_point ready;
      std::string bytes;
    };
    bool read_more();
    std::size_t allowance(const FaultSpec& f, Clock::time_point now, bool& trigger);
    bool write_some(std::size_t n);
    Clock::time_point next_wake(const FaultSpec& f, Clock::time_point now) const;

    FaultProxy& proxy_;
    Connection& connection_;
    std::size_t direction_;
    int from_;
    int to_;
    std::deque<Chunk> held_;
    std::size_t held_bytes_ = 0;
    std::uint64_t generation_ = ~std::uint64_t{0};
    std::size_t forwarded_ = 0;  // since the fault took effect
    Clock::time_point next_byte_{};
    bool from_open_ = true;
    bool to_shut_ = false;
  };

  /// A forwarded connection: the client's socket, the upstream one and one pump per direction.
  class Connection {
   public:
    Connection(FaultProxy& proxy, int client, int upstream) : proxy_(proxy), client_(client), upstream_(upstream) {
      ++proxy_.live_;
      pumps_[0] = std::thread([this] { Pump(proxy_, *this, 0, client_, upstream_).run(); });
      pumps_[1] = std::thread([this] { Pump(proxy_, *this, 1, upstream_, client_).run(); });
    }
    ~Connection() {
      closing_ = true;
      for (auto& t : pumps_) t.join();
      if (reset_) {
        reset_close(client_);
      } else {
        ::close(client_);
      }
      ::close(upstream_);
      --proxy_.live_;
    }
    Connection(const Connection&) = delete;
    Connection& operator=(const Connection&) = delete;

    /// Ends both pumps; the client's socket is closed with RST when the connection is destroyed (reaped).
    void abort_with_reset() noexcept {
      reset_ = true;
      closing_ = true;
      ::shutdown(upstream_, SHUT_RDWR);
    }
    /// Ends both pumps with a plain close (a peer closed, or an error).
    void abort() noexcept { closing_ = true; }
    [[nodiscard]] bool closing() const noexcept { return closing_ || proxy_.stop_; }
    void pump_done() noexcept { ++done_; }
    [[nodiscard]] bool finished() const noexcept { return done_ == 2; }

   private:
    FaultProxy& proxy_;
    int client_;
    int upstream_;
    std::atomic<bool> closing_{false};
    std::atomic<bool> reset_{false};
    std::atomic<int> done_{0};
    std::thread pumps_[2];
  };

  void accept_loop();
  void admit(int client);
  void reap();

  sockaddr_in upstream_;
  int listener_ = -1;
  int port_ = 0;
  std::atomic<bool> stop_{false};
  std::atomic<Admission> admission_{Admission::forward};
  mutable std::mutex config_mutex_;
  FaultSpec faults_[2];
  std::uint64_t generation_[2] = {0, 0};
  std::atomic<std::int64_t> accepted_{0};
  std::atomic<std::int64_t> bytes_[2] = {0, 0};
  std::atomic<std::int64_t> live_{0};
  std::atomic<std::int64_t> client_closes_{0};
  std::mutex connections_mutex_;
  std::list<std::unique_ptr<Connection>> connections_;
  std::vector<int> blackholed_;
  std::thread acceptor_;  // last: started when everything else exists
};

inline void FaultProxy::accept_loop() {
  bool listening = true;
  while (!stop_) {
    reap();
    const bool refuse = admission_ == Admission::refuse;
    if (refuse && listening) {
      // A listening socket shut down for reading stops listening and keeps its port (Linux).
      ::shutdown(listener_, SHUT_RD);
      listening = false;
    } else if (!refuse && !listening) {
      listening = ::listen(listener_, 64) == 0;
    }
    if (!listening) {
      std::this_thread::sleep_for(kTick);
      continue;
    }
    pollfd p{listener_, POLLIN, 0};
    if (::poll(&p, 1, static_cast<int>(kTick.count())) <= 0) continue;
    const int client = ::accept4(listener_, nullptr, nullptr, SOCK_CLOEXEC);
    if (client >= 0) admit(client);
  }
}

inline void FaultProxy::admit(int client) {
  ++accepted_;
  const int one = 1;
  ::setsockopt(client, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  if (admission_ == Admission::blackhole) {
    std::lock_guard lock(connections_mutex_);
    blackholed_.push_back(client);
    return;
  }
  const int upstream = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (upstream < 0 || ::connect(upstream, reinterpret_cast<const sockaddr*>(&upstream_), sizeof upstream_) != 0) {
    if (upstream >= 0) ::close(upstream);
    reset_close(client);  // the upstream is down: the client sees its connection reset
    return;
  }
  ::setsockopt(upstream, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  std::lock_guard lock(connections_mutex_);
  connections_.push_back(std::make_unique<Connection>(*this, client, upstream));
}

inline void FaultProxy::reap() {
  std::lock_guard lock(connections_mutex_);
  connections_.remove_if([](const std::unique_ptr<Connection>& c) { return c->finished(); });
}

inline void FaultProxy::Pump::run() {
  while (!connection_.closing()) {
    const auto [f, generation] = proxy_.fault(direction_);
    if (generation != generation_) {
      generation_ = generation;
      forwarded_ = 0;
    }
    const auto now = Clock::now();
    bool trigger = false;
    const std::size_t n = allowance(f, now, trigger);
    if (n > 0 && !write_some(n)) break;
    if (trigger && f.kind == FaultSpec::Kind::reset) {
      connection_.abort_with_reset();
      break;
    }
    if (trigger && f.kind == FaultSpec::Kind::half_close && !to_shut_) {
      ::shutdown(to_, SHUT_WR);
      to_shut_ = true;
    }
    if (to_shut_) {  // dropped after a half-close
      held_.clear();
      held_bytes_ = 0;
    }
    if (!from_open_ && held_.empty()) {
      if (!to_shut_) ::shutdown(to_, SHUT_WR);  // pass the peer's end of stream on
      break;
    }
    const auto wake = next_wake(f, Clock::now());
    pollfd p{from_, POLLIN, 0};
    const bool can_read = from_open_ && held_bytes_ < (1u << 20);
    const auto wait = std::chrono::ceil<std::chrono::milliseconds>(wake - Clock::now());
    const int timeout = static_cast<int>(std::clamp<std::int64_t>(wait.count(), 0, kTick.count()));
    if (!can_read) {
      std::this_thread::sleep_for(std::chrono::milliseconds(timeout));
    } else if (::poll(&p, 1, timeout) > 0 && !read_more()) {
      break;
    }
  }
  connection_.pump_done();
}

/// Reads what `from_` has into the held chunks; false on a read error (the connection is aborted).
inline bool FaultProxy::Pump::read_more() {
  char buf[16 * 1024];
  const ssize_t n = ::recv(from_, buf, sizeof buf, MSG_DONTWAIT);
  if (n <= 0 && direction_ == 0 && (n == 0 || (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR))) {
    ++proxy_.client_closes_;
  }
  if (n == 0) {
    from_open_ = false;
    return true;
  }
  if (n < 0) {
    if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) return true;
    connection_.abort();
    return false;
  }
  const auto [f, generation] = proxy_.fault(direction_);
  const auto delay = f.kind == FaultSpec::Kind::delay ? f.every : std::chrono::milliseconds(0);
  held_.push_back({Clock::now() + delay, std::string(buf, static_cast<std::size_t>(n))});
  held_bytes_ += static_cast<std::size_t>(n);
  return true;
}

/// How many held bytes may be written now; `trigger` when a reset or half-close is due instead.
inline std::size_t FaultProxy::Pump::allowance(const FaultSpec& f, Clock::time_point now, bool& trigger) {
  if (held_.empty() || to_shut_) return 0;
  using K = FaultSpec::Kind;
  switch (f.kind) {
    case K::none: return held_bytes_;
    case K::delay: {
      std::size_t n = 0;
      for (const Chunk& c : held_) {
        if (c.ready > now) break;
        n += c.bytes.size();
      }
      return n;
    }
    case K::trickle:
      if (now < next_byte_) return 0;
      next_byte_ = now + f.every;
      return 1;
    case K::stall:
    case K::reset:
    case K::half_close: {
      const std::size_t budget = f.after > forwarded_ ? f.after - forwarded_ : 0;
      if (budget == 0 && f.kind != K::stall) trigger = true;
      return std::min(budget, held_bytes_);
    }
  }
  return 0;
}

/// Writes up to `n` held bytes (what the socket takes now); false when the peer is gone.
inline bool FaultProxy::Pump::write_some(std::size_t n) {
  while (n > 0 && !held_.empty()) {
    Chunk& c = held_.front();
    const std::size_t want = std::min(n, c.bytes.size());
    const ssize_t w = ::send(to_, c.bytes.data(), want, MSG_DONTWAIT | MSG_NOSIGNAL);
    if (w < 0) {
      if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) return true;
      connection_.abort();
      return false;
    }
    const auto sent = static_cast<std::size_t>(w);
    c.bytes.erase(0, sent);
    if (c.bytes.empty()) held_.pop_front();
    held_bytes_ -= sent;
    forwarded_ += sent;
    proxy_.bytes_[direction_] += static_cast<std::int64_t>(sent);
    n -= sent;
    if (sent < want) return true;  // the socket's buffer is full: try again after the next wait
  }
  return true;
}

/// When the pump has something to do next without new input (bounded by one tick by the caller).
inline FaultProxy::Clock::time_point FaultProxy::Pump::next_wake(const FaultSpec& f, Clock::time_point now) const {
  if (held_.empty()) return now + kTick;
  if (f.kind == FaultSpec::Kind::trickle) return std::max(now, next_byte_);
  if (f.kind == FaultSpec::Kind::delay) return std::max(now, held_.front().ready);
  if (f.kind == FaultSpec::Kind::none) return now + std::chrono::milliseconds(1);  // the peer's buffer was full
  return now + kTick;
}

}  // namespace ratelimit_test
