package leader

import (
	"container/heap"
	"context"
	"sync"
	"time"

	"github.com/berth-io/berth/nomad/structs"
)

// heartbeats keeps one deadline per live node on the leader. A client
// heartbeat (Node.UpdateStatus) moves its node's deadline to now + TTL +
// grace; a node whose deadline passes is marked down through Raft, with
// an eval for every job that has live allocs on it, in the same entry —
// the schedulers then mark those allocs lost and replace them.
//
//	first seen (term start, new node) ──► deadline now+TTL+grace
//	heartbeat                         ──► deadline now+TTL+grace
//	deadline passes                   ──► down (+ evals), deadline dropped
//	node down or deregistered         ──► deadline dropped
//
// Clients are told TTL; grace covers network delay and leader failover.
// Methods are safe for concurrent use; run owns the timer.
type heartbeats struct {
	ttl   time.Duration
	grace time.Duration
	now   func() time.Time

	// mu guards queue.
	mu    sync.Mutex
	queue ttlQueue
	// wake pokes run when a deadline earlier than its timer appears.
	wake chan struct{}
}

func newHeartbeats(ttl, grace time.Duration, now func() time.Time) *heartbeats {
	if now == nil {
		now = time.Now
	}
	return &heartbeats{ttl: ttl, grace: grace, now: now, queue: newTTLQueue(), wake: make(chan struct{}, 1)}
}

// reset records a heartbeat of nodeID.
func (h *heartbeats) reset(nodeID string) {
	h.set(nodeID, true)
}

// track gives nodeID a deadline unless it has one.
func (h *heartbeats) track(nodeID string) {
	h.set(nodeID, false)
}

func (h *heartbeats) set(nodeID string, force bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if _, ok := h.queue.deadline(nodeID); ok && !force {
		return
	}
	if h.queue.set(nodeID, h.now().Add(h.ttl+h.grace)) {
		select {
		case h.wake <- struct{}{}:
		default:
		}
	}
}

// untrack drops nodeID's deadline.
func (h *heartbeats) untrack(nodeID string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.queue.remove(nodeID)
}

// deadline returns nodeID's deadline, if it has one.
func (h *heartbeats) deadline(nodeID string) (time.Time, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.queue.deadline(nodeID)
}

// popExpired removes and returns the nodes whose deadline is at or before
// now, and the next deadline (zero when none is left).
func (h *heartbeats) popExpired(now time.Time) ([]string, time.Time) {
	h.mu.Lock()
	defer h.mu.Unlock()
	expired := h.queue.popExpired(now)
	next, _ := h.queue.next()
	return expired, next
}

// runHeartbeats marks nodes down as their deadlines pass, until ctx ends.
func (s *server) runHeartbeats(ctx context.Context, sc *Term) {
	logger := s.logger.Named("heartbeat")
	h := sc.heartbeats
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		expired, next := h.popExpired(h.now())
		if len(expired) > 0 {
			if err := s.expireNodes(expired, h); err != nil {
				// Give them another deadline; a heartbeat in between wins.
				logger.Warn("marking nodes down failed; retrying", "nodes", len(expired), "error", err)
				for _, id := range expired {
					h.track(id)
				}
			}
			continue
		}
		wait := time.Hour
		if !next.IsZero() {
			wait = max(next.Sub(h.now()), 0)
		}
		if !timer.Stop() {
			select {
			case <-timer.C:
			default:
			}
		}
		timer.Reset(wait)
		select {
		case <-ctx.Done():
			return
		case <-timer.C:
		case <-h.wake:
		}
	}
}

// expireNodes marks down, in one Raft entry, the nodes of ids that are
// still up and did not heartbeat since their deadline was popped, with one
// eval per job that has live allocs on them.
func (s *server) expireNodes(ids []string, h *heartbeats) error {
	snap, err := s.config.State().Snapshot()
	if err != nil {
		return err
	}
	now := time.Now().UnixNano()
	var down []string
	req := &structs.NodeBatchUpdateStatusRequest{Timestamp: now}
	for _, id := range ids {
		if _, beat := h.deadline(id); beat {
			continue // heartbeated after the pop
		}
		node, err := snap.NodeByID(nil, id)
		if err != nil {
			return err
		}
		if node == nil || node.Status == structs.NodeStatusDown {
			continue
		}
		down = append(down, id)
		req.Updates = append(req.Updates, &structs.NodeUpdateStatusRequest{
			NodeID:      id,
			Status:      structs.NodeStatusDown,
			Description: "node missed its heartbeat deadline",
			Timestamp:   now,
		})
	}
	if len(down) == 0 {
		return nil
	}
	if req.Evals, err = LiveAllocJobEvals(snap, down, structs.EvalTriggerNodeUpdate, now); err != nil {
		return err
	}
	_, err = s.raftApply(structs.NodeBatchUpdateStatusRequestType, req)
	if err == nil {
		s.logger.Named("heartbeat").Warn("nodes missed their heartbeat deadline; marked down", "nodes", down, "evals", len(req.Evals))
	}
	return err
}

// ttlQueue is a set of deadlines by ID, cheap to extend: set only pushes
// a heap entry when a deadline comes earlier, and popExpired re-files
// entries whose deadline was extended since.
type ttlQueue struct {
	deadlines map[string]time.Time
	heap      ttlHeap
}

func newTTLQueue() ttlQueue { return ttlQueue{deadlines: map[string]time.Time{}} }

// set sets id's deadline and reports whether it is now earlier than any
// heap entry for id (the caller may need to wake its timer).
func (q *ttlQueue) set(id string, at time.Time) bool {
	old, ok := q.deadlines[id]
	q.deadlines[id] = at
	if ok && !at.Before(old) {
		return false
	}
	heap.Push(&q.heap, ttlEntry{id, at})
	return true
}

func (q *ttlQueue) remove(id string) { delete(q.deadlines, id) }

func (q *ttlQueue) deadline(id string) (time.Time, bool) {
	at, ok := q.deadlines[id]
	return at, ok
}

// popExpired removes and returns the IDs whose deadline is at or before
// now, oldest first.
func (q *ttlQueue) popExpired(now time.Time) []string {
	var out []string
	for len(q.heap) > 0 && !q.heap[0].at.After(now) {
		e := heap.Pop(&q.heap).(ttlEntry)
		at, ok := q.deadlines[e.id]
		switch {
		case !ok:
			// removed
		case at.After(now):
			if at.After(e.at) {
				heap.Push(&q.heap, ttlEntry{e.id, at}) // extended since
			}
		default:
			delete(q.deadlines, e.id)
			out = append(out, e.id)
		}
	}
	return out
}

// next returns the earliest heap entry (possibly stale, never late).
func (q *ttlQueue) next() (time.Time, bool) {
	if len(q.heap) == 0 {
		return time.Time{}, false
	}
	return q.heap[0].at, true
}

type ttlEntry struct {
	id string
	at time.Time
}

type ttlHeap []ttlEntry

func (h ttlHeap) Len() int           { return len(h) }
func (h ttlHeap) Less(i, j int) bool { return h[i].at.Before(h[j].at) }
func (h ttlHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *ttlHeap) Push(x any)        { *h = append(*h, x.(ttlEntry)) }
func (h *ttlHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}
