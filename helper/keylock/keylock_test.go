package keylock

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/shoenig/test/must"
)

// lockAsync takes key's lock in a goroutine and reports on the returned
// channel once it holds it (or failed).
func lockAsync(ctx context.Context, l *Locks[string], key string) chan result {
	ch := make(chan result, 1)
	go func() {
		u, err := l.Lock(ctx, key)
		ch <- result{u, err}
	}()
	return ch
}

type result struct {
	unlock func()
	err    error
}

func TestLock_WaitsForHolder(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var l Locks[string]
		ctx := t.Context()
		u1, err := l.Lock(ctx, "a")
		must.NoError(t, err)

		other, err := l.Lock(ctx, "b") // another key is independent
		must.NoError(t, err)
		other()

		got := lockAsync(ctx, &l, "a")
		synctest.Wait()
		select {
		case <-got:
			t.Fatal("second Lock of a held key returned before unlock")
		default:
		}
		u1()
		synctest.Wait()
		r := <-got
		must.NoError(t, r.err)
		must.True(t, l.Held("a"))
		r.unlock()
		must.False(t, l.Held("a"))
		must.Eq(t, 0, l.Len()) // no entry left behind
	})
}

func TestLock_CtxEndsWhileWaiting(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var l Locks[string]
		u1, err := l.Lock(t.Context(), "a")
		must.NoError(t, err)

		ctx, cancel := context.WithTimeout(t.Context(), time.Second)
		defer cancel()
		start := time.Now()
		_, err = l.Lock(ctx, "a")
		must.ErrorIs(t, err, context.DeadlineExceeded)
		must.Eq(t, time.Second, time.Since(start))

		// The abandoned wait took nothing: after the holder lets go the
		// key is free.
		u1()
		must.Eq(t, 0, l.Len())
		u2, err := l.Lock(t.Context(), "a")
		must.NoError(t, err)
		u2()
	})
}

func TestLock_EndedCtxNeverLocks(t *testing.T) {
	var l Locks[string]
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	u, err := l.Lock(ctx, "free")
	must.True(t, errors.Is(err, context.Canceled))
	must.Nil(t, u)
	must.False(t, l.Held("free"))
}

// A second call of an unlock func must not release a later holder's lock.
// (nomad/csi_controller.go's first keyedMutex deleted the key and closed
// the channel on every call: a double unlock freed the next holder's lock
// or panicked on the closed channel.)
func TestLock_UnlockIsIdempotent(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var l Locks[string]
		ctx := t.Context()
		u1, err := l.Lock(ctx, "a")
		must.NoError(t, err)
		u1()
		u2, err := l.Lock(ctx, "a")
		must.NoError(t, err)

		u1() // stale: must not free u2's lock
		must.True(t, l.Held("a"))
		got := lockAsync(ctx, &l, "a")
		synctest.Wait()
		select {
		case <-got:
			t.Fatal("a stale unlock released another holder's lock")
		default:
		}
		u2()
		u2()
		synctest.Wait()
		r := <-got
		must.NoError(t, r.err)
		r.unlock()
		must.Eq(t, 0, l.Len())
	})
}

// Many goroutines on few keys: never two holders of one key at once.
func TestLock_MutualExclusion(t *testing.T) {
	var l Locks[int]
	var holders [3]atomic.Int32
	var wg sync.WaitGroup
	for i := range 30 {
		wg.Go(func() {
			key := i % len(holders)
			for range 100 {
				u, err := l.Lock(t.Context(), key)
				must.NoError(t, err)
				if n := holders[key].Add(1); n != 1 {
					t.Errorf("key %d has %d holders", key, n)
				}
				holders[key].Add(-1)
				u()
			}
		})
	}
	wg.Wait()
	must.Eq(t, 0, l.Len())
}
