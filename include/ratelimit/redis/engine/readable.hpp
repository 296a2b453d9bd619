#pragma once

/// @file
/// The TLS files of `ConnectionOptions::tls`, checked when the pool is made: a path that cannot be read
/// fails at construction, naming the field, not at the first connect of a running service.

#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <string>
#include <string_view>
#include <system_error>

#include "ratelimit/redis/abi.hpp"

namespace ratelimit::redis {
inline namespace RATELIMIT_REDIS_ABI_NAMESPACE {
namespace detail {

/// Throws `std::invalid_argument` naming `field` unless `path` is empty or a regular file this process can
/// read (opened, and its first byte read: a directory, an empty file, a FIFO or a device is refused; opening
/// a FIFO would wait for a writer).
inline void check_readable_file(const std::string& path, std::string_view field) {
  if (path.empty()) return;
  std::error_code ec;
  if (std::filesystem::exists(path, ec) && !std::filesystem::is_regular_file(path, ec)) {
    throw std::invalid_argument(std::string(field) + ": \"" + path + "\" is not a regular file, not a PEM file");
  }
  std::ifstream in(path, std::ios::binary);
  if (!in.is_open()) {
    throw std::invalid_argument(std::string(field) + ": cannot open \"" + path + "\" for reading");
  }
  if (in.peek() == std::ifstream::traits_type::eof()) {
    throw std::invalid_argument(std::string(field) + ": \"" + path + "\" is a directory or empty, not a PEM file");
  }
}

/// Throws `std::invalid_argument` naming `field` unless `path` is empty or a directory this process can list.
inline void check_readable_directory(const std::string& path, std::string_view field) {
  if (path.empty()) return;
  std::error_code ec;
  if (std::filesystem::exists(path, ec) && !std::filesystem::is_directory(path, ec)) {
    throw std::invalid_argument(std::string(field) + ": \"" + path + "\" is not a directory");
  }
  const std::filesystem::directory_iterator it(path, ec);
  if (ec)
    throw std::invalid_argument(std::string(field) + ": cannot read the directory \"" + path + "\": " + ec.message());
}

}  // namespace detail
}  // namespace RATELIMIT_REDIS_ABI_NAMESPACE
}  // namespace ratelimit::redis
