#pragma once

// Replays an access log through a limiter on a ManualClock set to each line's timestamp: a dry run of a
// policy on recorded traffic. Malformed lines are counted, never fatal. Servers with several workers write
// lines slightly out of order (the sample log: up to 59 s), so the entries are put in time order first.

#include <algorithm>
#include <cstdint>
#include <istream>
#include <map>
#include <string>
#include <vector>

#include <ratelimit/ratelimit.hpp>

#include "access_log.hpp"

namespace replay {

/// Which part of a request names the limited client.
enum class KeyField { client, user_agent, target };

struct ClientCounts {
  std::int64_t requests = 0;
  std::int64_t denied = 0;
};

struct Report {
  std::int64_t lines = 0;
  std::int64_t malformed = 0;
  std::int64_t out_of_order = 0;  // lines earlier than the line before them
  std::int64_t admitted = 0;
  std::int64_t denied = 0;
  std::map<std::string, ClientCounts> clients;  // by key
};

inline const std::string& key_of(const access_log::Entry& e, KeyField field) {
  switch (field) {
    case KeyField::user_agent: return e.user_agent;
    case KeyField::target: return e.target;
    case KeyField::client: break;
  }
  return e.client;
}

/// Parses every line of `log`, in time order; counts malformed and out-of-order lines in `report`.
inline std::vector<access_log::Entry> read_entries(std::istream& log, Report& report) {
  std::vector<access_log::Entry> entries;
  std::string line;
  while (std::getline(log, line)) {
    if (line.empty()) continue;
    ++report.lines;
    auto entry = access_log::parse_line(line);
    if (!entry) {
      ++report.malformed;
      continue;
    }
    if (!entries.empty() && entry->time < entries.back().time) ++report.out_of_order;
    entries.push_back(std::move(*entry));
  }
  std::stable_sort(entries.begin(), entries.end(), [](const auto& a, const auto& b) { return a.time < b.time; });
  return entries;
}

/// Feeds every request of `log`, in time order, to `limiter` at the request's time on `clock` (which the
/// limiter reads).
template <ratelimit::Limiter L>
Report run(std::istream& log, L& limiter, ratelimit::ManualClock& clock, KeyField field = KeyField::client) {
  Report report;
  for (const access_log::Entry& entry : read_entries(log, report)) {
    clock.set(ratelimit::ManualClock::time_point(entry.time.time_since_epoch()));
    const std::string& key = key_of(entry, field);
    const bool allowed = limiter.allow(key).allowed;
    ClientCounts& counts = report.clients[key];
    ++counts.requests;
    if (allowed) {
      ++report.admitted;
    } else {
      ++counts.denied;
      ++report.denied;
    }
  }
  return report;
}

}  // namespace replay
