// examples: RemoteQuotaLimiter with cpp-httplib (the library itself knows no HTTP client): send a request only when
// the limiter admits it, and feed it the response (include/ratelimit/http/README.md "Calling someone else's API").
#pragma once

#include <httplib.h>

#include <chrono>
#include <optional>
#include <string>
#include <string_view>

#include <ratelimit/http/remote_quota.hpp>

namespace example {

/// What `get_steered` did: sent (with the response, when one came) or waited.
struct Steered {
  /// True when the request was admitted and sent.
  bool sent = false;
  /// The response's status when one came; empty when not sent or on a transport error.
  std::optional<int> status;
  /// When not sent: how long the limiter says to wait.
  std::chrono::nanoseconds wait{0};
};

/// GET `path` on `client` if `remote` admits a request for `partition` now; the response's status and header fields
/// (httplib::Headers is a multimap of name/value pairs, which `record` reads as is) go back to the limiter; on a
/// transport error the ticket is released (no response will come; what it spent stays spent).
template <class C>
Steered get_steered(ratelimit::http::RemoteQuotaLimiter<C>& remote, std::string_view partition, httplib::Client& client,
                    const std::string& path) {
  const ratelimit::http::RemoteAdmission admission = remote.try_acquire(partition);
  if (!admission) return {.sent = false, .status = std::nullopt, .wait = admission.retry_after};
  const httplib::Result res = client.Get(path);
  if (!res) {
    remote.release(partition, admission.ticket);
    return {.sent = true, .status = std::nullopt, .wait = {}};
  }
  remote.record(partition, admission.ticket, res->status, res->headers);
  return {.sent = true, .status = res->status, .wait = {}};
}

}  // namespace example
