package main

import (
	"math"
	"slices"
	"time"
)

// minP99Samples is how many samples a p99 needs to mean more than "the
// slowest one or two".
const minP99Samples = 100

// percentile returns the p-th percentile (0 < p <= 100) of sorted by the
// nearest-rank method: the smallest sample with at least p% of the samples
// at or below it. No samples give 0. It is pure.
func percentile(sorted []time.Duration, p float64) time.Duration {
	n := len(sorted)
	if n == 0 {
		return 0
	}
	// p*n first: 99*1000/100 is exactly 990, 0.99*1000 is not.
	rank := int(math.Ceil(p * float64(n) / 100))
	rank = min(max(rank, 1), n)
	return sorted[rank-1]
}

// summary is what the table shows of a set of samples.
type summary struct {
	N        int
	P50, P99 time.Duration // P99 is 0 below minP99Samples samples
	Max      time.Duration
}

// summarize sorts a copy of samples and reads the percentiles. It is pure.
func summarize(samples []time.Duration) summary {
	s := slices.Clone(samples)
	slices.Sort(s)
	out := summary{N: len(s), P50: percentile(s, 50)}
	if len(s) > 0 {
		out.Max = s[len(s)-1]
	}
	if len(s) >= minP99Samples {
		out.P99 = percentile(s, 99)
	}
	return out
}
