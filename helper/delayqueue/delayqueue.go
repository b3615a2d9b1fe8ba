// Package delayqueue files keys under a due time and hands them out as
// they come due: node heartbeat deadlines, volumes to reconcile later,
// evaluations that wait before they may be scheduled.
//
// A key has at most one due time; setting it again moves it (Set), only
// brings it forward (SetEarlier) or leaves it alone (SetIfAbsent). A key
// leaves the queue when it is handed out or removed.
//
// The queue starts no goroutine. Whoever calls Wait (or Run) owns the
// wait: it blocks on one timer for the earliest due time and returns when
// keys are due or its ctx ends. PopDue is the same step without waiting,
// for callers that hold their own clock (tests with a fake now).
//
// Extending a due time, the common case (a heartbeat every few seconds),
// costs a map write and no heap work: the heap keeps the key's earlier
// entry, and when that entry comes up the key is filed again at its
// current time.
package delayqueue

import (
	"container/heap"
	"context"
	"sync"
	"time"
)

// Queue is a set of keys, each with a due time. Methods are safe for
// concurrent use. Create one with New.
type Queue[K comparable] struct {
	now func() time.Time

	// mu guards everything below.
	mu sync.Mutex
	// due is the truth: each queued key's due time. Every key in due has
	// a heap entry at or before its due time; entries whose key is gone,
	// or whose time is no longer the key's, are stale and skipped.
	due  map[K]time.Time
	heap entries[K]
	// changed is closed (and replaced) when the earliest entry moves
	// earlier, so that a Wait sleeping on a later timer looks again.
	changed chan struct{}
}

// New returns an empty queue that reads the time from now (time.Now when
// nil). Wait sleeps on real timers, so an injected now is for PopDue; in
// a testing/synctest bubble time.Now is already fake and nil is right.
func New[K comparable](now func() time.Time) *Queue[K] {
	if now == nil {
		now = time.Now
	}
	return &Queue[K]{now: now, due: map[K]time.Time{}, changed: make(chan struct{})}
}

// Set files key at at, earlier or later than before.
func (q *Queue[K]) Set(key K, at time.Time) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.setLocked(key, at)
}

// SetEarlier files key at at unless it is already due at or before at,
// and reports whether it changed anything.
func (q *Queue[K]) SetEarlier(key K, at time.Time) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	if cur, ok := q.due[key]; ok && !at.Before(cur) {
		return false
	}
	q.setLocked(key, at)
	return true
}

// SetIfAbsent files key at at unless it is queued already, and reports
// whether it did.
func (q *Queue[K]) SetIfAbsent(key K, at time.Time) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	if _, ok := q.due[key]; ok {
		return false
	}
	q.setLocked(key, at)
	return true
}

func (q *Queue[K]) setLocked(key K, at time.Time) {
	cur, ok := q.due[key]
	q.due[key] = at
	if ok && !at.Before(cur) {
		return // the entry at cur (or earlier) re-files key when it comes up
	}
	wake := len(q.heap) == 0 || at.Before(q.heap[0].at)
	heap.Push(&q.heap, entry[K]{key, at})
	if wake {
		close(q.changed)
		q.changed = make(chan struct{})
	}
}

// Remove takes key out of the queue and reports whether it was there.
func (q *Queue[K]) Remove(key K) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	_, ok := q.due[key]
	delete(q.due, key)
	q.compactLocked()
	return ok
}

// Due returns key's due time, if it is queued.
func (q *Queue[K]) Due(key K) (time.Time, bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	at, ok := q.due[key]
	return at, ok
}

// Len is the number of queued keys.
func (q *Queue[K]) Len() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.due)
}

// PopDue removes and returns the keys due at or before now, earliest
// first, and the time to look again (zero when the queue is empty). That
// time may be early, never late: at worst a look finds nothing due.
func (q *Queue[K]) PopDue(now time.Time) (keys []K, next time.Time) {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.popDueLocked(now)
}

func (q *Queue[K]) popDueLocked(now time.Time) ([]K, time.Time) {
	var out []K
	for len(q.heap) > 0 && !q.heap[0].at.After(now) {
		e := heap.Pop(&q.heap).(entry[K])
		at, ok := q.due[e.key]
		switch {
		case !ok:
			// removed, or handed out through an earlier entry
		case at.After(now):
			if at.After(e.at) {
				heap.Push(&q.heap, entry[K]{e.key, at}) // moved later since
			}
		default:
			delete(q.due, e.key)
			out = append(out, e.key)
		}
	}
	if len(q.heap) == 0 {
		return out, time.Time{}
	}
	return out, q.heap[0].at
}

// compactLocked rebuilds the heap from due when stale entries (keys
// removed before they came up) outnumber live ones, so that a queue whose
// keys come and go without ever coming due stays small.
func (q *Queue[K]) compactLocked() {
	if len(q.heap) < 64 || len(q.heap) < 4*len(q.due) {
		return
	}
	q.heap = q.heap[:0]
	for k, at := range q.due {
		q.heap = append(q.heap, entry[K]{k, at})
	}
	heap.Init(&q.heap)
}

// Wait blocks until keys are due and returns them (removed from the
// queue, earliest first), or returns ctx.Err() when ctx ends first.
func (q *Queue[K]) Wait(ctx context.Context) ([]K, error) {
	var timer *time.Timer
	defer func() {
		if timer != nil {
			timer.Stop()
		}
	}()
	for {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		q.mu.Lock()
		now := q.now()
		keys, next := q.popDueLocked(now)
		changed := q.changed
		q.mu.Unlock()
		if len(keys) > 0 {
			return keys, nil
		}
		var fire <-chan time.Time
		if !next.IsZero() {
			d := max(next.Sub(now), 0)
			if timer == nil {
				timer = time.NewTimer(d)
			} else {
				timer.Reset(d) // since Go 1.23 no stale tick survives Reset
			}
			fire = timer.C
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-changed:
		case <-fire:
		}
	}
}

// Run calls fn with each batch of due keys, in the caller's goroutine,
// until ctx ends; it then returns ctx.Err(). fn runs without the queue's
// lock held, so it may Set keys again (a retry).
func (q *Queue[K]) Run(ctx context.Context, fn func(keys []K)) error {
	for {
		keys, err := q.Wait(ctx)
		if err != nil {
			return err
		}
		fn(keys)
	}
}

type entry[K comparable] struct {
	key K
	at  time.Time
}

// entries is a min-heap of entries by time.
type entries[K comparable] []entry[K]

func (h entries[K]) Len() int           { return len(h) }
func (h entries[K]) Less(i, j int) bool { return h[i].at.Before(h[j].at) }
func (h entries[K]) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *entries[K]) Push(x any)        { *h = append(*h, x.(entry[K])) }
func (h *entries[K]) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}
