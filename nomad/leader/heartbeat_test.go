package leader

import (
	"testing"
	"time"

	"github.com/shoenig/test/must"
)

func TestTTLQueue(t *testing.T) {
	t0 := time.Unix(1000, 0)
	q := newTTLQueue()
	must.True(t, q.set("a", t0.Add(10*time.Second)))
	must.True(t, q.set("b", t0.Add(20*time.Second)))
	must.True(t, q.set("c", t0.Add(30*time.Second)))
	must.False(t, q.set("a", t0.Add(40*time.Second))) // extended: no new entry
	q.remove("c")

	next, ok := q.next()
	must.True(t, ok)
	must.Eq(t, t0.Add(10*time.Second), next) // stale but never late

	must.SliceEmpty(t, q.popExpired(t0.Add(15*time.Second))) // a was extended
	must.Eq(t, []string{"b"}, q.popExpired(t0.Add(25*time.Second)))
	must.SliceEmpty(t, q.popExpired(t0.Add(35*time.Second))) // c was removed
	must.Eq(t, []string{"a"}, q.popExpired(t0.Add(45*time.Second)))
	_, ok = q.next()
	must.False(t, ok)

	// An earlier deadline wins over a later heap entry.
	q.set("d", t0.Add(100*time.Second))
	must.True(t, q.set("d", t0.Add(50*time.Second)))
	must.Eq(t, []string{"d"}, q.popExpired(t0.Add(60*time.Second)))
	must.SliceEmpty(t, q.popExpired(t0.Add(200*time.Second)))
}

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

	expired, next := h.popExpired(now.Add(14 * time.Second))
	must.SliceEmpty(t, expired)
	must.False(t, next.IsZero())
	expired, _ = h.popExpired(now.Add(15 * time.Second))
	must.Eq(t, []string{"n"}, expired)
	_, ok = h.deadline("n")
	must.False(t, ok)
}
