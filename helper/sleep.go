package helper

import (
	"context"
	"time"
)

// SleepCtx waits d and returns true, or returns false as soon as ctx ends.
// A ctx that has already ended returns false even when d <= 0, so a retry
// loop built on it stops on cancel instead of spinning.
func SleepCtx(ctx context.Context, d time.Duration) bool {
	if ctx.Err() != nil {
		return false
	}
	if d <= 0 {
		return true
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}
