// libFuzzer target: parsing of Redis replies. The input is raw RESP bytes from a (hostile or broken)
// server, read by hiredis's own reader; every reply it yields goes to parse_decision, which must return
// a decision that keeps the contract or throw BackendError (cause reply or protocol), never crash.
#include <hiredis/hiredis.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>

#include <ratelimit/redis.hpp>

namespace {

void check(bool ok, const char* what) {
  if (ok) return;
  std::fprintf(stderr, "reply_fuzz: %s\n", what);
  std::abort();
}

struct ReaderDeleter {
  void operator()(redisReader* r) const noexcept { redisReaderFree(r); }
};

// hiredis 0.14's reader allocates a multi-bulk's element array from the declared count before reading
// any element ("*720368542\r\n" asks for 5.7 GB; hiredis 1.0 caps it with maxelements). That is the
// reader's business, not the parser's under test, so inputs declaring more than 4096 elements or bytes
// are skipped.
bool declares_huge_length(const std::uint8_t* data, std::size_t size) {
  for (std::size_t i = 0; i < size; ++i) {
    if (data[i] != '*' && data[i] != '$' && data[i] != '%' && data[i] != '~' && data[i] != '>') continue;
    std::uint64_t n = 0;
    for (std::size_t j = i + 1; j < size && data[j] >= '0' && data[j] <= '9'; ++j) {
      n = n * 10 + (data[j] - '0');
      if (n > 4096) return true;
    }
  }
  return false;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size < 1 || declares_huge_length(data, size)) return 0;
  // The first byte picks the limit the limiter expects (a script for another policy would differ).
  const std::int64_t limit = data[0] % 8 == 0 ? (std::int64_t{1} << 53) - 1 : data[0] % 8;
  std::unique_ptr<redisReader, ReaderDeleter> reader(redisReaderCreate());
  check(reader != nullptr, "redisReaderCreate");
  if (redisReaderFeed(reader.get(), reinterpret_cast<const char*>(data + 1), size - 1) != REDIS_OK) return 0;
  for (int i = 0; i < 64; ++i) {
    void* raw = nullptr;
    if (redisReaderGetReply(reader.get(), &raw) != REDIS_OK || raw == nullptr) break;  // protocol error / need more
    const ratelimit::redis::engine::Reply reply(static_cast<redisReply*>(raw));
    try {
      const ratelimit::TickDecision d = ratelimit::redis::detail::parse_decision(*reply, limit);
      check(d.limit == limit, "limit");
      check(d.remaining >= 0 && d.remaining <= d.limit, "remaining out of range");
      check(d.retry_after >= 0 && d.reset_after >= 0, "negative duration");
      check(!d.allowed || d.retry_after == 0, "allowed with a wait");
      const ratelimit::Decision dec = ratelimit::to_decision(d, 1000);  // must not overflow (UBSan)
      check(dec.retry_after.count() >= 0 && dec.reset_after.count() >= 0, "to_decision");
    } catch (const ratelimit::BackendError& e) {
      check(e.cause() == ratelimit::BackendErrorCause::reply || e.cause() == ratelimit::BackendErrorCause::protocol,
            "unexpected cause");
    }
    (void)ratelimit::redis::engine::is_error(*reply, "NOSCRIPT");
    (void)ratelimit::redis::engine::text(*reply);
  }
  return 0;
}
