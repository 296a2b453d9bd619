#pragma once

/// @file
/// Forwarding header: `ratelimit::BackendError` and its causes live in `<ratelimit/error.hpp>` now (they
/// are not Redis-specific). Kept for one release.

#include "ratelimit/error.hpp"
