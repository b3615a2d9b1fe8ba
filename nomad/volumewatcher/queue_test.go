package volumewatcher

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/shoenig/test/must"

	"github.com/berth-io/berth/helper"
)

// getNow takes a key that must already be queued.
func getNow(t *testing.T, q *queue) volumeKey {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	q.mu.Lock()
	n := len(q.items)
	q.mu.Unlock()
	must.Positive(t, n, must.Sprint("nothing queued"))
	k, ok := q.Get(ctx)
	must.True(t, ok)
	return k
}

func TestQueue_DedupesAndRequeuesDirtyKeys(t *testing.T) {
	q := newQueue(helper.Backoff{Base: time.Second, Max: time.Minute})
	a, b := volumeKey{"default", "a"}, volumeKey{"default", "b"}
	q.Add(a)
	q.Add(b)
	q.Add(a)
	must.Eq(t, 2, q.Len())

	must.Eq(t, a, getNow(t, q))
	// Added while processing: not handed to a second worker...
	q.Add(a)
	must.Eq(t, b, getNow(t, q))
	must.Eq(t, 0, q.Len())
	// ...but queued again once done.
	q.Done(a)
	must.Eq(t, 1, q.Len())
	must.Eq(t, a, getNow(t, q))
	q.Done(a)
	q.Done(b)
	must.Eq(t, 0, q.Len())
}

func TestQueue_GetWaitsAndShutDownWakes(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		q := newQueue(helper.Backoff{Base: time.Second, Max: time.Minute})
		got := make(chan bool, 1)
		go func() {
			_, ok := q.Get(context.Background())
			got <- ok
		}()
		synctest.Wait()
		must.Eq(t, 0, len(got), must.Sprint("Get waits for work"))
		q.ShutDown()
		must.False(t, <-got)
		q.Add(volumeKey{"default", "a"})
		must.Eq(t, 0, q.Len(), must.Sprint("a shut down queue takes nothing"))
		q.ShutDown() // twice is fine
	})
}

func TestQueue_AddAfterAndBackoff(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		q := newQueue(helper.Backoff{Base: time.Second, Max: 4 * time.Second, NoJitter: true})
		go q.runDelayed(ctx)
		a, b := volumeKey{"default", "a"}, volumeKey{"default", "b"}

		q.AddAfter(a, 10*time.Second)
		q.AddAfter(a, 30*time.Second) // a later delay does not postpone it
		q.AddAfter(b, 5*time.Second)
		time.Sleep(4 * time.Second)
		synctest.Wait()
		must.Eq(t, 0, q.Len())
		time.Sleep(time.Second)
		synctest.Wait()
		must.Eq(t, b, getNow(t, q))
		q.Done(b)
		time.Sleep(5 * time.Second)
		synctest.Wait()
		must.Eq(t, a, getNow(t, q))
		q.Done(a)
		time.Sleep(time.Minute)
		synctest.Wait()
		must.Eq(t, 0, q.Len(), must.Sprint("the superseded delay does not queue it again"))

		// Rate-limited adds back off: 1s, 2s, 4s, 4s; Forget resets.
		var waits []time.Duration
		for range 4 {
			start := time.Now()
			q.AddRateLimited(a)
			for q.Len() == 0 {
				time.Sleep(100 * time.Millisecond)
				synctest.Wait()
			}
			waits = append(waits, time.Since(start).Round(100*time.Millisecond))
			must.Eq(t, a, getNow(t, q))
			q.Done(a)
		}
		must.Eq(t, []time.Duration{time.Second, 2 * time.Second, 4 * time.Second, 4 * time.Second}, waits)
		q.Forget(a)
		start := time.Now()
		q.AddRateLimited(a)
		for q.Len() == 0 {
			time.Sleep(100 * time.Millisecond)
			synctest.Wait()
		}
		must.Eq(t, time.Second, time.Since(start).Round(100*time.Millisecond))
	})
}
