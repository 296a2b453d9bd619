// Number formatting shared by the compare programs' tables.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <string>

namespace bench::compare {

/// A whole number with thousands separated: "1,234,567".
inline std::string grouped(long long value) {
  const unsigned long long magnitude =
      value < 0 ? 0ULL - static_cast<unsigned long long>(value) : static_cast<unsigned long long>(value);
  const std::string digits = std::to_string(magnitude);
  std::string out = value < 0 ? "-" : "";
  for (std::size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return out;
}

/// `value` for people, never in scientific notation: from 1,000 on a whole number with thousands
/// separated, below it `precision` significant digits (at most 9 decimals), trailing zeros dropped.
inline std::string number(double value, int precision = 3) {
  if (!std::isfinite(value)) return "-";
  const double magnitude = std::fabs(value);
  if (magnitude >= 999.5 || magnitude >= std::pow(10.0, precision)) return grouped(std::llround(value));
  if (magnitude == 0) return "0";
  const int decimals = std::clamp(precision - 1 - static_cast<int>(std::floor(std::log10(magnitude))), 0, 9);
  char buf[48];
  std::snprintf(buf, sizeof buf, "%.*f", decimals, value);
  std::string out = buf;
  if (out.find('.') != std::string::npos) {
    out.erase(out.find_last_not_of('0') + 1);
    if (out.back() == '.') out.pop_back();
  }
  return out == "-0" ? "0" : out;
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

/// `value` for CSV: fixed-point, up to 9 decimals, trailing zeros dropped ("1140.5", "0.000000001").
inline std::string decimal(double value) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.9f", value);
  std::string out = buf;
  out.erase(out.find_last_not_of('0') + 1);
  if (out.back() == '.') out.pop_back();
  return out == "-0" ? "0" : out;
}

/// A Markdown table cell: '|' escaped, so a key holding one keeps the table's columns.
inline std::string markdown_cell(const std::string& s) {
  std::string out;
  for (const char c : s) out += c == '|' ? std::string("\\|") : std::string(1, c);
  return out;
}

/// A CSV field: quoted when it holds a comma, a quote or a line break.
inline std::string csv_field(const std::string& s) {
  if (s.find_first_of(",\"\n") == std::string::npos) return s;
  std::string out = "\"";
  for (const char c : s) out += c == '"' ? std::string("\"\"") : std::string(1, c);
  return out + "\"";
}

}  // namespace bench::compare
