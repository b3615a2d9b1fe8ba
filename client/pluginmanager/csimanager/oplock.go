package csimanager

import (
	"context"
	"sync"
)

// keyedLock serialises operations per key (one volume: "one operation at a
// time per volume"), with waits that honour ctx.
type keyedLock struct {
	// lock guards locks.
	lock  sync.Mutex
	locks map[string]*refLock
}

// refLock is a one-slot semaphore with a count of holders and waiters, so
// the map entry goes when nobody needs it.
type refLock struct {
	sem  chan struct{}
	refs int
}

// acquire takes key's lock, or returns ctx.Err(); call the returned func to
// release it.
func (k *keyedLock) acquire(ctx context.Context, key string) (func(), error) {
	k.lock.Lock()
	if k.locks == nil {
		k.locks = map[string]*refLock{}
	}
	l, ok := k.locks[key]
	if !ok {
		l = &refLock{sem: make(chan struct{}, 1)}
		k.locks[key] = l
	}
	l.refs++
	k.lock.Unlock()

	drop := func() {
		k.lock.Lock()
		defer k.lock.Unlock()
		if l.refs--; l.refs == 0 {
			delete(k.locks, key)
		}
	}
	select {
	case l.sem <- struct{}{}:
		return func() { <-l.sem; drop() }, nil
	case <-ctx.Done():
		drop()
		return nil, ctx.Err()
	}
}
