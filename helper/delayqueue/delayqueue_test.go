package delayqueue

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/shoenig/test/must"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func at(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }

func TestPopDue(t *testing.T) {
	q := New[string](nil)
	q.Set("a", at(10))
	q.Set("b", at(20))
	q.Set("c", at(30))
	q.Set("a", at(40)) // extended
	must.True(t, q.Remove("c"))
	must.False(t, q.Remove("c"))

	keys, next := q.PopDue(at(5))
	must.SliceEmpty(t, keys)
	must.Eq(t, at(10), next) // a's old entry: early, never late

	keys, next = q.PopDue(at(15))
	must.SliceEmpty(t, keys) // a was extended
	must.Eq(t, at(20), next)
	keys, _ = q.PopDue(at(25))
	must.Eq(t, []string{"b"}, keys)
	keys, _ = q.PopDue(at(35))
	must.SliceEmpty(t, keys) // c was removed
	keys, next = q.PopDue(at(45))
	must.Eq(t, []string{"a"}, keys)
	must.Eq(t, time.Time{}, next)
	must.Eq(t, 0, q.Len())

	// Earliest first within one batch.
	q.Set("y", at(52))
	q.Set("x", at(51))
	q.Set("z", at(53))
	keys, _ = q.PopDue(at(60))
	must.Eq(t, []string{"x", "y", "z"}, keys)
}

func TestSetModes(t *testing.T) {
	cases := []struct {
		name    string
		set     func(q *Queue[string]) bool
		changed bool
		due     time.Time
	}{
		{"earlier moves forward", func(q *Queue[string]) bool { return q.SetEarlier("k", at(5)) }, true, at(5)},
		{"earlier keeps the earlier", func(q *Queue[string]) bool { return q.SetEarlier("k", at(15)) }, false, at(10)},
		{"earlier keeps an equal", func(q *Queue[string]) bool { return q.SetEarlier("k", at(10)) }, false, at(10)},
		{"if absent keeps present", func(q *Queue[string]) bool { return q.SetIfAbsent("k", at(5)) }, false, at(10)},
		{"set moves later", func(q *Queue[string]) bool { q.Set("k", at(15)); return true }, true, at(15)},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			q := New[string](nil)
			q.Set("k", at(10))
			must.Eq(t, c.changed, c.set(q))
			due, ok := q.Due("k")
			must.True(t, ok)
			must.Eq(t, c.due, due)
			keys, _ := q.PopDue(c.due.Add(-time.Nanosecond))
			must.SliceEmpty(t, keys)
			keys, _ = q.PopDue(c.due)
			must.Eq(t, []string{"k"}, keys)
		})
	}
	q := New[string](nil)
	must.True(t, q.SetIfAbsent("new", at(1)))
	must.True(t, q.SetEarlier("other", at(1)))
	must.Eq(t, 2, q.Len())
}

func TestWait(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		q := New[string](nil)
		start := time.Now()
		q.Set("late", start.Add(time.Hour))

		type got struct {
			keys []string
			err  error
			at   time.Duration
		}
		out := make(chan got, 1)
		go func() {
			keys, err := q.Wait(t.Context())
			out <- got{keys, err, time.Since(start)}
		}()
		synctest.Wait() // the waiter sleeps on the hour timer

		// An earlier key wakes it to sleep on the earlier time.
		time.Sleep(time.Minute) // fake time: advances the bubble's clock
		q.Set("soon", time.Now().Add(10*time.Second))
		r := <-out
		must.NoError(t, r.err)
		must.Eq(t, []string{"soon"}, r.keys)
		must.Eq(t, time.Minute+10*time.Second, r.at)

		// Moving a key later while it is waited for delays the wait.
		q.Set("late", start.Add(2*time.Hour))
		keys, err := q.Wait(t.Context())
		must.NoError(t, err)
		must.Eq(t, []string{"late"}, keys)
		must.Eq(t, 2*time.Hour, time.Since(start))

		// An empty queue waits for its ctx.
		ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
		defer cancel()
		_, err = q.Wait(ctx)
		must.ErrorIs(t, err, context.DeadlineExceeded)
	})
}

// Run hands batches to fn in the caller's goroutine; fn may file a key
// again (a retry) and Run returns when ctx ends.
func TestRun(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		q := New[string](nil)
		start := time.Now()
		q.Set("n1", start.Add(time.Second))
		ctx, cancel := context.WithCancel(t.Context())
		var seen []time.Duration
		err := q.Run(ctx, func(keys []string) {
			must.Eq(t, []string{"n1"}, keys)
			seen = append(seen, time.Since(start))
			if len(seen) < 3 {
				q.SetIfAbsent("n1", time.Now().Add(5*time.Second))
			} else {
				cancel()
			}
		})
		must.ErrorIs(t, err, context.Canceled)
		must.Eq(t, []time.Duration{time.Second, 6 * time.Second, 11 * time.Second}, seen)
	})
}

// Keys that are set and removed without coming due do not pile up as
// stale heap entries.
func TestRemoveCompacts(t *testing.T) {
	q := New[int](nil)
	q.Set(-1, at(1))
	for i := range 10000 {
		q.Set(i, at(100+i))
		q.Remove(i)
	}
	must.Eq(t, 1, q.Len())
	must.Less(t, 64, len(q.heap))
	keys, _ := q.PopDue(at(1_000_000))
	must.Eq(t, []int{-1}, keys)
}
