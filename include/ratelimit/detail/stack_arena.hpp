#pragma once

/// @file
/// Stack memory for the few small arrays of one layered or joint check, so that a check of present keys
/// allocates nothing on the heap.

#include <array>
#include <cstddef>
#include <memory_resource>
#include <new>
#include <span>
#include <type_traits>

namespace ratelimit::detail {

/// 1 KiB on the stack behind a `std::pmr::monotonic_buffer_resource`: the arrays of a check over up to
/// about 8 layers fit; more spill over to `new` (then freed with the arena). Not thread-safe; one per
/// call, not copyable.
struct StackArena {
  std::array<std::byte, 1024> bytes;
  std::pmr::monotonic_buffer_resource resource{bytes.data(), bytes.size()};

  /// `count` value-initialised `T`s in this arena, which holds them until it ends (nothing destroys
  /// them, so `T` must be trivially destructible). Throws `std::bad_alloc` when `new` does. A plain
  /// array where the size is known: each `std::pmr::vector<T>` costs every including unit its
  /// instantiation.
  template <class T>
  [[nodiscard]] std::span<T> array(std::size_t count) {
    static_assert(std::is_trivially_destructible_v<T>);
    T* first = static_cast<T*>(resource.allocate(count * sizeof(T), alignof(T)));
    for (std::size_t i = 0; i < count; ++i) ::new (static_cast<void*>(first + i)) T{};
    return {first, count};
  }
};

}  // namespace ratelimit::detail
