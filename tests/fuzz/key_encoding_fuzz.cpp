// libFuzzer target: the Redis key encoding (include/ratelimit/README.md "Redis contract"). For two arbitrary byte
// strings a and b: encode is injective (encode(a) == encode(b) only when a == b), decode inverts it, decode accepts
// only what encode produces, and every Redis key of one limiter key (each policy, each suffix, any brace-free prefix)
// hashes to the one cluster slot of its encoded key.
#include <fuzzer/FuzzedDataProvider.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

#include <ratelimit/redis.hpp>

namespace {

using ratelimit::redis::detail::decode_key;
using ratelimit::redis::detail::encode_key;
using ratelimit::redis::detail::redis_key;

void check(bool ok, const char* what) {
  if (ok) return;
  std::fprintf(stderr, "key_encoding_fuzz: %s\n", what);
  std::abort();
}

// CRC16-XMODEM of Redis Cluster, bit by bit (cluster specification, "Keys distribution model").
int slot_of(std::string_view bytes) {
  std::uint16_t crc = 0;
  for (const char ch : bytes) {
    crc = static_cast<std::uint16_t>(crc ^ (static_cast<unsigned char>(ch) << 8));
    for (int i = 0; i < 8; ++i) {
      crc = static_cast<std::uint16_t>((crc & 0x8000) != 0 ? (crc << 1) ^ 0x1021 : crc << 1);
    }
  }
  return crc % 16384;
}

// What Redis hashes: the bytes between the first '{' and the next '}', when that is non-empty.
std::string_view hashed_part(std::string_view key) {
  const auto open = key.find('{');
  if (open == std::string_view::npos) return key;
  const auto close = key.find('}', open + 1);
  if (close == std::string_view::npos || close == open + 1) return key;
  return key.substr(open + 1, close - open - 1);
}

constexpr std::string_view kKinds[] = {"fixed_window", "sliding_window_log", "sliding_window_counter", "token_bucket",
                                       "gcra"};
constexpr std::string_view kSuffixes[] = {":state", ":log", ""};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  FuzzedDataProvider in(data, size);
  std::string prefix = in.ConsumeRandomLengthString(16);
  for (char& c : prefix) {
    if (c == '{' || c == '}') c = '_';  // the limiter refuses braces in the prefix
  }
  const std::string a = in.ConsumeRandomLengthString(256);
  const std::string b = in.ConsumeRemainingBytesAsString();

  const std::string ea = encode_key(a), eb = encode_key(b);
  check((ea == eb) == (a == b), "encode is not injective");
  check(!ea.empty() && ea.find('}') == std::string::npos, "encoded key is empty or holds '}'");
  check(decode_key(ea) == a, "decode(encode(a)) != a");
  // decode accepts exactly encode's image: whatever it accepts re-encodes to the same bytes.
  if (const auto back = decode_key(b)) check(encode_key(*back) == b, "decode accepted a non-canonical string");

  const int slot = slot_of(ea);
  for (const auto kind : kKinds) {
    for (const auto suffix : kSuffixes) {
      const std::string ka = redis_key(prefix, kind, a, suffix);
      check(hashed_part(ka) == ea, "the hash tag is not exactly the encoded key");
      check(slot_of(hashed_part(ka)) == slot, "two Redis keys of one limiter key in different slots");
      check((ka == redis_key(prefix, kind, b, suffix)) == (a == b), "two user keys share a Redis key");
    }
  }
  return 0;
}
