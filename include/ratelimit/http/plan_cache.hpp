#pragma once

/// @file
/// Deprecated forwarding header: moved to `<ratelimit/layers/detail/plan_cache.hpp>` (an internal of
/// `TieredLimiter`). Removed in the next release.

#include "ratelimit/layers/detail/plan_cache.hpp"
