package leader

import (
	"container/heap"
	"context"
	"sync"
	"time"

	"github.com/berth-io/berth/helper"
	"github.com/berth-io/berth/helper/delayqueue"
	"github.com/berth-io/berth/nomad/structs"
)

// evalBroker holds the pending evals of one leadership term and hands
// them to scheduler workers: highest priority first, FIFO within a
// priority, and at most one eval per job at a time.
//
//	Enqueue ──► delayed (WaitUntil, nack delay) ──(due)──┐
//	   │                                                 ▼
//	   └──► job busy? ──yes──► waiting[job] ──(ack)──► ready ──Dequeue──► unacked
//	             └──no───────────────────────────────► ready                │
//	                                      Ack: done, next eval of the job ◄─┤
//	                      Nack: again after a delay, or failed past limit ◄─┘
//
// A job is busy from the moment one of its evals is ready until that eval
// is acked (or fails): later evals of the job wait, so two workers never
// plan the same job at once. Enqueue ignores an eval ID the broker holds.
// The broker lives for one term; leadership loss drops it (flush).
//
// Methods are safe for concurrent use. Run must be running for delayed
// evals to become ready.
type evalBroker struct {
	now           func() time.Time
	deliveryLimit int
	nackDelay     time.Duration

	// mu guards every field below.
	mu         sync.Mutex
	seq        uint64
	ready      evalHeap
	busy       map[jobKey]string       // job → the eval ready or unacked for it
	waiting    map[jobKey]*evalHeap    // job → evals waiting for it
	unacked    map[string]*unackedEval // eval ID → eval handed to a worker
	known      map[string]bool         // every eval ID held anywhere above
	deliveries map[string]int          // eval ID → times handed out
	failed     []*structs.Evaluation   // over the delivery limit, for the reaper
	notify     chan struct{}           // closed (and replaced) when ready or failed grows
	// delayed holds the evals not due yet, by ID; delays files their IDs
	// under their due times (it has its own lock: take mu first).
	delayed map[string]*structs.Evaluation
	delays  *delayqueue.Queue[string]
}

type jobKey struct{ ns, id string }

func evalJob(e *structs.Evaluation) jobKey { return jobKey{e.Namespace, e.JobID} }

type unackedEval struct {
	eval  *structs.Evaluation
	token string
}

// brokerStats counts what the broker holds.
type brokerStats struct {
	Ready, Unacked, Waiting, Delayed, Failed int
}

func newEvalBroker(deliveryLimit int, nackDelay time.Duration, now func() time.Time) *evalBroker {
	if deliveryLimit < 1 {
		deliveryLimit = 1
	}
	if now == nil {
		now = time.Now
	}
	b := &evalBroker{now: now, deliveryLimit: deliveryLimit, nackDelay: nackDelay, delays: delayqueue.New[string](now)}
	b.flushLocked()
	return b
}

// flush drops everything the broker holds.
func (b *evalBroker) flush() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.flushLocked()
}

func (b *evalBroker) flushLocked() {
	b.ready = nil
	b.busy = map[jobKey]string{}
	b.waiting = map[jobKey]*evalHeap{}
	b.unacked = map[string]*unackedEval{}
	for id := range b.delayed {
		b.delays.Remove(id)
	}
	b.delayed = map[string]*structs.Evaluation{}
	b.known = map[string]bool{}
	b.deliveries = map[string]int{}
	b.failed = nil
	if b.notify != nil {
		close(b.notify)
	}
	b.notify = make(chan struct{})
}

// Enqueue adds a pending eval. An eval whose WaitUntil is in the future
// waits until then.
func (b *evalBroker) Enqueue(e *structs.Evaluation) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.known[e.ID] {
		return
	}
	b.known[e.ID] = true
	if e.WaitUntil > b.now().UnixNano() {
		b.delayLocked(e, e.WaitUntil)
		return
	}
	b.readyOrWaitLocked(e)
}

// readyOrWaitLocked makes e ready, unless its job is busy.
func (b *evalBroker) readyOrWaitLocked(e *structs.Evaluation) {
	key := evalJob(e)
	if _, busy := b.busy[key]; busy {
		w := b.waiting[key]
		if w == nil {
			w = &evalHeap{}
			b.waiting[key] = w
		}
		b.seq++
		heap.Push(w, evalItem{e, b.seq})
		return
	}
	b.busy[key] = e.ID
	b.pushReadyLocked(e)
}

func (b *evalBroker) pushReadyLocked(e *structs.Evaluation) {
	b.seq++
	heap.Push(&b.ready, evalItem{e, b.seq})
	b.signalLocked()
}

func (b *evalBroker) signalLocked() {
	close(b.notify)
	b.notify = make(chan struct{})
}

func (b *evalBroker) delayLocked(e *structs.Evaluation, at int64) {
	b.delayed[e.ID] = e
	b.delays.Set(e.ID, time.Unix(0, at))
}

