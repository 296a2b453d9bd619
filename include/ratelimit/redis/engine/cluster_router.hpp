#pragma once

/// @file
/// `ClusterRouter`: sends single-key commands to the Redis Cluster node that owns each key's slot.

#include <algorithm>
#include <array>
#include <atomic>
#include <charconv>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <numeric>
#include <optional>
#include <shared_mutex>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <unordered_set>
#include <thread>
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
namespace engine {

/// The Redis backend's route on Redis Cluster: single-key commands, always on masters
/// (include/ratelimit/redis/README.md "Redis Cluster"). Keeps the slot map (`CLUSTER SLOTS`, loaded on first use
/// from any known node) and one `ConnectionPool` per node. A call whose node could not be reached before it was
/// sent, or whose slot has no known owner, is retried only when a refreshed map names another owner; anything
/// sent is never re-sent, so a check is applied at most once. Nodes are kept for the router's lifetime.
/// Thread-safe; refreshes are serialised and throttled (`cluster_refresh_interval`).
class ClusterRouter final : public Route {
 public:
  /// Validates the options; connects nothing yet. Throws `std::invalid_argument` naming the field
  /// (`ConnectionOptions.cluster_nodes`, ...). `limiter_defaults`: for limiters made here without their own.
  explicit ClusterRouter(ConnectionOptions options, LimiterOptions limiter_defaults = {})
      : options_(validated(std::move(options))), limiter_defaults_(std::move(limiter_defaults)) {
    slots_.fill(-1);
    for (const ClusterNode& seed : options_.cluster_nodes) (void)node_at(seed.host, seed.port);
  }

  /// Refused: write `ClusterRouter(o.connection(), o.limiter())`.
  explicit ClusterRouter(const RedisOptions& options) = delete;

  ClusterRouter(const ClusterRouter&) = delete;
  ClusterRouter& operator=(const ClusterRouter&) = delete;
  ~ClusterRouter() override {
    // Completions on the nodes' I/O threads may forward calls to other nodes: none may once the nodes go.
    closing_.store(true);
    while (forwarding_.load() != 0) std::this_thread::yield();
  }

  /// As `Route::execute`, in rounds: each sends every node its part at once (one breaker ticket per node);
  /// `MOVED` (the map is updated and refreshed) and `ASK` (`ASKING`, then that node, once) send a call again
  /// next round, at most `cluster_max_redirects` times.
  void execute(std::span<RouteCall> calls) override {
    if (calls.empty()) return;
    check_not_forked();
    if (!map_loaded_.load(std::memory_order_acquire) && !await_map(calls)) return;
    std::vector<State> state(calls.size());
    std::vector<std::size_t> pending(calls.size());
    std::iota(pending.begin(), pending.end(), std::size_t{0});
    while (!pending.empty()) pending = run_round(calls, state, pending);
  }

  /// As `Route::submit`: on the slot owner's pipeline; `MOVED` and `ASK` send it on from its completion. With no
  /// owner known (or no map yet) it waits on the router's worker for a reload, so `submit` never blocks.
  void submit(PipelineOp& op) override {
    check_not_forked();
    const Forwarding forwarding(*this);
    if (!forwarding) {
      const detail::CompletionScope completion;  // only from a completion while the router goes
      return op.complete(nullptr, BackendError(BackendErrorCause::io, "connection closed: the limiter was destroyed"));
    }
    Node* node = map_loaded_.load(std::memory_order_acquire) ? owner(op.slot) : nullptr;
    if (node == nullptr) return worker_.submit(op);
    send(*new Routed(*this, op), node);
  }

  [[nodiscard]] bool sharded() const noexcept override { return true; }
  [[nodiscard]] const void* domain() const noexcept override { return this; }
  [[nodiscard]] RouteCounters counters() const override {
    RouteCounters c;
    {
      const std::shared_lock lock(mutex_);
      for (const auto& node : nodes_) detail::add_counters(c, *node->pool);
    }
    c.refused_calls += worker_.refused();
    c.moved_redirections = moved_.load(std::memory_order_relaxed);
    c.ask_redirections = asks_.load(std::memory_order_relaxed);
    c.slot_map_refreshes = refreshes_.load(std::memory_order_relaxed);
    return c;
  }
  [[nodiscard]] ClusterRouter* cluster_router() noexcept override { return this; }

