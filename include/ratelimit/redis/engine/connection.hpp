#pragma once

/// @file
/// `Connection`: one connection to a Redis server (TCP, Unix socket, or TLS through OpenSSL; hiredis parses).

#include <fcntl.h>
#include <hiredis/hiredis.h>
#include <poll.h>
#include <pthread.h>
#include <sys/socket.h>
#include <signal.h>
#include <sys/time.h>
#include <time.h>

#include <cerrno>
#include <charconv>
#include <cstring>
#include <chrono>
#include <cstddef>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "ratelimit/redis/abi.hpp"
#include "ratelimit/error.hpp"
#include "ratelimit/redis/options.hpp"
#include "ratelimit/redis/engine/reply.hpp"

#if RATELIMIT_REDIS_WITH_TLS
#include <arpa/inet.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>
#endif

namespace ratelimit::redis {
inline namespace RATELIMIT_REDIS_ABI_NAMESPACE {
namespace engine {

/// Appends `args` to `out` as one RESP command (an array of bulk strings).
inline void append_resp(std::string& out, std::span<const std::string_view> args) {
  char num[24];
  auto put_len = [&](char tag, std::size_t n) {
    out += tag;
    const auto r = std::to_chars(num, num + sizeof num, n);
    out.append(num, r.ptr);
    out += "\r\n";
  };
  put_len('*', args.size());
  for (const std::string_view a : args) {
    put_len('$', a.size());
    out.append(a);
    out += "\r\n";
  }
}

namespace detail {

/// "host:port", or "unix:<path>", of the server of `o` (for error texts).
inline std::string endpoint(const ConnectionOptions& o) {
  return o.unix_socket.empty() ? o.host + ":" + std::to_string(o.port) : "unix:" + o.unix_socket;
}

/// `o` pointed at the server at `host`:`port` (a cluster node, a master a sentinel names).
inline ConnectionOptions at(ConnectionOptions o, std::string host, int port) {
  o.unix_socket.clear();
  o.host = std::move(host);
  o.port = port;
  return o;
}

/// Keeps an OpenSSL write to a socket the server closed from killing the process with SIGPIPE (a library
/// installs no handler): the thread blocks SIGPIPE during the call and consumes one the call raised.
class SigpipeGuard {
 public:
  SigpipeGuard() noexcept {
    sigemptyset(&pipe_);
    sigaddset(&pipe_, SIGPIPE);
    sigset_t pending;
    sigemptyset(&pending);
    was_pending_ = sigpending(&pending) == 0 && sigismember(&pending, SIGPIPE) == 1;
    blocked_ = pthread_sigmask(SIG_BLOCK, &pipe_, &old_) == 0;
  }
  ~SigpipeGuard() {
    if (!blocked_) return;
    if (!was_pending_) {
      sigset_t pending;
      sigemptyset(&pending);
      if (sigpending(&pending) == 0 && sigismember(&pending, SIGPIPE) == 1) {
        const timespec zero{};
        const int saved_errno = errno;
        while (sigtimedwait(&pipe_, nullptr, &zero) == -1 && errno == EINTR) {
        }
        errno = saved_errno;
      }
    }
    pthread_sigmask(SIG_SETMASK, &old_, nullptr);
  }
  SigpipeGuard(const SigpipeGuard&) = delete;
  SigpipeGuard& operator=(const SigpipeGuard&) = delete;

 private:
  sigset_t pipe_{};
  sigset_t old_{};
  bool was_pending_ = false;
  bool blocked_ = false;
};

}  // namespace detail

/// One connection to a Redis server: hiredis connects and parses replies; the bytes go through the socket
/// (`MSG_NOSIGNAL`) or an OpenSSL session (include/ratelimit/redis/README.md "TLS"). After an I/O or protocol
/// failure it is broken for good (a late reply could still arrive); error replies leave it usable. Move-only;
/// one thread at a time.
class Connection {
 public:
  /// Connects (TLS: the handshake, verifying the server's certificate and name), authenticates and selects
  /// the database, all within one `connect_timeout`. Throws `BackendError` (io, timeout, or reply for a refused
  /// `AUTH` / `SELECT`); a TLS failure is io, naming what failed (e.g. "certificate verify failed: ...").
  static Connection open(const ConnectionOptions& options) {
    const auto deadline = std::chrono::steady_clock::now() + options.connect_timeout;
    const timeval connect_tv = to_timeval(options.connect_timeout);
    redisContext* raw = options.unix_socket.empty()
                            ? redisConnectWithTimeout(options.host.c_str(), options.port, connect_tv)
                            : redisConnectUnixWithTimeout(options.unix_socket.c_str(), connect_tv);
    const int saved_errno = errno;
    if (raw == nullptr) throw BackendError(BackendErrorCause::io, "cannot allocate a hiredis context");
    Connection c(raw);
    if (raw->err != 0) {
      throw BackendError(cause_of(*raw, saved_errno), "connect to " + detail::endpoint(options) + ": " + raw->errstr);
    }
    c.command_timeout_ = options.command_timeout;
    // Until logged in every wait is a poll bounded by `deadline`. TLS stays non-blocking (its reads wait in
    // poll); plain sockets block again, each read bounded by SO_RCVTIMEO.
    c.set_nonblocking(true, detail::endpoint(options));
    if (options.tls.enabled) c.start_tls(options, deadline);
    c.log_in(options, deadline);
    if (!c.tls()) c.set_nonblocking(false, detail::endpoint(options));
    if (redisSetTimeout(raw, to_timeval(options.command_timeout)) != REDIS_OK) {
      throw BackendError(BackendErrorCause::io, "cannot set the command timeout on " + detail::endpoint(options));
    }
    return c;
  }

  Connection(Connection&&) noexcept = default;
  Connection& operator=(Connection&&) noexcept = default;
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;
  ~Connection() = default;

  /// True after an I/O, timeout or protocol failure: the connection must not be used again.
  [[nodiscard]] bool broken() const noexcept { return broken_ || ctx_ == nullptr; }

  /// Sends one command and waits for its reply (both within the command timeout). Error replies are
  /// returned, not thrown. Throws `BackendError` (io, timeout, protocol) and marks the connection broken.
  Reply command(std::span<const std::string_view> args) {
    return exchange(args, Clock::now() + command_timeout_, "read: timed out");
  }
  Reply command(std::initializer_list<std::string_view> args) {
    return command(std::span<const std::string_view>(args.begin(), args.size()));
  }

  /// The socket (for `poll`).
  [[nodiscard]] int fd() const noexcept { return ctx_ ? ctx_->fd : -1; }

  /// Writes `bytes` (whole RESP commands) within the command timeout. Throws `BackendError` (then broken).
  void write_raw(std::string_view bytes) {
    check_usable();
    send_within(bytes, Clock::now() + command_timeout_, "write: timed out");
  }

  /// Reads what the socket has (waiting up to the command timeout) into the reply parser. Throws
  /// `BackendError` (then broken) on failure, end of stream or when nothing came.
  void read_some() {
    check_usable();
    receive(true);
  }

  /// The next complete reply read so far, or null. Throws `BackendError` (protocol; then broken) on bad RESP.
  Reply next_buffered_reply() {
    check_usable();
    void* raw = nullptr;
    if (redisReaderGetReply(ctx_->reader, &raw) != REDIS_OK) {
      broken_ = true;
      throw BackendError(BackendErrorCause::protocol, std::string("malformed reply: ") + ctx_->reader->errstr);
    }
    return Reply(static_cast<redisReply*>(raw));
  }

 private:
  using Clock = std::chrono::steady_clock;

  void set_nonblocking(bool on, const std::string& where) const {
    const int flags = ::fcntl(ctx_->fd, F_GETFL);
    if (flags < 0 || ::fcntl(ctx_->fd, F_SETFL, on ? flags | O_NONBLOCK : flags & ~O_NONBLOCK) != 0) {
      throw BackendError(BackendErrorCause::io, "cannot set the socket mode on " + where);
    }
  }

  /// Waits in poll until the socket has `events` (or an error); past `deadline` throws (timeout, `what`).
  void await(short events, Clock::time_point deadline, const std::string& what) {
    for (;;) {
      const auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline - Clock::now());
      if (left.count() <= 0) {
        broken_ = true;
        throw BackendError(BackendErrorCause::timeout, what);
      }
      pollfd p{ctx_->fd, events, 0};
      const int n = ::poll(&p, 1, static_cast<int>(std::min<long long>(left.count(), 1'000'000'000)));
      if (n > 0) return;  // ready, or an error the next read or write reports
      if (n < 0 && errno != EINTR) fail_raw(errno, "poll");
    }
  }

  /// AUTH and SELECT as configured, within `deadline`.
  void log_in(const ConnectionOptions& options, Clock::time_point deadline) {
    // A user without a password still authenticates (skipping AUTH would run as `default`).
    if (!options.password.empty() || !options.user.empty()) {
      std::vector<std::string_view> auth{"AUTH", options.password};
      if (!options.user.empty()) auth.insert(auth.begin() + 1, options.user);
      const Reply r = exchange(auth, deadline, "AUTH: no reply within connect_timeout");
      if (r->type == REDIS_REPLY_ERROR) {
        throw BackendError(BackendErrorCause::reply,
                           "AUTH refused by " + detail::endpoint(options) + ": " + std::string(text(*r)));
      }
    }
    if (options.database != 0) {
      const std::string db = std::to_string(options.database);
      const std::string_view select[] = {"SELECT", db};
      const Reply r = exchange(select, deadline, "SELECT: no reply within connect_timeout");
      if (r->type == REDIS_REPLY_ERROR) {
        throw BackendError(BackendErrorCause::reply, "SELECT " + db + ": " + std::string(text(*r)));
      }
    }
  }

  /// One command and its reply within `deadline` (past it: cause timeout, `what`).
  Reply exchange(std::span<const std::string_view> args, Clock::time_point deadline, const std::string& what) {
    check_usable();
    std::string bytes;
    append_resp(bytes, args);
    send_within(bytes, deadline, what);
    for (;;) {
      if (Reply r = next_buffered_reply()) return r;
      if (!tls_pending()) await(POLLIN, deadline, what);
      receive(false);
    }
  }

  /// Writes `bytes` within `deadline` (`MSG_NOSIGNAL`: a closed peer is EPIPE, not SIGPIPE).
  void send_within(std::string_view bytes, Clock::time_point deadline, const std::string& what) {
    if (tls()) return tls_send(bytes, deadline, what);
    while (!bytes.empty()) {
      const ssize_t n = ::send(ctx_->fd, bytes.data(), bytes.size(), MSG_NOSIGNAL);
      if (n >= 0) {
        bytes.remove_prefix(static_cast<std::size_t>(n));
      } else if (errno == EAGAIN || errno == EWOULDBLOCK) {
        await(POLLOUT, deadline, what);
      } else if (errno != EINTR) {
        fail_raw(errno, "write");
      }
    }
  }

  /// Feeds what the socket has to the reply parser: `wait`, waiting up to the command timeout; else what it
  /// has now. TLS waits in poll, then takes what came (a trickling record is read piecewise).
  void receive(bool wait) {
    if (tls()) {
      if (wait && !tls_pending()) await(POLLIN, Clock::now() + command_timeout_, "read: timed out");
      return tls_receive();
    }
    char buf[16 * 1024];
    for (;;) {
      const ssize_t n = ::recv(ctx_->fd, buf, sizeof buf, wait ? 0 : MSG_DONTWAIT);
      if (n > 0) return feed(buf, static_cast<std::size_t>(n));
      if (n == 0) {
        broken_ = true;
        throw BackendError(BackendErrorCause::io, "server closed the connection");
      }
      if (!wait && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
      if (errno != EINTR) fail_raw(errno, "read");
    }
  }

  void feed(const char* bytes, std::size_t n) {
    if (redisReaderFeed(ctx_->reader, bytes, n) != REDIS_OK) {
      broken_ = true;
      throw BackendError(BackendErrorCause::protocol, "reply parser refused the input");
    }
  }

#if RATELIMIT_REDIS_WITH_TLS
  using SslCtx = std::unique_ptr<SSL_CTX, detail::Free<SSL_CTX_free>>;
  using Ssl = std::unique_ptr<SSL, detail::Free<SSL_free>>;
  [[nodiscard]] bool tls() const noexcept { return ssl_ != nullptr; }

  /// OpenSSL's queued errors as one line (clearing them).
  static std::string openssl_errors() {
    std::string s;
    while (const unsigned long e = ERR_get_error()) {
      char buf[256];
      ERR_error_string_n(e, buf, sizeof buf);
      if (!s.empty()) s += "; ";
      s += buf;
    }
    return s.empty() ? std::string("no detail from OpenSSL") : s;
  }

  /// The TLS settings of a connection: CAs, optional client certificate.
  static SslCtx tls_context(const TlsOptions& t, const std::string& where) {
    ERR_clear_error();
    SslCtx ctx(SSL_CTX_new(TLS_client_method()));
    if (!ctx) throw BackendError(BackendErrorCause::io, where + "SSL_CTX_new: " + openssl_errors());
    SSL_CTX_set_min_proto_version(ctx.get(), TLS1_2_VERSION);
    SSL_CTX_set_verify(ctx.get(), SSL_VERIFY_PEER, nullptr);
    // Reads return when a record held no data (e.g. a TLS 1.3 session ticket): the poll loop waits.
    SSL_CTX_clear_mode(ctx.get(), SSL_MODE_AUTO_RETRY);
    if (!t.ca_file.empty() || !t.ca_dir.empty()) {
      if (SSL_CTX_load_verify_locations(ctx.get(), t.ca_file.empty() ? nullptr : t.ca_file.c_str(),
                                        t.ca_dir.empty() ? nullptr : t.ca_dir.c_str()) != 1) {
        throw BackendError(BackendErrorCause::io, where + "cannot load the CA file or directory (" + t.ca_file +
                                                      (t.ca_dir.empty() ? "" : " " + t.ca_dir) +
                                                      "): " + openssl_errors());
      }
    } else if (SSL_CTX_set_default_verify_paths(ctx.get()) != 1) {
      throw BackendError(BackendErrorCause::io, where + "cannot load OpenSSL's default CAs: " + openssl_errors());
    }
    if (!t.cert_file.empty()) {
      if (SSL_CTX_use_certificate_chain_file(ctx.get(), t.cert_file.c_str()) != 1 ||
          SSL_CTX_use_PrivateKey_file(ctx.get(), t.key_file.c_str(), SSL_FILETYPE_PEM) != 1 ||
          SSL_CTX_check_private_key(ctx.get()) != 1) {
        throw BackendError(BackendErrorCause::io, where + "cannot use the client certificate " + t.cert_file +
                                                      " with key " + t.key_file + ": " + openssl_errors());
      }
    }
    return ctx;
  }

  /// The TLS handshake on the connected (non-blocking) socket within `deadline`: SNI and name check.
  void start_tls(const ConnectionOptions& o, Clock::time_point deadline) {
    const TlsOptions& t = o.tls;
    const std::string where = "TLS to " + detail::endpoint(o) + ": ";
    SslCtx ctx = tls_context(t, where);
    Ssl ssl(SSL_new(ctx.get()));
    if (!ssl || SSL_set_fd(ssl.get(), ctx_->fd) != 1) {
      throw BackendError(BackendErrorCause::io, where + "SSL_new: " + openssl_errors());
    }
    const std::string name = t.server_name.empty() ? o.host : t.server_name;
    in6_addr ip{};
    const bool is_ip = ::inet_pton(AF_INET, name.c_str(), &ip) == 1 || ::inet_pton(AF_INET6, name.c_str(), &ip) == 1;
    if (is_ip) {  // an address is checked against the certificate's IP names; SNI carries host names only
      if (X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(ssl.get()), name.c_str()) != 1) {
        throw BackendError(BackendErrorCause::io, where + "bad server address " + name);
      }
    } else if (SSL_set_tlsext_host_name(ssl.get(), name.c_str()) != 1 || SSL_set1_host(ssl.get(), name.c_str()) != 1) {
      throw BackendError(BackendErrorCause::io, where + "bad server name " + name + ": " + openssl_errors());
    }
    for (;;) {
      errno = 0;
      ERR_clear_error();
      const int r = SSL_connect(ssl.get());
      if (r == 1) break;
      const int saved_errno = errno;
      const int e = SSL_get_error(ssl.get(), r);
      if (e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE) {
        await(e == SSL_ERROR_WANT_READ ? POLLIN : POLLOUT, deadline,
              where + "handshake timed out (is the port the server's tls-port?)");
        continue;
      }
      const long verify = SSL_get_verify_result(ssl.get());
      if (verify != X509_V_OK) {
        throw BackendError(BackendErrorCause::io, where + "certificate verify failed for " + name + ": " +
                                                      X509_verify_cert_error_string(verify));
      }
      const std::string detail = ERR_peek_error() != 0 ? openssl_errors()
                                 : saved_errno != 0    ? std::string(std::strerror(saved_errno))
                                                       : std::string("the server closed the connection");
      throw BackendError(BackendErrorCause::io, where + "handshake failed: " + detail);
    }
    tls_ctx_ = std::move(ctx);
    ssl_ = std::move(ssl);
  }

  /// Why a TLS call failed; throws (and marks the connection broken).
  [[noreturn]] void fail_tls(int r, int saved_errno, const char* what) {
    broken_ = true;
    const int e = SSL_get_error(ssl_.get(), r);
    if ((e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE) &&
        (saved_errno == EAGAIN || saved_errno == EWOULDBLOCK)) {
      throw BackendError(BackendErrorCause::timeout, std::string(what) + ": timed out");
    }
    if (e == SSL_ERROR_ZERO_RETURN || (e == SSL_ERROR_SYSCALL && saved_errno == 0)) {
      throw BackendError(BackendErrorCause::io, "server closed the connection");
    }
    const std::string detail = ERR_peek_error() != 0 ? openssl_errors() : std::string(std::strerror(saved_errno));
    throw BackendError(BackendErrorCause::io, std::string("TLS ") + what + ": " + detail);
  }

  void tls_send(std::string_view bytes, Clock::time_point deadline, const std::string& what) {
    while (!bytes.empty()) {
      int r = 0;
      int saved_errno = 0;
      {
        const detail::SigpipeGuard no_sigpipe;  // OpenSSL writes with write(2)
        errno = 0;
        ERR_clear_error();
        r = SSL_write(ssl_.get(), bytes.data(),
                      static_cast<int>(bytes.size() < (1u << 30) ? bytes.size() : (1u << 30)));
        saved_errno = errno;
      }
      if (r > 0) {
        bytes.remove_prefix(static_cast<std::size_t>(r));
        continue;
      }
      const int e = SSL_get_error(ssl_.get(), r);
      if (e != SSL_ERROR_WANT_READ && e != SSL_ERROR_WANT_WRITE) fail_tls(r, saved_errno, "write");
      await(e == SSL_ERROR_WANT_READ ? POLLIN : POLLOUT, deadline, what);  // the same bytes again, then
    }
  }

  [[nodiscard]] bool tls_pending() const noexcept { return ssl_ && SSL_pending(ssl_.get()) > 0; }

  /// What the non-blocking socket and the session have now (maybe nothing), decrypted into the parser.
  void tls_receive() {
    char buf[16 * 1024];
    for (;;) {
      errno = 0;
      ERR_clear_error();
      const int r = SSL_read(ssl_.get(), buf, sizeof buf);
      const int saved_errno = errno;
      if (r > 0) {
        feed(buf, static_cast<std::size_t>(r));
        continue;
      }
      const int e = SSL_get_error(ssl_.get(), r);
      if (e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE) return;  // nothing more for now
      fail_tls(r, saved_errno, "read");
    }
  }
#else
  [[nodiscard]] static constexpr bool tls() noexcept { return false; }
  [[noreturn]] static void start_tls(const ConnectionOptions&, Clock::time_point) {
    throw BackendError(BackendErrorCause::io, "TLS requested, but this build has no TLS (built without OpenSSL)");
  }
  [[noreturn]] static void tls_send(std::string_view, Clock::time_point, const std::string&) {
    throw BackendError(BackendErrorCause::io, "no TLS");
  }
  [[noreturn]] static void tls_receive() { throw BackendError(BackendErrorCause::io, "no TLS"); }
  [[nodiscard]] static constexpr bool tls_pending() noexcept { return false; }
#endif

  explicit Connection(redisContext* raw) : ctx_(raw) {}

  static timeval to_timeval(std::chrono::milliseconds d) {
    const auto us = std::chrono::duration_cast<std::chrono::microseconds>(d).count();
    timeval tv{};
    tv.tv_sec = static_cast<decltype(tv.tv_sec)>(us / 1'000'000);
    tv.tv_usec = static_cast<decltype(tv.tv_usec)>(us % 1'000'000);
    return tv;
  }

  /// hiredis reports a timeout as an I/O error with EAGAIN or ETIMEDOUT.
  static BackendErrorCause cause_of(const redisContext& c, int saved_errno) noexcept {
    if (c.err == REDIS_ERR_PROTOCOL) return BackendErrorCause::protocol;
    if (c.err == REDIS_ERR_IO) {
      if (saved_errno == EAGAIN || saved_errno == EWOULDBLOCK || saved_errno == ETIMEDOUT) {
        return BackendErrorCause::timeout;
      }
      const std::string_view s(c.errstr);
      if (s.find("timed out") != std::string_view::npos ||
          s.find("temporarily unavailable") != std::string_view::npos) {
        return BackendErrorCause::timeout;
      }
    }
    return BackendErrorCause::io;
  }

  void check_usable() const {
    if (broken()) throw BackendError(BackendErrorCause::io, "connection is broken");
  }

  [[noreturn]] void fail_raw(int saved_errno, const char* what) {
    broken_ = true;
    const bool timed_out = saved_errno == EAGAIN || saved_errno == EWOULDBLOCK;
    throw BackendError(timed_out ? BackendErrorCause::timeout : BackendErrorCause::io,
                       std::string(what) + ": " + (timed_out ? "timed out" : std::strerror(saved_errno)));
  }

  std::unique_ptr<redisContext, detail::Free<redisFree>> ctx_;
#if RATELIMIT_REDIS_WITH_TLS
  // After ctx_: the session goes before the socket closes (SSL_free does not close it).
  SslCtx tls_ctx_;
  Ssl ssl_;
#endif
  std::chrono::milliseconds command_timeout_{0};  // TLS: bounds each wait for the socket
  bool broken_ = false;
};

}  // namespace engine
}  // namespace RATELIMIT_REDIS_ABI_NAMESPACE
}  // namespace ratelimit::redis
