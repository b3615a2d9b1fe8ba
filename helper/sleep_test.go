package helper

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/shoenig/test/must"
)

func TestSleepCtx(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		must.True(t, SleepCtx(t.Context(), 3*time.Second))
		must.Eq(t, 3*time.Second, time.Since(start))

		ctx, cancel := context.WithTimeout(t.Context(), time.Second)
		defer cancel()
		start = time.Now()
		must.False(t, SleepCtx(ctx, time.Hour))
		must.Eq(t, time.Second, time.Since(start)) // returned at cancel, not after an hour

		// Ended ctx: false even for no wait, so retry loops stop.
		must.False(t, SleepCtx(ctx, 0))
		must.False(t, SleepCtx(ctx, -time.Second))
		must.True(t, SleepCtx(t.Context(), 0))
	})
}
