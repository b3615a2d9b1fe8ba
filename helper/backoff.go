package helper

import (
	"math/rand/v2"
	"time"
)

// Backoff computes capped exponential backoff with full jitter: attempt 0
// waits up to Base, each later attempt doubles the cap until Max.
type Backoff struct {
	Base time.Duration
	Max  time.Duration
	// Jitter, when false, returns the cap itself (deterministic tests).
	NoJitter bool
}

// Delay returns the wait before retry number attempt (0-based).
func (b Backoff) Delay(attempt int) time.Duration {
	d := b.Base
	for i := 0; i < attempt && d < b.Max; i++ {
		d *= 2
	}
	if d > b.Max {
		d = b.Max
	}
	if b.NoJitter || d <= 0 {
		return d
	}
	// Full jitter, but never less than half, so retries do not bunch at 0.
	return d/2 + rand.N(d/2+1)
}
