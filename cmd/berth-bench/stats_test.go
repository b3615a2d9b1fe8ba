package main

import (
	"testing"
	"time"

	"github.com/shoenig/test/must"
)

// ms returns durations of the given milliseconds.
func ms(vals ...int) []time.Duration {
	out := make([]time.Duration, len(vals))
	for i, v := range vals {
		out[i] = time.Duration(v) * time.Millisecond
	}
	return out
}

// seq returns 1..n milliseconds.
func seq(n int) []time.Duration {
	out := make([]time.Duration, n)
	for i := range out {
		out[i] = time.Duration(i+1) * time.Millisecond
	}
	return out
}

func TestPercentile(t *testing.T) {
	cases := []struct {
		name   string
		sorted []time.Duration
		p      float64
		want   time.Duration
	}{
		{name: "empty", sorted: nil, p: 50, want: 0},
		{name: "one sample is every percentile", sorted: ms(7), p: 99, want: 7 * time.Millisecond},
		{name: "p50 of an even count is the lower middle", sorted: ms(1, 2, 3, 4), p: 50, want: 2 * time.Millisecond},
		{name: "p50 of an odd count is the middle", sorted: ms(1, 2, 3, 4, 5), p: 50, want: 3 * time.Millisecond},
		{name: "p99 of 1000 is the 990th, not the 991st", sorted: seq(1000), p: 99, want: 990 * time.Millisecond},
		{name: "p99 of 100 is the 99th", sorted: seq(100), p: 99, want: 99 * time.Millisecond},
		{name: "p99 of 20 is the max", sorted: seq(20), p: 99, want: 20 * time.Millisecond},
		{name: "p100 is the max", sorted: seq(10), p: 100, want: 10 * time.Millisecond},
		{name: "a tiny p is the min", sorted: seq(10), p: 0.001, want: time.Millisecond},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			must.Eq(t, c.want, percentile(c.sorted, c.p))
		})
	}
}

func TestSummarize(t *testing.T) {
	cases := []struct {
		name    string
		samples []time.Duration
		want    summary
	}{
		{name: "none", samples: nil, want: summary{}},
		{
			name:    "unsorted input, too few samples for a p99",
			samples: ms(5, 1, 4, 2, 3),
			want:    summary{N: 5, P50: 3 * time.Millisecond, Max: 5 * time.Millisecond},
		},
		{
			name:    "enough samples for a p99",
			samples: seq(200),
			want:    summary{N: 200, P50: 100 * time.Millisecond, P99: 198 * time.Millisecond, Max: 200 * time.Millisecond},
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			must.Eq(t, c.want, summarize(c.samples))
		})
	}
}

func TestSummarize_DoesNotReorderTheCallersSamples(t *testing.T) {
	s := ms(3, 1, 2)
	summarize(s)
	must.Eq(t, ms(3, 1, 2), s)
}
