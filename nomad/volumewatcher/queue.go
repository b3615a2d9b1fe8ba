package volumewatcher

import (
	"context"
	"sync"
	"time"

	"github.com/berth-io/berth/helper"
	"github.com/berth-io/berth/helper/delayqueue"
)

// volumeKey names a volume: namespace and ID.
type volumeKey struct{ ns, id string }

// queue is a keyed work queue of volumes, in the manner of client-go's
// workqueue (kubernetes-csi/external-attacher uses one the same way):
//
//   - a key is queued at most once, however often it is added;
//   - a key being processed is not handed to a second worker: an Add
//     while it is processed marks it dirty, and Done queues it again;
//   - AddAfter queues a key later (the earliest of several delays wins);
//   - AddRateLimited queues it after a capped exponential backoff that
//     grows with each call until Forget.
//
// Methods are safe for concurrent use. runDelayed owns the delay timer
// and must run for AddAfter to take effect.
type queue struct {
	backoff helper.Backoff

	// mu guards everything below.
	mu         sync.Mutex
	items      []volumeKey
	queued     map[volumeKey]struct{}
	processing map[volumeKey]struct{}
	dirty      map[volumeKey]struct{}
	failures   map[volumeKey]int
	shutdown   bool

	// ready has a token while items may be non-empty.
	ready chan struct{}

	// delayed holds the keys queued for later (its own lock);
	// runDelayed hands them to the queue as they come due.
	delayed *delayqueue.Queue[volumeKey]
}

func newQueue(backoff helper.Backoff) *queue {
	return &queue{
		backoff:    backoff,
		queued:     map[volumeKey]struct{}{},
		processing: map[volumeKey]struct{}{},
		dirty:      map[volumeKey]struct{}{},
		failures:   map[volumeKey]int{},
		ready:      make(chan struct{}, 1),
		delayed:    delayqueue.New[volumeKey](nil),
	}
}

func signal(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}

// Add queues k now.
func (q *queue) Add(k volumeKey) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.addLocked(k)
}

func (q *queue) addLocked(k volumeKey) {
	if q.shutdown {
		return
	}
	if _, ok := q.processing[k]; ok {
		q.dirty[k] = struct{}{}
		return
	}
	if _, ok := q.queued[k]; ok {
		return
	}
	q.queued[k] = struct{}{}
	q.items = append(q.items, k)
	signal(q.ready)
}

// AddAfter queues k once d has passed; d <= 0 queues it now.
func (q *queue) AddAfter(k volumeKey, d time.Duration) {
	if d <= 0 {
		q.Add(k)
		return
	}
	q.mu.Lock()
	down := q.shutdown
	q.mu.Unlock()
	if !down {
		q.delayed.SetEarlier(k, time.Now().Add(d))
	}
}

// AddRateLimited queues k after the backoff for its failures so far, and
// counts one more failure.
func (q *queue) AddRateLimited(k volumeKey) {
	q.mu.Lock()
	n := q.failures[k]
	q.failures[k] = n + 1
	q.mu.Unlock()
	q.AddAfter(k, q.backoff.Delay(n))
}

// Forget resets k's failure count.
func (q *queue) Forget(k volumeKey) {
	q.mu.Lock()
	defer q.mu.Unlock()
	delete(q.failures, k)
}

// Get waits for a key and marks it processing; the caller must call Done
// with it. It returns false when ctx ends or the queue shuts down.
func (q *queue) Get(ctx context.Context) (volumeKey, bool) {
	for {
		q.mu.Lock()
		if q.shutdown {
			q.mu.Unlock()
			return volumeKey{}, false
		}
		if len(q.items) > 0 {
			k := q.items[0]
			q.items[0] = volumeKey{}
			q.items = q.items[1:]
			delete(q.queued, k)
			q.processing[k] = struct{}{}
			if len(q.items) > 0 {
				signal(q.ready) // for the next worker
			}
			q.mu.Unlock()
			return k, true
		}
		q.mu.Unlock()
		select {
		case <-ctx.Done():
			return volumeKey{}, false
		case <-q.ready:
		}
	}
}

// Done ends processing of k, queueing it again if it was added meanwhile.
func (q *queue) Done(k volumeKey) {
	q.mu.Lock()
	defer q.mu.Unlock()
	delete(q.processing, k)
	if _, ok := q.dirty[k]; ok {
		delete(q.dirty, k)
		q.addLocked(k)
	}
}

// Len is the number of queued keys (not counting delayed or processing).
func (q *queue) Len() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.items)
}

// ShutDown makes Get return false and Add do nothing. Workers blocked in
// Get wake up.
func (q *queue) ShutDown() {
	q.mu.Lock()
	defer q.mu.Unlock()
	if !q.shutdown {
		q.shutdown = true
		close(q.ready) // every send is under mu and checks shutdown first
	}
}

// runDelayed moves delayed keys into the queue when their time comes,
// until ctx ends.
func (q *queue) runDelayed(ctx context.Context) {
	_ = q.delayed.Run(ctx, func(keys []volumeKey) {
		q.mu.Lock()
		defer q.mu.Unlock()
		for _, k := range keys {
			q.addLocked(k)
		}
	})
}
