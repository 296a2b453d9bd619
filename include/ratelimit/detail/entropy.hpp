#pragma once

/// @file
/// Seeds for the keyed hashes of the in-memory tables: words from the operating system's entropy, so
/// that a client cannot predict the hash and send keys that collide (include/ratelimit/README.md "Hostile input and
/// faults"). getentropy(3) where the system has it (Linux, macOS, the BSDs), `std::random_device` elsewhere: the same
/// source without the compile cost of `<random>`.

#include <cstddef>
#include <cstdint>
#include <stdexcept>

#if __has_include(<sys/random.h>)
#include <sys/random.h>
#define RATELIMIT_DETAIL_GETENTROPY 1
#else
#include <random>
#endif

namespace ratelimit::detail {

/// Fills `words[0, count)` with independent random bits from the operating system. Throws
/// `std::runtime_error` when the system has no entropy to give.
inline void fill_with_entropy(std::uint64_t* words, std::size_t count) {
#ifdef RATELIMIT_DETAIL_GETENTROPY
  // At most 256 bytes per call: getentropy's limit.
  for (std::size_t done = 0; done < count; done += 32) {
    const std::size_t n = count - done < 32 ? count - done : 32;
    if (getentropy(words + done, n * sizeof(std::uint64_t)) != 0) {
      throw std::runtime_error("ratelimit: getentropy failed: no random seed for the key hash");
    }
  }
#else
  std::random_device entropy;
  for (std::size_t i = 0; i < count; ++i) words[i] = (std::uint64_t{entropy()} << 32) | entropy();
#endif
}

}  // namespace ratelimit::detail
