#pragma once

/// @file
/// `ClusterRouter`: sends single-key commands to the Redis Cluster node that owns each key's slot.

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <shared_mutex>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <unordered_set>
#include <utility>
#include <vector>

#include "ratelimit/redis/abi.hpp"
#include "ratelimit/redis/engine/connection.hpp"
#include "ratelimit/redis/engine/slots.hpp"
#include "ratelimit/error.hpp"
#include "ratelimit/redis/options.hpp"
#include "ratelimit/redis/engine/pool.hpp"
#include "ratelimit/redis/engine/reply.hpp"
#include "ratelimit/redis/engine/route.hpp"

namespace ratelimit::redis {
inline namespace RATELIMIT_REDIS_ABI_NAMESPACE {

/// The routing layer of the Redis backend on Redis Cluster: not a general cluster client, only what the
/// limiter needs (single-key commands, always on masters).
///
/// Keeps the slot map read with `CLUSTER SLOTS` (loaded on first use from the seed nodes, or any node
/// known since) and one `ConnectionPool` per node. `execute` groups calls by node; a single group goes on
/// the node's shared pipelined connection (with other callers' commands), several are pipelined each on
/// an exclusive connection (all groups are written before any is read, so the nodes work in parallel),
/// and follows `MOVED`
/// (updates the slot's owner and asks for a refresh) and `ASK` (`ASKING`, then that node, once), at most
/// `cluster_max_redirects` times per call. It knows nothing of scripts: a `NOSCRIPT` is a reply like any
/// other, answered by the script executor (`run_script`). A call whose node
/// cannot be reached before anything is sent, or whose slot has no known owner, is retried only when a
/// refreshed map names another owner (e.g. a replica promoted after its master died, a slot assigned
/// since); anything already sent is never re-sent, so a check is applied at most once. Nodes are
/// remembered for the router's lifetime (a cluster has few).
///
/// Thread-safe: every method may be called from any thread; the map is guarded by a shared mutex,
/// refreshes are serialised and throttled (`cluster_refresh_interval`).
class ClusterRouter final : public Route {
 public:
  /// Validates the options (seed nodes, pool and timeout fields); connects nothing yet. Throws
  /// `std::invalid_argument` naming the field (`ConnectionOptions.cluster_nodes`, ...).
  /// `limiter_defaults`: the options of limiters made on this router without their own.
  explicit ClusterRouter(ConnectionOptions options, LimiterOptions limiter_defaults = {})
      : options_(validated(std::move(options))), limiter_defaults_(std::move(limiter_defaults)) {
    slots_.fill(-1);
    for (const ClusterNode& seed : options_.cluster_nodes) (void)node_at(seed.host, seed.port);
  }

  /// Refused at compile time, as `ConnectionPool(const RedisOptions&)`: write
  /// `ClusterRouter(o.connection(), o.limiter())`.
  explicit ClusterRouter(const RedisOptions& options) = delete;

  ClusterRouter(const ClusterRouter&) = delete;
  ClusterRouter& operator=(const ClusterRouter&) = delete;

  /// Runs every call on the master owning its slot; outcomes land in each call's `reply` / `error`.
  /// Never throws `BackendError` (failures are per call); may throw `std::bad_alloc`, and
  /// `std::logic_error` in a process forked after the router was made (touching nothing).
  void execute(std::span<RouteCall> calls) override {
    if (calls.empty()) return;
    check_not_forked();
    if (!map_loaded_.load(std::memory_order_acquire) && !refresh_now(Refresh::initial)) {
      for (RouteCall& c : calls)
        c.error = BackendError(BackendErrorCause::io, "no cluster slot map: " + last_refresh_error());
      return;
    }
    std::vector<State> state(calls.size());
    std::vector<std::size_t> pending(calls.size());
    for (std::size_t i = 0; i < calls.size(); ++i) pending[i] = i;
    const int rounds = options_.cluster_max_redirects + 1;
    while (!pending.empty()) {
      std::vector<Group> groups;
      bool want_refresh = false;
      std::vector<std::pair<std::size_t, Node*>> unreachable;  // nothing sent: may go elsewhere
      std::vector<std::size_t> next;
      std::unordered_set<std::string_view> keys_sent;
      for (const std::size_t i : pending) {
        // One call per key in flight: a later call on the key goes once the earlier has its final reply,
        // so a redirection of the earlier one cannot let the later one run first.
        if (!calls[i].key.empty() && !keys_sent.insert(calls[i].key).second) {
          next.push_back(i);
          continue;
        }
        if (state[i].tries++ == rounds) {
          calls[i].reply.reset();
          calls[i].error =
              BackendError(BackendErrorCause::protocol, "more than cluster_max_redirects (" +
                                                            std::to_string(options_.cluster_max_redirects) +
                                                            ") redirections for slot " + std::to_string(calls[i].slot));
          continue;
        }
        Node* node = state[i].ask != nullptr ? state[i].ask : owner(calls[i].slot);
        if (node == nullptr) {
          calls[i].error =
              BackendError(BackendErrorCause::io, "slot " + std::to_string(calls[i].slot) + " has no known owner");
          unreachable.emplace_back(i, nullptr);  // retried if the refresh names an owner
          want_refresh = true;
          continue;
        }
        auto g = std::find_if(groups.begin(), groups.end(), [node](const Group& x) { return x.node == node; });
        if (g == groups.end()) {
          groups.emplace_back(Group{node, {}, std::nullopt, std::nullopt});
          g = groups.end() - 1;
        }
        g->calls.push_back(i);
      }
      // One node and no ASK (the usual case: a single check): the node's shared pipelined connection, so
      // concurrent callers' commands go in one write (include/ratelimit/redis/README.md "Redis engine").
      if (groups.size() == 1 && std::none_of(groups[0].calls.begin(), groups[0].calls.end(),
                                             [&state](std::size_t i) { return state[i].ask != nullptr; })) {
        Group& g = groups[0];
        std::vector<RouteCall> part(g.calls.size());
        for (std::size_t k = 0; k < part.size(); ++k) {
          part[k].args = calls[g.calls[k]].args;
          part[k].deadline = calls[g.calls[k]].deadline;
        }
        // Per node, as below (include/ratelimit/redis/README.md "Circuit breaker"); an open breaker sends nothing and
        // asks for no refresh.
        if (detail::execute_gated(*g.node->pool, part) == detail::Gated::circuit_open) {
          fail_group(calls, g, *part.front().error);
          part.clear();
        }
        for (std::size_t k = 0; k < part.size(); ++k) {
          const std::size_t i = g.calls[k];
          if (part[k].error) {
            calls[i].reply.reset();
            calls[i].error = std::move(part[k].error);
            if (!part[k].sent) unreachable.emplace_back(i, g.node);  // nothing sent: may go elsewhere
            want_refresh = true;
            continue;
          }
          follow(classify(calls[i], state[i], std::move(part[k].reply), g.node), i, next, want_refresh);
        }
        groups.clear();
      }
      // Leases are taken one after another and held until the reads: take them in one global order (by
      // node address), or two batches naming two nodes in opposite orders wait for each other.
      std::vector<std::size_t> order(groups.size());
      for (std::size_t k = 0; k < order.size(); ++k) order[k] = k;
      std::sort(order.begin(), order.end(),
                [&groups](std::size_t x, std::size_t y) { return std::less<>()(groups[x].node, groups[y].node); });
      // Write every group first, then read: the nodes run their parts of the batch at the same time.
      for (const std::size_t k : order) {
        Group& g = groups[k];
        g.ticket.emplace(
            g.node->pool->breaker().admit());  // per node: include/ratelimit/redis/README.md "Circuit breaker"
        if (!*g.ticket) {
          fail_group(calls, g, detail::circuit_open(g.node->endpoint));
          continue;
        }
        std::optional<BackendError> no_lease;
        try {
          g.lease.emplace(g.node->pool->acquire());
        } catch (const PoolTimeout& e) {  // a busy pool says nothing about the node
          no_lease = e;
        } catch (const BackendError& e) {
          detail::settle(*g.ticket, e);
          no_lease = e;
        }
        if (no_lease) {
          for (const std::size_t i : g.calls) {
            calls[i].error = *no_lease;
            unreachable.emplace_back(i, g.node);
          }
          want_refresh = true;
          continue;
        }
        try {
          for (const std::size_t i : g.calls) send(**g.lease, calls[i], state[i]);
          (*g.lease)->flush();
        } catch (const BackendError& e) {
          detail::settle(*g.ticket, e);
          fail_group(calls, g, e);
          want_refresh = true;
        }
      }
      for (Group& g : groups) {
        if (!g.lease || (*g.lease)->broken()) continue;
        std::size_t done = 0;
        try {
          for (; done < g.calls.size(); ++done) {
            const std::size_t i = g.calls[done];
            if (state[i].ask != nullptr) {
              const Reply ok = (*g.lease)->read_reply();
              if (ok->type == REDIS_REPLY_ERROR) state[i].asking_refused = std::string(text(*ok));
            }
            Reply r = (*g.lease)->read_reply();
            follow(classify(calls[i], state[i], std::move(r), g.node), i, next, want_refresh);
          }
          g.ticket->succeeded();
        } catch (const BackendError& e) {
          detail::settle(*g.ticket, e);
          for (; done < g.calls.size(); ++done) calls[g.calls[done]].error = e;
          want_refresh = true;
        }
      }
      groups.clear();  // leases back to their pools before a refresh opens connections
      if (want_refresh) {
        // Retried when the map (refreshed now, or by another thread meanwhile) names another owner.
        (void)refresh_now(Refresh::throttled);
        for (const auto& [i, failed] : unreachable) {
          if (state[i].ask == nullptr && owner(calls[i].slot) != failed) {
            calls[i].error.reset();
            next.push_back(i);
          }
        }
      }
      std::sort(next.begin(), next.end());  // request order: the earlier call on a key goes first
      pending = std::move(next);
    }
  }

  /// Async calls go through a worker thread that runs them as batches of `execute` (see `RouteWorker`):
  /// each batch takes one breaker ticket per node, as a sync batch does (include/ratelimit/redis/README.md "Circuit
  /// breaker").
  void submit(PipelineOp& op) override { worker_.submit(op); }

  [[nodiscard]] bool sharded() const noexcept override { return true; }
  [[nodiscard]] const void* domain() const noexcept override { return this; }
  [[nodiscard]] RouteCounters counters() const override {
    RouteCounters c;
    c.connects = connects();
    c.dropped_connections = drops();
    c.moved_redirections = moved();
    c.ask_redirections = asks();
    c.slot_map_refreshes = refreshes();
    c.refused_calls = worker_.refused();
    const std::shared_lock lock(mutex_);
    for (const auto& node : nodes_) {
      const BreakerCounters b = node->pool->breaker().counters();
      c.breaker_opens += b.opens;
      c.breaker_probes += b.probes;
    }
    return c;
  }
  [[nodiscard]] ClusterRouter* cluster_router() noexcept override { return this; }

  /// Reloads the slot map with `CLUSTER SLOTS` from the first known node that answers. Returns false
  /// (keeping the old map) when none does. Thread-safe; concurrent refreshes run one at a time. Throws
  /// `std::logic_error` in a process forked after the router was made.
  bool refresh() {
    check_not_forked();
    return refresh_now(Refresh::forced);
  }

  /// "host:port" of the master currently believed to own `slot` (empty when none is known). Thread-safe.
  [[nodiscard]] std::string owner_of(std::uint16_t slot) const {
    const std::shared_lock lock(mutex_);
    const int n = slots_[slot % detail::kClusterSlots];
    return n < 0 ? std::string() : nodes_[static_cast<std::size_t>(n)]->endpoint;
  }

  /// `MOVED` redirections followed so far. Thread-safe (each counter read atomically).
  [[nodiscard]] std::uint64_t moved() const noexcept { return moved_.load(std::memory_order_relaxed); }
  /// `ASK` redirections followed so far (slots in migration). Thread-safe.
  [[nodiscard]] std::uint64_t asks() const noexcept { return asks_.load(std::memory_order_relaxed); }
  /// Reloads of the slot map (`CLUSTER SLOTS`) so far. Thread-safe.
  [[nodiscard]] std::uint64_t refreshes() const noexcept { return refreshes_.load(std::memory_order_relaxed); }
  /// Connections opened so far, summed over the nodes' pools. Thread-safe.
  [[nodiscard]] std::uint64_t connects() const {
    const std::shared_lock lock(mutex_);
    std::uint64_t n = 0;
    for (const auto& node : nodes_) n += node->pool->connects();
    return n;
  }
  /// Broken connections dropped so far, summed over the nodes' pools. Thread-safe.
  [[nodiscard]] std::uint64_t drops() const {
    const std::shared_lock lock(mutex_);
    std::uint64_t n = 0;
    for (const auto& node : nodes_) n += node->pool->drops();
    return n;
  }
  /// The options as given. Thread-safe (immutable).
  [[nodiscard]] const ConnectionOptions& options() const noexcept override { return options_; }
  [[nodiscard]] const LimiterOptions& limiter_defaults() const noexcept override { return limiter_defaults_; }

 private:
  struct Node {
    std::string host;
    int port = 0;
    std::string endpoint;  // "host:port"
    std::unique_ptr<ConnectionPool> pool;
  };
  struct State {
    int tries = 0;        // times sent (or found without an owner)
    Node* ask = nullptr;  // ASK target for the next attempt (with ASKING first)
    std::string asking_refused;
  };
  struct Group {
    Node* node;
    std::vector<std::size_t> calls;
    std::optional<CircuitBreaker<>::Ticket> ticket;  // the node's breaker: settled by the round trip
    std::optional<ConnectionPool::Lease> lease;
  };
  enum class Outcome { done, done_refresh, again, again_refresh };
  /// What a classified reply asks of the round loop: call `i` goes again next round, the map is reloaded.
  static void follow(Outcome o, std::size_t i, std::vector<std::size_t>& next, bool& want_refresh) {
    if (o == Outcome::again || o == Outcome::again_refresh) next.push_back(i);
    if (o == Outcome::done_refresh || o == Outcome::again_refresh) want_refresh = true;
  }
  enum class Refresh { initial, forced, throttled };

  static ConnectionOptions validated(ConnectionOptions o) {
    auto bad = [](const char* field, const std::string& what) {
      throw std::invalid_argument(std::string("ConnectionOptions.") + field + ": " + what);
    };
    if (o.cluster_nodes.empty()) bad("cluster_nodes", "needs at least one seed node for a ClusterRouter");
    for (std::size_t i = 0; i < o.cluster_nodes.size(); ++i) {
      const std::string node = "ConnectionOptions.cluster_nodes[" + std::to_string(i) + "]";
      detail::check_host(o.cluster_nodes[i].host, node + ".host");
      const int port = o.cluster_nodes[i].port;
      if (port < 1 || port > 65535) throw std::invalid_argument(node + ".port: must be in 1..65535");
    }
    if (!o.sentinel.master_name.empty() || !o.sentinel.nodes.empty()) {
      throw std::invalid_argument("ConnectionOptions.cluster_nodes: Redis Cluster and Sentinel exclude each other");
    }
    if (o.database != 0) bad("database", "must be 0 on Redis Cluster (it has only database 0)");
    if (o.cluster_max_redirects < 1 || o.cluster_max_redirects > 100) bad("cluster_max_redirects", "must be in 1..100");
    if (o.cluster_refresh_interval.count() < 0) bad("cluster_refresh_interval", "must be >= 0");
    // The pool checks the remaining connection fields; check them now, not at the first node.
    ConnectionOptions probe = o;
    probe.unix_socket.clear();
    probe.host = o.cluster_nodes.front().host;
    probe.port = o.cluster_nodes.front().port;
    (void)ConnectionPool(probe);
    return o;
  }

  /// The node for host:port, made (with its pool) on first sight. Nodes are never removed, so a
  /// `Node*` stays valid for the router's lifetime.
  Node* node_at(const std::string& host, int port) {
    {
      const std::shared_lock lock(mutex_);
      if (Node* n = find_node(host, port)) return n;
    }
    const std::unique_lock lock(mutex_);
    return find_or_add(host, port).first;
  }
  Node* find_node(const std::string& host, int port) const {
    for (const auto& n : nodes_) {
      if (n->port == port && n->host == host) return n.get();
    }
    return nullptr;
  }
  /// Caller holds the unique lock. Returns the node and its index.
  std::pair<Node*, int> find_or_add(const std::string& host, int port) {
    for (std::size_t i = 0; i < nodes_.size(); ++i) {
      if (nodes_[i]->port == port && nodes_[i]->host == host) return {nodes_[i].get(), static_cast<int>(i)};
    }
    ConnectionOptions o = options_;
    o.unix_socket.clear();
    o.host = host;
    o.port = port;
    auto node = std::make_unique<Node>(
        Node{host, port, host + ":" + std::to_string(port),
             std::make_unique<ConnectionPool>(o, LimiterOptions{}, ConnectionPool::Discovered{})});
    nodes_.push_back(std::move(node));
    return {nodes_.back().get(), static_cast<int>(nodes_.size() - 1)};
  }

  Node* owner(std::uint16_t slot) const {
    const std::shared_lock lock(mutex_);
    const int n = slots_[slot];
    return n < 0 ? nullptr : nodes_[static_cast<std::size_t>(n)].get();
  }

  void send(Connection& c, const RouteCall& call, const State& s) {
    if (s.ask != nullptr) c.append(std::span<const std::string_view>(kAsking));
    c.append(call.args);
  }

  static void fail_group(std::span<RouteCall> calls, const Group& g, const BackendError& e) {
    for (const std::size_t i : g.calls) calls[i].error = e;
  }

  /// "MOVED 3999 127.0.0.1:6381" / "ASK 3999 127.0.0.1:6381": the node named (an empty host means the
  /// replying node's host), or null when the text does not parse.
  Node* redirect_target(std::string_view msg, const Node* from) {
    const auto space = msg.rfind(' ');
    const auto colon = msg.rfind(':');
    if (space == std::string_view::npos || colon == std::string_view::npos || colon < space) return nullptr;
    std::string host(msg.substr(space + 1, colon - space - 1));
    const std::string_view port_text = msg.substr(colon + 1);
    int port = 0;
    for (const char ch : port_text) {
      if (ch < '0' || ch > '9' || port > 65535) return nullptr;
      port = port * 10 + (ch - '0');
    }
    if (port_text.empty() || port < 1 || port > 65535) return nullptr;
    if (host.empty()) host = from->host;
    return node_at(host, port);
  }

  Outcome classify(RouteCall& call, State& s, Reply r, Node* from) {
    s.ask = nullptr;  // ASK is followed once; a later redirection starts from the map again
    if (r->type == REDIS_REPLY_ERROR) {
      const std::string_view msg = text(*r);
      if (msg.starts_with("MOVED ")) {
        if (Node* target = redirect_target(msg, from)) {
          moved_.fetch_add(1, std::memory_order_relaxed);
          {
            const std::unique_lock lock(mutex_);
            const auto [node, index] = find_or_add(target->host, target->port);
            (void)node;
            slots_[call.slot] = index;
          }
          return Outcome::again_refresh;
        }
      } else if (msg.starts_with("ASK ")) {
        if (Node* target = redirect_target(msg, from)) {
          asks_.fetch_add(1, std::memory_order_relaxed);
          s.ask = target;
          return Outcome::again;
        }
      }
    }
    // CLUSTERDOWN (a master failed, no replica promoted yet) and TRYAGAIN are the caller's failures, but
    // the map is probably changing.
    const bool changing = is_error(*r, "CLUSTERDOWN") || is_error(*r, "TRYAGAIN");
    call.reply = std::move(r);
    call.error.reset();
    return changing ? Outcome::done_refresh : Outcome::done;
  }

  std::string last_refresh_error() const {
    const std::lock_guard lock(refresh_mutex_);
    return last_refresh_error_;
  }

  /// One refresh at a time. `initial`: load unless another thread just did; `throttled`: at most one per
  /// `cluster_refresh_interval`, and a thread that finds one running goes on with the map it has.
  bool refresh_now(Refresh mode) {
    std::unique_lock lock(refresh_mutex_, std::defer_lock);
    if (mode != Refresh::throttled) {
      lock.lock();
      if (mode == Refresh::initial && map_loaded_.load(std::memory_order_acquire)) return true;
    } else if (!lock.try_lock()) {
      return false;
    }
    const auto now = std::chrono::steady_clock::now();
    if (mode == Refresh::throttled && now - last_refresh_ < options_.cluster_refresh_interval) return false;
    last_refresh_ = now;
    std::vector<std::pair<std::string, int>> candidates;
    {
      const std::shared_lock map_lock(mutex_);
      for (const auto& n : nodes_) candidates.emplace_back(n->host, n->port);
    }
    // Start at a different node each time, so one dead node does not delay every refresh.
    const std::size_t start = rotation_++ % candidates.size();
    std::string errors;
    for (std::size_t k = 0; k < candidates.size(); ++k) {
      const auto& [host, port] = candidates[(start + k) % candidates.size()];
      try {
        load_from(host, port);
        refreshes_.fetch_add(1, std::memory_order_relaxed);
        map_loaded_.store(true, std::memory_order_release);
        return true;
      } catch (const BackendError& e) {
        errors += (errors.empty() ? "" : "; ") + host + ":" + std::to_string(port) + ": " + e.what();
      }
    }
    last_refresh_error_ = errors;
    return false;
  }

  /// CLUSTER SLOTS from one node: [[start, end, [host, port, id...], replicas...]...]. Slots missing
  /// from the reply keep their old owner (they answer with a redirection or CLUSTERDOWN anyway).
  void load_from(const std::string& host, int port) {
    ConnectionOptions o = options_;
    o.unix_socket.clear();
    o.host = host;
    o.port = port;
    Connection c = Connection::open(o);
    const Reply r = c.command({"CLUSTER", "SLOTS"});
    if (r->type == REDIS_REPLY_ERROR)
      throw BackendError(BackendErrorCause::reply, "CLUSTER SLOTS: " + std::string(text(*r)));
    if (r->type != REDIS_REPLY_ARRAY) throw BackendError(BackendErrorCause::protocol, "CLUSTER SLOTS: not an array");
    struct Range {
      long long first, last;
      std::string host;
      int port;
    };
    std::vector<Range> ranges;
    for (std::size_t i = 0; i < r->elements; ++i) {
      const redisReply* e = r->element[i];
      if (e == nullptr || e->type != REDIS_REPLY_ARRAY || e->elements < 3 ||
          e->element[0]->type != REDIS_REPLY_INTEGER || e->element[1]->type != REDIS_REPLY_INTEGER ||
          e->element[2]->type != REDIS_REPLY_ARRAY || e->element[2]->elements < 2 ||
          e->element[2]->element[1]->type != REDIS_REPLY_INTEGER) {
        throw BackendError(BackendErrorCause::protocol, "CLUSTER SLOTS: unexpected entry shape");
      }
      const long long first = e->element[0]->integer;
      const long long last = e->element[1]->integer;
      const long long p = e->element[2]->element[1]->integer;
      if (first < 0 || last < first || last >= detail::kClusterSlots || p < 1 || p > 65535) {
        throw BackendError(BackendErrorCause::protocol, "CLUSTER SLOTS: slot range or port out of bounds");
      }
      std::string h(text(*e->element[2]->element[0]));
      if (h.empty() || h == "?") h = host;  // "unknown endpoint": the node we asked is reachable there
      ranges.push_back(Range{first, last, std::move(h), static_cast<int>(p)});
    }
    if (ranges.empty())
      throw BackendError(BackendErrorCause::reply, "CLUSTER SLOTS: no slot is served (cluster not formed?)");
    const std::unique_lock lock(mutex_);
    for (const Range& range : ranges) {
      const int index = find_or_add(range.host, range.port).second;
      for (long long s = range.first; s <= range.last; ++s) slots_[static_cast<std::size_t>(s)] = index;
    }
  }

  static constexpr std::array<std::string_view, 1> kAsking{"ASKING"};

  ConnectionOptions options_;
  LimiterOptions limiter_defaults_{};
  mutable std::shared_mutex mutex_;  // nodes_ and slots_
  std::vector<std::unique_ptr<Node>> nodes_;
  std::array<int, detail::kClusterSlots> slots_{};  // index into nodes_, -1 unknown
  std::atomic<bool> map_loaded_{false};
  mutable std::mutex refresh_mutex_;  // the fields below
  std::chrono::steady_clock::time_point last_refresh_{};
  std::size_t rotation_ = 0;
  std::string last_refresh_error_;
  std::atomic<std::uint64_t> moved_{0};
  std::atomic<std::uint64_t> asks_{0};
  std::atomic<std::uint64_t> refreshes_{0};
  RouteWorker worker_{*this, options_.max_in_flight};  // last: stopped before the rest goes
};

}  // namespace RATELIMIT_REDIS_ABI_NAMESPACE
}  // namespace ratelimit::redis