// Dequeue waits for a ready eval and hands it out with a token that Ack
// and Nack must present. It returns ctx.Err() when ctx ends first.
func (b *evalBroker) Dequeue(ctx context.Context) (*structs.Evaluation, string, error) {
	for {
		b.mu.Lock()
		if len(b.ready) > 0 {
			item := heap.Pop(&b.ready).(evalItem)
			token := helper.UUID()
			b.unacked[item.eval.ID] = &unackedEval{item.eval, token}
			b.deliveries[item.eval.ID]++
			b.mu.Unlock()
			return item.eval, token, nil
		}
		ch := b.notify
		b.mu.Unlock()
		select {
		case <-ctx.Done():
			return nil, "", ctx.Err()
		case <-ch:
		}
	}
}

// Ack says the eval was processed: the broker forgets it and makes the
// next eval of its job ready.
func (b *evalBroker) Ack(evalID, token string) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	u, err := b.takeUnackedLocked(evalID, token)
	if err != nil {
		return err
	}
	b.forgetLocked(u.eval)
	return nil
}

// Nack says processing failed: the eval is handed out again after the
// nack delay, or, once it was handed out deliveryLimit times, goes to the
// failed list (WaitFailed) and its job's next eval becomes ready.
func (b *evalBroker) Nack(evalID, token string) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	u, err := b.takeUnackedLocked(evalID, token)
	if err != nil {
		return err
	}
	if b.deliveries[evalID] >= b.deliveryLimit {
		b.forgetLocked(u.eval)
		b.failed = append(b.failed, u.eval)
		b.signalLocked()
		return nil
	}
	// The job stays busy with this eval while it waits, so its later
	// evals keep their place behind it.
	if b.nackDelay > 0 {
		b.delayLocked(u.eval, b.now().Add(b.nackDelay).UnixNano())
		return nil
	}
	b.pushReadyLocked(u.eval)
	return nil
}

func (b *evalBroker) takeUnackedLocked(evalID, token string) (*unackedEval, error) {
	u := b.unacked[evalID]
	if u == nil {
		return nil, structs.NewError(structs.CodeNotFound, "eval %s is not outstanding", evalID)
	}
	if u.token != token {
		return nil, structs.NewError(structs.CodePermissionDenied, "eval %s: token does not match", evalID)
	}
	delete(b.unacked, evalID)
	return u, nil
}

// forgetLocked drops e and frees its job for the next waiting eval.
func (b *evalBroker) forgetLocked(e *structs.Evaluation) {
	delete(b.known, e.ID)
	delete(b.deliveries, e.ID)
	key := evalJob(e)
	if b.busy[key] != e.ID {
		return
	}
	delete(b.busy, key)
	if w := b.waiting[key]; w != nil {
		next := heap.Pop(w).(evalItem).eval
		if w.Len() == 0 {
			delete(b.waiting, key)
		}
		b.busy[key] = next.ID
		b.pushReadyLocked(next)
	}
}

// WaitFailed waits for evals that went over the delivery limit and
// returns them all.
func (b *evalBroker) WaitFailed(ctx context.Context) ([]*structs.Evaluation, error) {
	for {
		b.mu.Lock()
		if len(b.failed) > 0 {
			out := b.failed
			b.failed = nil
			b.mu.Unlock()
			return out, nil
		}
		ch := b.notify
		b.mu.Unlock()
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-ch:
		}
	}
}

// promoteDue moves the delayed evals due at now on, and returns when the
// next one is due (zero when none is left).
func (b *evalBroker) promoteDue(now time.Time) time.Time {
	ids, next := b.delays.PopDue(now)
	b.promote(ids)
	return next
}

// promote makes the delayed evals ids ready (or waiting for their job).
func (b *evalBroker) promote(ids []string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, id := range ids {
		e := b.delayed[id]
		if e == nil {
			continue // flushed since it came due
		}
		delete(b.delayed, id)
		if b.busy[evalJob(e)] == e.ID {
			b.pushReadyLocked(e) // a nacked eval keeps its job
		} else {
			b.readyOrWaitLocked(e)
		}
	}
}

// Run makes delayed evals ready when they are due, until ctx ends.
func (b *evalBroker) Run(ctx context.Context) {
	_ = b.delays.Run(ctx, b.promote)
}

// Stats counts what the broker holds.
func (b *evalBroker) Stats() brokerStats {
	b.mu.Lock()
	defer b.mu.Unlock()
	s := brokerStats{Ready: len(b.ready), Unacked: len(b.unacked), Delayed: len(b.delayed), Failed: len(b.failed)}
	for _, w := range b.waiting {
		s.Waiting += w.Len()
	}
	return s
}

// evalHeap orders evals by priority (high first), then arrival.
type evalItem struct {
	eval *structs.Evaluation
	seq  uint64
}

type evalHeap []evalItem

func (h evalHeap) Len() int { return len(h) }
func (h evalHeap) Less(i, j int) bool {
	if h[i].eval.Priority != h[j].eval.Priority {
		return h[i].eval.Priority > h[j].eval.Priority
	}
	return h[i].seq < h[j].seq
}
func (h evalHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *evalHeap) Push(x any)   { *h = append(*h, x.(evalItem)) }
func (h *evalHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}
