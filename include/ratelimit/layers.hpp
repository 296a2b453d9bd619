#pragma once

/// @file
/// Umbrella header for composition: layered (all-or-nothing) checks, layers with counters, penalties
/// and lists, and tiered plans. Dependency-free; knows nothing of HTTP (header fields are in
/// `<ratelimit/http.hpp>`).

#include "ratelimit/layers/concurrency_layers.hpp"
#include "ratelimit/layers/key_lists.hpp"
#include "ratelimit/layers/layer.hpp"
#include "ratelimit/layers/layer_stats.hpp"
#include "ratelimit/layers/layered.hpp"
#include "ratelimit/layers/penalty_box.hpp"
#include "ratelimit/layers/quota_overrides.hpp"
#include "ratelimit/layers/tiers.hpp"
#include "ratelimit/most_restrictive.hpp"
#include "ratelimit/quota_policy.hpp"
