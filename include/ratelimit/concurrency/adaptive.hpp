#pragma once

/// @file
/// Adaptive concurrency limits: `AdaptiveAlgorithm` (the interface) and its three algorithms, `AimdLimit`,
/// `GradientLimit` and `VegasLimit` (include/ratelimit/concurrency/README.md "Adaptive algorithms").

#include "ratelimit/concurrency/adaptive_algorithm.hpp"
#include "ratelimit/concurrency/aimd_limit.hpp"
#include "ratelimit/concurrency/gradient_limit.hpp"
#include "ratelimit/concurrency/min_rtt_probe.hpp"
#include "ratelimit/concurrency/vegas_limit.hpp"