  /// Reloads the slot map from the first known node that answers; false (the old map kept) when none does.
  /// Thread-safe. Throws `std::logic_error` in a process forked after the router was made.
  bool refresh() {
    check_not_forked();
    return refresh_now(Refresh::forced);
  }

  /// "host:port" of the master currently believed to own `slot` (empty when none is known). Thread-safe.
  [[nodiscard]] std::string owner_of(std::uint16_t slot) const {
    const Node* n = owner(slot % detail::kClusterSlots);
    return n == nullptr ? std::string() : n->host + ":" + std::to_string(n->port);
  }

  [[nodiscard]] const ConnectionOptions& options() const noexcept override { return options_; }
  [[nodiscard]] const LimiterOptions& limiter_defaults() const noexcept override { return limiter_defaults_; }

 private:
  struct Node {
    std::string host;
    int port = 0;
    std::unique_ptr<ConnectionPool> pool;
  };
  /// A sync call across rounds.
  struct State {
    int tries = 0;        // times sent (or found without an owner)
    Node* ask = nullptr;  // ASK target for the next attempt (with ASKING first)
  };
  /// The calls of one round going to one node: one gated round trip on its pipeline.
  struct Group {
    explicit Group(Node* n) noexcept : node(n) {}
    Node* node;
    std::vector<std::size_t> calls;  // indices into the batch
    std::vector<RouteCall> parts;    // what is sent, in that order
    detail::GatedRoundTrip trip;     // not movable: groups are made in place
  };
  /// One round of `execute`.
  struct Round {
    std::map<Node*, Group> groups;
    std::vector<std::pair<std::size_t, Node*>> unreachable;  // nothing sent: may go elsewhere
    std::vector<std::size_t> next;                           // calls sent again next round
    bool want_refresh = false;
  };
  /// What a reply says of the slot: its owner moved, it is migrating (ASK), or the map is changing.
  enum class Redirect { none, moved, ask, changing };
  enum class Refresh { initial, forced, throttled };

  /// Held while a completion may send a call on to a node, so the nodes outlive it; false once the router goes.
  class Forwarding {
   public:
    explicit Forwarding(ClusterRouter& r) noexcept : r_(r) {
      r_.forwarding_.fetch_add(1);
      ok_ = !r_.closing_.load();
    }
    ~Forwarding() { r_.forwarding_.fetch_sub(1); }
    Forwarding(const Forwarding&) = delete;
    Forwarding& operator=(const Forwarding&) = delete;
    explicit operator bool() const noexcept { return ok_; }

   private:
    ClusterRouter& r_;
    bool ok_;
  };

  /// An async call on its way to its slot's master, sent on by `forward` from its completion.
  class Routed final : public detail::Relay {
   public:
    Routed(ClusterRouter& router, PipelineOp& call) noexcept : Relay(router, call), router_(router) {}
    void complete(Reply reply, std::optional<BackendError> error) noexcept override {
      try {
        const Forwarding forwarding(router_);
        if (forwarding && router_.forward(*this, reply, error)) return;
      } catch (...) {  // std::bad_alloc: the outcome stands
      }
      hand_back(std::move(reply), std::move(error));
    }
    Node* node = nullptr;  // where it went last
    int sends = 0;
    [[nodiscard]] std::uint16_t slot() const noexcept { return call().slot; }

   private:
    ClusterRouter& router_;
  };

  static ConnectionOptions validated(ConnectionOptions o) {
    auto bad = [](const char* field, const std::string& what) {
      throw std::invalid_argument(std::string("ConnectionOptions.") + field + ": " + what);
    };
    if (o.cluster_nodes.empty()) bad("cluster_nodes", "needs at least one seed node for a ClusterRouter");
    redis::detail::check_nodes(o.cluster_nodes, "ConnectionOptions.cluster_nodes");
    if (!o.sentinel.master_name.empty() || !o.sentinel.nodes.empty()) {
      throw std::invalid_argument("ConnectionOptions.cluster_nodes: Redis Cluster and Sentinel exclude each other");
    }
    if (o.database != 0) bad("database", "must be 0 on Redis Cluster (it has only database 0)");
    if (o.cluster_max_redirects < 1 || o.cluster_max_redirects > 100) bad("cluster_max_redirects", "must be in 1..100");
    if (o.cluster_refresh_interval.count() < 0) bad("cluster_refresh_interval", "must be >= 0");
    // The pool checks the other connection fields: now, not at the first node.
    (void)ConnectionPool(detail::at(o, o.cluster_nodes.front().host, o.cluster_nodes.front().port));
    return o;
  }

