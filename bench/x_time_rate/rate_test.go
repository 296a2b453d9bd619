// Go's golang.org/x/time/rate Limiter.Allow, one unkeyed token bucket with its own clock read per call: the
// reference a hot-key check of ours is compared with (bench/README.md "Results"). Run by bench/x_time_rate.sh.
package xtimerate

import (
	"testing"

	"golang.org/x/time/rate"
)

// A bucket of 1e9 tokens refilled at 1e9 per second never denies in a run: every call takes the admit path.
func BenchmarkAllow(b *testing.B) {
	limiter := rate.NewLimiter(rate.Limit(1e9), 1e9)
	for i := 0; i < b.N; i++ {
		if !limiter.Allow() {
			b.Fatal("denied: the run measured the deny path")
		}
	}
}
