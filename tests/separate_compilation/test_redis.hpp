#pragma once

// The redis-server of the separately compiled Redis program, started by a unit of its own (redis_server.cpp): the
// server helper talks to it through the engine's Connection, which the user unit must not compile.

namespace separate_test {

/// Starts a redis-server on a free loopback port and returns the port; 0 when redis-server is not found.
int start_redis();
/// Stops it (nothing when none runs).
void stop_redis();
/// Two limiters of other policies sharing one pool made by the user (the constructors over a route, which a
/// separately compiled program instantiates where the pool's class is known) decide on the server at `port`, in one
/// joint domain. Prints what it checked.
bool pool_limiters_decide(int port);

}  // namespace separate_test