  /// The node for host:port, made (with its pool) on first sight. Nodes are never removed: a `Node*` stays valid.
  Node* node_at(const std::string& host, int port) {
    {
      const std::shared_lock lock(mutex_);
      if (const int i = index_of(host, port); i >= 0) return nodes_[static_cast<std::size_t>(i)].get();
    }
    const std::unique_lock lock(mutex_);
    return nodes_[static_cast<std::size_t>(find_or_add(host, port))].get();
  }
  int index_of(const std::string& host, int port) const {  // lock held; -1 when unknown
    for (std::size_t i = 0; i < nodes_.size(); ++i) {
      if (nodes_[i]->port == port && nodes_[i]->host == host) return static_cast<int>(i);
    }
    return -1;
  }
  /// The index of the node for host:port, added when new. Caller holds the unique lock.
  int find_or_add(const std::string& host, int port) {
    if (const int i = index_of(host, port); i >= 0) return i;
    auto pool = std::make_unique<ConnectionPool>(detail::at(options_, host, port), LimiterOptions{},
                                                 ConnectionPool::Discovered{});
    nodes_.push_back(std::make_unique<Node>(Node{host, port, std::move(pool)}));
    return static_cast<int>(nodes_.size() - 1);
  }

  Node* owner(std::uint16_t slot) const {
    const std::shared_lock lock(mutex_);
    const int n = slots_[slot];
    return n < 0 ? nullptr : nodes_[static_cast<std::size_t>(n)].get();
  }

  BackendError no_map() const {
    return BackendError(BackendErrorCause::io, "no cluster slot map: " + last_refresh_error());
  }
  static BackendError no_owner(std::uint16_t slot) {
    return BackendError(BackendErrorCause::io, "slot " + std::to_string(slot) + " has no known owner");
  }
  BackendError too_many_redirects(std::uint16_t slot) const {
    return BackendError(BackendErrorCause::protocol, "more than cluster_max_redirects (" +
                                                         std::to_string(options_.cluster_max_redirects) +
                                                         ") redirections for slot " + std::to_string(slot));
  }

  /// One round of a sync batch: returns the calls to send again.
  std::vector<std::size_t> run_round(std::span<RouteCall> calls, std::vector<State>& state,
                                     const std::vector<std::size_t>& pending) {
    Round round;
    plan(round, calls, state, pending);
    send_groups(round, calls, state);
    round.groups.clear();  // every round trip has ended: no call of this round is queued anywhere
    if (round.want_refresh && round.unreachable.empty() && round.next.empty()) {
      worker_.ask();  // every call has its outcome: no caller waits for the reload
    } else if (round.want_refresh) {
      retry_elsewhere(round, calls, state);
    }
    std::sort(round.next.begin(), round.next.end());  // request order: the earlier call on a key goes first
    return std::move(round.next);
  }

  /// Groups the pending calls by node. One call per key in flight, so a redirection cannot reorder a key's calls.
  void plan(Round& round, std::span<RouteCall> calls, std::vector<State>& state,
            const std::vector<std::size_t>& pending) {
    std::unordered_set<std::string_view> keys_sent;
    for (const std::size_t i : pending) {
      if (!calls[i].key.empty() && !keys_sent.insert(calls[i].key).second) {
        round.next.push_back(i);
        continue;
      }
      if (state[i].tries++ == options_.cluster_max_redirects + 1) {
        calls[i].reply.reset();
        calls[i].error = too_many_redirects(calls[i].slot);
        continue;
      }
      Node* node = state[i].ask != nullptr ? state[i].ask : owner(calls[i].slot);
      if (node == nullptr) {
        calls[i].error = no_owner(calls[i].slot);
        round.unreachable.emplace_back(i, nullptr);  // retried if the refresh names an owner
        round.want_refresh = true;
        continue;
      }
      Group& g = round.groups.try_emplace(node, node).first->second;
      g.calls.push_back(i);
      RouteCall& part = g.parts.emplace_back();
      part.args = calls[i].args;
      part.deadline = calls[i].deadline;
      part.asking = state[i].ask != nullptr;
    }
  }

