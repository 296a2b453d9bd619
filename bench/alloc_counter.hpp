#pragma once

// Counts the bytes the process holds on the heap, by replacing global operator new/delete
// (alloc_counter.cpp). Used to measure memory per key exactly, without RSS noise.

#include <cstddef>

namespace bench {
/// Bytes this thread allocated through operator new minus those it freed (usable sizes, so allocator
/// rounding counts); compare two readings taken on one thread. Under a sanitizer: the bytes the whole process
/// holds, as its runtime counts them (no replacement there).
std::size_t heap_bytes() noexcept;
}  // namespace bench
