#pragma once

/// @file
/// Deprecated forwarding header: moved to `<ratelimit/most_restrictive.hpp>` (beside `decision.hpp`; the
/// name is unchanged, `ratelimit::most_restrictive`). Removed in the next release.

#include "ratelimit/most_restrictive.hpp"
