// The compare programs' output files: written whole, and any failure to write them is an error.
#pragma once

#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <string>

namespace bench::compare {

/// Throws `std::invalid_argument` ("--out: ...") unless `dir` is an existing directory.
inline void require_directory(const std::string& dir) {
  if (!std::filesystem::is_directory(dir)) throw std::invalid_argument("--out: " + dir + " is not a directory");
}

/// Writes `text` to `path`, replacing it. Throws `std::runtime_error` when the file cannot be written.
inline void write_text(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << text;
  out.flush();
  if (!out) throw std::runtime_error("cannot write " + path);
}

}  // namespace bench::compare
