#pragma once

/// @file
/// Deprecated forwarding header: moved to `<ratelimit/layers/layered.hpp>` (composition is not HTTP; the
/// names are unchanged, in namespace `ratelimit`). Removed in the next release.

#include "ratelimit/layers/layered.hpp"
