// Command-line flags of the compare programs: `--name value` pairs, each name allowed once, checked
// against the names a program takes. Wrong input throws `std::invalid_argument` naming the flag.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <map>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

namespace bench::compare {

class Options {
 public:
  /// Reads `argv`: `--name value` for every name in `known`; other arguments are positional.
  Options(int argc, char** argv, const std::set<std::string>& known) {
    for (int i = 1; i < argc; ++i) {
      const std::string arg = argv[i];
      if (arg.rfind("--", 0) != 0) {
        positional_.push_back(arg);
        continue;
      }
      if (known.count(arg) == 0) throw std::invalid_argument(arg + ": unknown flag");
      if (i + 1 == argc) throw std::invalid_argument(arg + ": needs a value");
      values_[arg] = argv[++i];
    }
  }

  [[nodiscard]] std::string text(const std::string& name, const std::string& fallback) const {
    const auto it = values_.find(name);
    return it == values_.end() ? fallback : it->second;
  }

  /// A whole number in [min, max].
  [[nodiscard]] std::int64_t integer(const std::string& name, std::int64_t fallback, std::int64_t min,
                                     std::int64_t max) const {
    const auto it = values_.find(name);
    if (it == values_.end()) return fallback;
    std::size_t used = 0;
    long long v = 0;
    try {
      v = std::stoll(it->second, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used != it->second.size() || used == 0 || v < min || v > max) {
      throw std::invalid_argument(name + ": must be a whole number in [" + std::to_string(min) + ", " +
                                  std::to_string(max) + "], got '" + it->second + "'");
    }
    return v;
  }

  /// The longest period the compare programs take: the traces span up to ~55 periods, and the probes for
  /// the earliest admission double from there, all in int64 nanoseconds.
  static constexpr double kMaxPeriodSeconds = 1e6;

  /// A period in seconds as whole nanoseconds, in [1 ns, kMaxPeriodSeconds].
  [[nodiscard]] std::int64_t period_ns(const std::string& name, double fallback_seconds) const {
    const auto it = values_.find(name);
    double seconds = fallback_seconds;
    if (it != values_.end()) {
      std::size_t used = 0;
      try {
        seconds = std::stod(it->second, &used);
      } catch (const std::exception&) {
        used = 0;
      }
      if (used != it->second.size() || used == 0) seconds = std::nan("");
    }
    const double ns = std::round(seconds * 1e9);
    if (!std::isfinite(seconds) || ns < 1 || seconds > kMaxPeriodSeconds) {
      throw std::invalid_argument(name + ": must be a number of seconds in [1e-9, 1000000], got '" +
                                  (it == values_.end() ? std::to_string(fallback_seconds) : it->second) + "'");
    }
    return static_cast<std::int64_t>(ns);
  }

  [[nodiscard]] const std::vector<std::string>& positional() const { return positional_; }

 private:
  std::map<std::string, std::string> values_;
  std::vector<std::string> positional_;
};

/// Runs a program's `body`; what it throws is printed as "<program>: <message>" and exits 2 for bad input
/// (`std::invalid_argument`), 1 for any other failure.
template <class Body>
int guarded_main(const char* program, Body body) {
  try {
    return body();
  } catch (const std::invalid_argument& e) {
    std::fprintf(stderr, "%s: %s\n", program, e.what());
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s: %s\n", program, e.what());
    return 1;
  }
}

}  // namespace bench::compare
