#pragma once

// The redis-server of the separately compiled Redis program, started by a unit of its own (redis_server.cpp): the
// server helper talks to it through the engine's Connection, which the user unit must not compile.

namespace separate_test {

/// Starts a redis-server on a free loopback port and returns the port; 0 when redis-server is not found.
int start_redis();
/// Stops it (nothing when none runs).
void stop_redis();

}  // namespace separate_test
