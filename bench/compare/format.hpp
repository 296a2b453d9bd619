// Number formatting shared by the compare programs' tables.
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>

namespace bench::compare {

/// `value` with `precision` significant digits (printf %g).
inline std::string number(double value, int precision = 3) {
  char buf[48];
  std::snprintf(buf, sizeof buf, "%.*g", precision, value);
  return buf;
}

/// A duration for people: "750 ms", "1.5 s", "12 us".
inline std::string duration(std::int64_t ns) {
  const double v = static_cast<double>(ns);
  if (ns == 0) return "0";
  if (ns < 1'000) return number(v) + " ns";
  if (ns < 1'000'000) return number(v / 1e3) + " us";
  if (ns < 1'000'000'000) return number(v / 1e6) + " ms";
  return number(v / 1e9) + " s";
}

/// `value` as a percentage, one decimal: "99.5 %".
inline std::string percent(double share) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f %%", 100.0 * share);
  return buf;
}

/// A CSV field: quoted when it holds a comma, a quote or a line break.
inline std::string csv_field(const std::string& s) {
  if (s.find_first_of(",\"\n") == std::string::npos) return s;
  std::string out = "\"";
  for (const char c : s) out += c == '"' ? std::string("\"\"") : std::string(1, c);
  return out + "\"";
}

}  // namespace bench::compare
