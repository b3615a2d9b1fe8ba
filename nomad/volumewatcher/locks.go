package volumewatcher

import (
	"context"
	"sync"
)

// locks is one mutex per volume that waits with a context. The watcher's
// passes and the servers' claim endpoints hold a volume's lock while they
// read its claims, call its controller and write the result, so that two
// of them never act on one volume at once (one controller RPC per volume
// at a time, and no decision made on state another writer is changing).
type locks struct {
	// mu guards held: the channel of each held lock, closed on unlock.
	mu   sync.Mutex
	held map[volumeKey]chan struct{}
}

func newLocks() *locks {
	return &locks{held: map[volumeKey]chan struct{}{}}
}

// lock waits for k's lock and returns its unlock function (safe to call
// more than once), or ctx's error.
func (l *locks) lock(ctx context.Context, k volumeKey) (func(), error) {
	for {
		l.mu.Lock()
		ch, busy := l.held[k]
		if !busy {
			ch = make(chan struct{})
			l.held[k] = ch
			l.mu.Unlock()
			var once sync.Once
			return func() {
				once.Do(func() {
					l.mu.Lock()
					delete(l.held, k)
					l.mu.Unlock()
					close(ch)
				})
			}, nil
		}
		l.mu.Unlock()
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-ch:
		}
	}
}
