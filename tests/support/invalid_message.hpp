// The message of the std::invalid_argument a call throws (include/ratelimit/README.md "Keys, costs and validation": it
// starts with the field's name), or a text that says what happened instead; and the prefix test the suites assert with.
#pragma once

#include <stdexcept>
#include <string>

namespace ratelimit_test {

template <class Fn>
std::string invalid_message(Fn&& fn) {
  try {
    fn();
  } catch (const std::invalid_argument& e) {
    return e.what();
  } catch (...) {
    return "an exception other than std::invalid_argument";
  }
  return "no exception";
}

inline bool starts_with(const std::string& s, const std::string& prefix) { return s.rfind(prefix, 0) == 0; }

}  // namespace ratelimit_test
