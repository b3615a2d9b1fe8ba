package leader

import (
	"testing"
	"time"

	"github.com/shoenig/test/must"
)

func TestHeartbeats_TrackKeepsResetMoves(t *testing.T) {
	now := time.Unix(1000, 0)
	h := newHeartbeats(10*time.Second, 5*time.Second, func() time.Time { return now })
	h.track("n")
	at, ok := h.deadline("n")
	must.True(t, ok)
	must.Eq(t, now.Add(15*time.Second), at)

	now = now.Add(3 * time.Second)
	h.track("n") // already tracked: unchanged
	at, _ = h.deadline("n")
	must.Eq(t, now.Add(12*time.Second), at)
	h.reset("n") // a heartbeat moves it
	at, _ = h.deadline("n")
	must.Eq(t, now.Add(15*time.Second), at)

	expired, next := h.queue.PopDue(now.Add(14 * time.Second))
	must.SliceEmpty(t, expired)
	must.False(t, next.IsZero())
	expired, _ = h.queue.PopDue(now.Add(15 * time.Second))
	must.Eq(t, []string{"n"}, expired)
	_, ok = h.deadline("n")
	must.False(t, ok)
}
