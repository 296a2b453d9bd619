#pragma once

/// @file
/// Umbrella header for service integration: header fields, layered (all-or-nothing) checks, layers
/// with counters, penalties and lists, and tiered plans. Dependency-free; the problem+json body is in
/// `<ratelimit/http/problem.hpp>` (needs nlohmann/json, CMake target `ratelimit::http`).

#include "ratelimit/http/headers.hpp"
#include "ratelimit/http/key_lists.hpp"
#include "ratelimit/http/layer.hpp"
#include "ratelimit/http/layer_stats.hpp"
#include "ratelimit/http/layered.hpp"
#include "ratelimit/http/most_restrictive.hpp"
#include "ratelimit/http/penalty_box.hpp"
#include "ratelimit/http/tiers.hpp"