  /// Starts every group's gated round trip, then waits for all; the caller may drive the first node's connection.
  void send_groups(Round& round, std::span<RouteCall> calls, std::vector<State>& state) {
    bool drive = true;
    for (auto& [node, g] : round.groups) {
      if (g.trip.start(*node->pool, g.parts, drive) == detail::Gated::ran) drive = false;
    }
    for (auto& [node, g] : round.groups) {
      g.trip.finish();
      for (std::size_t k = 0; k < g.parts.size(); ++k) take_outcome(round, calls, state, g, k);
    }
  }

  /// The outcome of the `k`-th call sent to `g.node`: final, or sent again next round (a redirection).
  void take_outcome(Round& round, std::span<RouteCall> calls, std::vector<State>& state, Group& g, std::size_t k) {
    const std::size_t i = g.calls[k];
    RouteCall& call = calls[i];
    RouteCall& part = g.parts[k];
    if (part.error) {  // an open breaker says nothing of the map
      const bool map_suspect = part.error->cause() != BackendErrorCause::circuit_open;
      if (map_suspect && !part.sent) round.unreachable.emplace_back(i, g.node);  // may go elsewhere
      round.want_refresh = round.want_refresh || map_suspect;
      call.reply.reset();
      call.error = std::move(part.error);
      return;
    }
    Node* target = nullptr;
    const Redirect r = redirection(*part.reply, g.node, call.slot, target);
    state[i].ask = r == Redirect::ask ? target : nullptr;  // ASK is followed once
    if (r == Redirect::moved || r == Redirect::ask) {
      round.next.push_back(i);
    } else {
      call.reply = std::move(part.reply);
      call.error.reset();
    }
    if (r == Redirect::moved || r == Redirect::changing) round.want_refresh = true;
  }

  /// Reloads the map (throttled); an unsent call goes again next round when the map names another owner for it.
  void retry_elsewhere(Round& round, std::span<RouteCall> calls, const std::vector<State>& state) {
    (void)refresh_now(Refresh::throttled);
    for (const auto& [i, failed] : round.unreachable) {
      if (state[i].ask == nullptr && owner(calls[i].slot) != failed) {
        calls[i].error.reset();
        round.next.push_back(i);
      }
    }
  }

  /// "MOVED 3999 127.0.0.1:6381" / "ASK 3999 127.0.0.1:6381": the node named (an empty host means the
  /// replying node's host), or null when the text does not parse.
  Node* redirect_target(std::string_view msg, const Node* from) {
    const auto space = msg.rfind(' ');
    const auto colon = msg.rfind(':');
    if (space == std::string_view::npos || colon == std::string_view::npos || colon < space) return nullptr;
    std::string host(msg.substr(space + 1, colon - space - 1));
    int port = 0;
    const auto [end, ec] = std::from_chars(msg.data() + colon + 1, msg.data() + msg.size(), port);
    if (ec != std::errc() || end != msg.data() + msg.size() || port < 1 || port > 65535) return nullptr;
    if (host.empty()) host = from->host;
    return node_at(host, port);
  }

  /// What `reply` from `from` says of `slot`: `MOVED` (the map now names `target`), `ASK` (`target` takes this
  /// call), `CLUSTERDOWN` or `TRYAGAIN` (the outcome stands, the map is probably changing), or none.
  Redirect redirection(const redisReply& reply, const Node* from, std::uint16_t slot, Node*& target) {
    if (!is_error(reply)) return Redirect::none;
    const std::string_view msg = text(reply);
    const bool moved = msg.starts_with("MOVED ");
    if (moved || msg.starts_with("ASK ")) {
      target = redirect_target(msg, from);
      if (target == nullptr) return Redirect::none;
      if (!moved) {
        asks_.fetch_add(1, std::memory_order_relaxed);
        return Redirect::ask;
      }
      moved_.fetch_add(1, std::memory_order_relaxed);
      const std::unique_lock lock(mutex_);
      slots_[slot] = find_or_add(target->host, target->port);
      return Redirect::moved;
    }
    return is_error(reply, "CLUSTERDOWN") || is_error(reply, "TRYAGAIN") ? Redirect::changing : Redirect::none;
  }

