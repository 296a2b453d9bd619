#pragma once

/// @file
/// Umbrella header for HTTP: rate-limit header fields (`<ratelimit/http/headers.hpp>`). Dependency-free;
/// the problem+json body is in `<ratelimit/http/problem.hpp>` (needs nlohmann/json, CMake target
/// `ratelimit::http`). For one release it also includes `<ratelimit/layers.hpp>` (layers, layered checks,
/// tiers), which lived under `http/` before; include that header directly.
/// The client side, a limiter steered by a remote API's header fields, is `<ratelimit/http/remote_quota.hpp>`
/// (not included here: include it where you call someone else's API).

#include "ratelimit/http/headers.hpp"
#include "ratelimit/layers.hpp"
