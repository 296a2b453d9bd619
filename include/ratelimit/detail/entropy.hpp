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
#include <fcntl.h>
#include <sys/random.h>
#include <unistd.h>

#include <cerrno>
#define RATELIMIT_DETAIL_GETENTROPY 1
#else
#include <random>
#endif

namespace ratelimit::detail {

#ifdef RATELIMIT_DETAIL_GETENTROPY
/// Reads `bytes` bytes of /dev/urandom into `out`; false when it cannot be opened or read.
inline bool read_urandom(void* out, std::size_t bytes) noexcept {
  const int fd = ::open("/dev/urandom", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  auto* at = static_cast<unsigned char*>(out);
  while (bytes > 0) {
    const ssize_t n = ::read(fd, at, bytes);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    at += n;
    bytes -= static_cast<std::size_t>(n);
  }
  ::close(fd);
  return bytes == 0;
}
#endif

/// Fills `words[0, count)` with independent random bits from the operating system. Throws
/// `std::runtime_error` when the system has no entropy to give.
inline void fill_with_entropy(std::uint64_t* words, std::size_t count) {
#ifdef RATELIMIT_DETAIL_GETENTROPY
  // At most 256 bytes per call: getentropy's limit. Where it fails although the system has entropy (a kernel
  // before 3.17, a sandbox refusing getrandom), /dev/urandom, which std::random_device reads there too.
  for (std::size_t done = 0; done < count; done += 32) {
    const std::size_t n = count - done < 32 ? count - done : 32;
    if (getentropy(words + done, n * sizeof(std::uint64_t)) != 0 &&
        !read_urandom(words + done, n * sizeof(std::uint64_t))) {
      throw std::runtime_error("ratelimit: neither getentropy nor /dev/urandom gave a random seed for the key hash");
    }
  }
#else
  std::random_device entropy;
  for (std::size_t i = 0; i < count; ++i) words[i] = (std::uint64_t{entropy()} << 32) | entropy();
#endif
}

}  // namespace ratelimit::detail