  /// Sends async `r` to `node`, gated per call by the node's breaker.
  void send(Routed& r, Node* node) {
    r.node = node;
    ++r.sends;
    detail::submit_gated(*node->pool, r);
  }

  /// From `r`'s completion: true when it was sent on (a redirection); else its outcome stands (past
  /// `cluster_max_redirects`: an error). Failures and redirections have the map reloaded in the background.
  bool forward(Routed& r, Reply& reply, std::optional<BackendError>& error) {
    if (error) {
      if (error->cause() != BackendErrorCause::circuit_open) worker_.ask();
      return false;
    }
    Node* target = nullptr;
    const Redirect d = redirection(*reply, r.node, r.slot(), target);
    if (d == Redirect::moved || d == Redirect::changing) worker_.ask();
    if (d != Redirect::moved && d != Redirect::ask) return false;
    if (r.sends > options_.cluster_max_redirects) {
      reply.reset();
      error = too_many_redirects(r.slot());
      return false;
    }
    r.asking = d == Redirect::ask;
    send(r, target);
    return true;
  }

  /// Before the first map, a sync call has the worker load it (one load serves every waiting caller) and waits
  /// for it until the calls' deadline; false (the calls failed unsent) when no map came by then.
  bool await_map(std::span<RouteCall> calls) {
    auto deadline = std::chrono::steady_clock::now() + options_.command_timeout;
    for (const RouteCall& c : calls) deadline = std::min(deadline, c.deadline);
    const bool ended = worker_.await(worker_.ask(), deadline);
    if (map_loaded_.load(std::memory_order_acquire)) return true;
    detail::fail_unsent(calls, ended ? no_map()
                                     : BackendError(BackendErrorCause::timeout,
                                                    "Redis Cluster: no slot map yet: the seed nodes did not answer "
                                                    "by the call's deadline"));
    return false;
  }

  /// The worker's task: the first load of the slot map, or a reload (at most one per refresh interval).
  void reload() {
    (void)refresh_now(map_loaded_.load(std::memory_order_acquire) ? Refresh::throttled : Refresh::initial);
  }

  /// The calls held while the worker reloaded (no owner was known): sends each call or fails it.
  void on_worker(const std::vector<PipelineOp*>& calls) {
    const bool loaded = map_loaded_.load(std::memory_order_acquire);
    for (PipelineOp* op : calls) {
      if (Node* node = loaded ? owner(op->slot) : nullptr) {
        send(*new Routed(*this, *op), node);
        continue;
      }
      const detail::CompletionScope completion;
      op->complete(nullptr, loaded ? no_owner(op->slot) : no_map());
    }
  }

  std::string last_refresh_error() const {
    const std::lock_guard lock(refresh_mutex_);
    return last_refresh_error_;
  }

  /// One refresh at a time. `initial`: unless another thread just loaded; `throttled`: at most one per
  /// `cluster_refresh_interval`, skipped while another runs.
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

  /// CLUSTER SLOTS from one node: [[start, end, [host, port, id...], replicas...]...]. Slots not named keep
  /// their owner (they answer with a redirection or CLUSTERDOWN anyway).
  void load_from(const std::string& host, int port) {
    Connection c = Connection::open(detail::at(options_, host, port));
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
      const int index = find_or_add(range.host, range.port);
      for (long long s = range.first; s <= range.last; ++s) slots_[static_cast<std::size_t>(s)] = index;
    }
  }

  ConnectionOptions options_;
  LimiterOptions limiter_defaults_{};
  std::atomic<int> forwarding_{0};  // before the nodes: completions on their threads use these two
  std::atomic<bool> closing_{false};
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
  RouteWorker worker_{options_.max_in_flight, [this](bool, bool) { reload(); },
                      [this](const std::vector<PipelineOp*>& calls) { on_worker(calls); }};
};

}  // namespace engine
using engine::ClusterRouter;
}  // namespace RATELIMIT_REDIS_ABI_NAMESPACE
}  // namespace ratelimit::redis
