// Malformed replies become BackendError, never a crash or a nonsense decision.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <limits>
#include <string>

#include <ratelimit/redis.hpp>

namespace {

using ratelimit::BackendError;
using ratelimit::BackendErrorCause;
using ratelimit::redis::detail::parse_decision;

// A hand-built reply (hiredis's struct, no server): the scripts' 40-byte string of five little-endian
// doubles, struct.pack("<ddddd", ...).
struct FakeReply {
  std::string bytes;
  redisReply root{};

  explicit FakeReply(std::initializer_list<double> values) {
    for (const double v : values) {
      auto bits = std::bit_cast<std::uint64_t>(v);
      for (int b = 0; b < 8; ++b, bits >>= 8) bytes.push_back(static_cast<char>(bits & 0xff));
    }
    root.type = REDIS_REPLY_STRING;
    root.str = bytes.data();
    root.len = bytes.size();
  }
};

BackendErrorCause cause_of(const redisReply& r) {
  try {
    (void)parse_decision(r, 5);
  } catch (const BackendError& e) {
    return e.cause();
  }
  ADD_FAILURE() << "no BackendError";
  return BackendErrorCause::io;
}

TEST(ReplyParsing, WellFormed) {
  FakeReply ok{0, 5, 0, 1500, 3000};
  const auto d = parse_decision(ok.root, 5);
  EXPECT_FALSE(d.allowed);
  EXPECT_EQ(d.remaining, 0);
  EXPECT_EQ(d.retry_after, 1500);
  EXPECT_EQ(d.reset_after, 3000);
  FakeReply never_reply{0, 5, 2, -1, 10};
  EXPECT_EQ(parse_decision(never_reply.root, 5).retry_after, ratelimit::TickDecision::never);
  const auto dec = ratelimit::to_decision(parse_decision(never_reply.root, 5), 1000);
  EXPECT_EQ(dec.retry_after, ratelimit::Decision::never);
  EXPECT_EQ(dec.reset_after, std::chrono::microseconds(10));
}

TEST(ReplyParsing, MalformedShapesAndValues) {
  EXPECT_EQ(cause_of(FakeReply{1, 5, 4, 0}.root), BackendErrorCause::protocol);         // 4 elements
  EXPECT_EQ(cause_of(FakeReply{2, 5, 4, 0, 0}.root), BackendErrorCause::protocol);      // allowed not 0/1
  EXPECT_EQ(cause_of(FakeReply{1, 6, 4, 0, 0}.root), BackendErrorCause::protocol);      // wrong limit
  EXPECT_EQ(cause_of(FakeReply{1, 5, 6, 0, 0}.root), BackendErrorCause::protocol);      // remaining > limit
  EXPECT_EQ(cause_of(FakeReply{1, 5, -1, 0, 0}.root), BackendErrorCause::protocol);     // remaining < 0
  EXPECT_EQ(cause_of(FakeReply{0, 5, 0, -2, 0}.root), BackendErrorCause::protocol);     // retry < -1
  EXPECT_EQ(cause_of(FakeReply{1, 5, 0, 7, 0}.root), BackendErrorCause::protocol);      // allowed with a wait
  EXPECT_EQ(cause_of(FakeReply{1, 5, 0, 0, -5}.root), BackendErrorCause::protocol);     // reset < 0
  EXPECT_EQ(cause_of(FakeReply{1, 5, 0, 0, 0x1p52}.root), BackendErrorCause::protocol);     // overflows ns

  EXPECT_EQ(cause_of(FakeReply{1, 5, 4.5, 0, 0}.root), BackendErrorCause::protocol);    // not an integer
  EXPECT_EQ(cause_of(FakeReply{1, 5, 4, 0, 0x1p54}.root), BackendErrorCause::protocol);  // beyond 2^53
  EXPECT_EQ(cause_of(FakeReply{1, 5, std::nan(""), 0, 0}.root), BackendErrorCause::protocol);
  EXPECT_EQ(cause_of(FakeReply{1, 5, 4, 0, std::numeric_limits<double>::infinity()}.root), BackendErrorCause::protocol);
  FakeReply short_string{1, 5, 4, 0, 0};
  short_string.root.len = 39;
  EXPECT_EQ(cause_of(short_string.root), BackendErrorCause::protocol);
  FakeReply wrong_type{1, 5, 4, 0, 0};
  wrong_type.root.type = REDIS_REPLY_STATUS;
  EXPECT_EQ(cause_of(wrong_type.root), BackendErrorCause::protocol);
  redisReply integers{};  // the array of five integers older scripts replied
  integers.type = REDIS_REPLY_ARRAY;
  EXPECT_EQ(cause_of(integers), BackendErrorCause::protocol);

  redisReply nil{};
  nil.type = REDIS_REPLY_NIL;
  EXPECT_EQ(cause_of(nil), BackendErrorCause::protocol);
  redisReply status{};
  char ok[] = "OK";
  status.type = REDIS_REPLY_STATUS;
  status.str = ok;
  status.len = 2;
  EXPECT_EQ(cause_of(status), BackendErrorCause::protocol);

  redisReply error{};
  char msg[] = "ERR user_script:1: boom";
  error.type = REDIS_REPLY_ERROR;
  error.str = msg;
  error.len = std::strlen(msg);
  EXPECT_EQ(cause_of(error), BackendErrorCause::reply);
  try {
    (void)parse_decision(error, 5);
  } catch (const BackendError& e) {
    EXPECT_STREQ(e.what(), "redis reply: ERR user_script:1: boom");
  }
}

}  // namespace
