// Package keylock is a mutex per key whose waits honour a context: one
// operation at a time per volume, per controller target, per plugin.
//
// The zero Locks is ready to use. A key's entry exists only while its lock
// is held, so a Locks over an unbounded key space (volume IDs) does not
// grow. Waiters are not queued in order: when a lock is released every
// waiter for its key wakes and one of them wins.
package keylock

import (
	"context"
	"sync"
)

// Locks holds one lock per key. Methods are safe for concurrent use; a
// Locks must not be copied after first use.
type Locks[K comparable] struct {
	// mu guards held: the channel of each held key, closed on unlock.
	mu   sync.Mutex
	held map[K]chan struct{}
}

// Lock waits for key's lock and returns the func that releases it, or
// ctx.Err() (unwrapped, so errors.Is(err, context.Canceled) holds) when ctx
// ends first. The unlock func may be called more than once, from any
// goroutine; only the first call releases, so a deferred unlock next to an
// early explicit one is safe.
func (l *Locks[K]) Lock(ctx context.Context, key K) (unlock func(), err error) {
	for {
		// A ctx that has already ended never takes the lock, even a free
		// one: the caller gave up.
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		l.mu.Lock()
		wait, busy := l.held[key]
		if !busy {
			if l.held == nil {
				l.held = map[K]chan struct{}{}
			}
			ch := make(chan struct{})
			l.held[key] = ch
			l.mu.Unlock()
			var once sync.Once
			return func() {
				once.Do(func() {
					l.mu.Lock()
					delete(l.held, key)
					l.mu.Unlock()
					close(ch)
				})
			}, nil
		}
		l.mu.Unlock()
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-wait:
		}
	}
}

// Held reports whether key's lock is held right now (for status and
// tests; the answer may be stale as soon as it returns).
func (l *Locks[K]) Held(key K) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	_, ok := l.held[key]
	return ok
}

// Len is the number of keys whose lock is held.
func (l *Locks[K]) Len() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.held)
}
