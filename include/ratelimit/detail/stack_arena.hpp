#pragma once

/// @file
/// Stack memory for the few small arrays of one layered or joint check, so that a check of present keys
/// allocates nothing on the heap.

#include <array>
#include <cstddef>
#include <memory_resource>

namespace ratelimit::detail {

/// 1 KiB on the stack behind a `std::pmr::monotonic_buffer_resource`: the arrays of a check over up to
/// about 8 layers fit; more spill over to `new` (then freed with the arena). Not thread-safe; one per
/// call, not copyable.
struct StackArena {
  std::array<std::byte, 1024> bytes;
  std::pmr::monotonic_buffer_resource resource{bytes.data(), bytes.size()};
};

}  // namespace ratelimit::detail
