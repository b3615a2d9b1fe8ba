// Package groupcommit coalesces concurrent writes into one commit: an
// update that arrives while a commit is in flight joins the next one.
// The server puts it in front of Raft (one entry, one fsync on a majority,
// one FSM apply for a whole group of claim writes); the client in front of
// its bbolt state (one fsync for the updates of many allocs).
//
//	caller A ──Do──► commit {A} ─────────────► A answered ─┐ hands off to B
//	caller B ──Do──► queued ┐                              ▼
//	caller C ──Do──► queued ┴──────────────────────► commit {B, C} ──► B, C answered
//
// A lone writer commits at once, as it would without the Batcher: batching
// never adds a wait, it only fills the time a commit is in flight anyway
// (unlike bbolt's Batch, which waits for company). Every caller is answered
// only after the commit carrying its request, with ITS result: the commit
// function reports one result per request, so one request's refusal does
// not fail the others. The committer is one waiting caller at a time, which
// hands the role to the first caller queued meanwhile.
package groupcommit

import (
	"errors"
	"sync"
)

// errShortResults answers a request its commit function left without a
// result: a bug in that function, reported instead of a hang or a panic.
var errShortResults = errors.New("groupcommit: the commit answered fewer requests than it was given")

// Result is one request's outcome: the index of the commit that carried
// it (a Raft index, where there is one), and its error (nil: applied).
type Result struct {
	Index uint64
	Err   error
}

// Commit commits reqs as one commit (one Raft entry, one bbolt
// transaction; or, when it must, several) and returns one Result per
// request, in order. When the commit itself failed
// (no leader, a timeout) every request gets that error. The Batcher calls
// it from one goroutine at a time.
type Commit[R any] func(reqs []R) []Result

// Limits bound one batch. A request heavier than MaxWeight still goes, in
// a batch of its own.
type Limits struct {
	// MaxRequests is the most requests one commit carries (≥ 1).
	MaxRequests int
	// MaxWeight is the most total weight one commit carries; a request's
	// weight is what the Batcher's weight function says (e.g. how many
	// claim updates it holds), so Raft entries stay well under Raft's size
	// limit.
	MaxWeight int
}

// Batcher is a group commit for requests of type R. Safe for concurrent
// use; the zero value is not usable: call New.
type Batcher[R any] struct {
	commit Commit[R]
	weight func(R) int
	limits Limits

	// mu guards queue and busy. busy is true while some caller commits
	// (the flusher); then, and only then, queue may be non-empty: the
	// flusher hands off to the first queued caller when it is done.
	mu    sync.Mutex
	queue []*call[R]
	busy  bool
}

type call[R any] struct {
	req R
	// done is closed when res is set, or when this caller must commit
	// the next batch (lead).
	done chan struct{}
	lead bool
	res  Result
}

// New returns a Batcher committing through commit. weight gives a
// request's weight against limits.MaxWeight (nil: 1 each).
func New[R any](commit Commit[R], weight func(R) int, limits Limits) *Batcher[R] {
	if weight == nil {
		weight = func(R) int { return 1 }
	}
	limits.MaxRequests = max(limits.MaxRequests, 1)
	limits.MaxWeight = max(limits.MaxWeight, 1)
	return &Batcher[R]{commit: commit, weight: weight, limits: limits}
}

// Do commits req, alone or with requests of other callers, and returns
// its result once the commit carrying it is done (or failed). It blocks
// for as long as the commits before it and its own take; the commit
// function bounds each (e.g. Raft's apply timeout).
func (b *Batcher[R]) Do(req R) Result {
	c := &call[R]{req: req, done: make(chan struct{})}
	b.mu.Lock()
	b.queue = append(b.queue, c)
	lead := !b.busy
	b.busy = true
	b.mu.Unlock()
	if !lead {
		<-c.done
		if !c.lead {
			return c.res
		}
	}
	b.flush(c)
	return c.res
}

// flush commits the head of the queue (which holds self) as one batch,
// answers its callers and hands the rest of the queue to the next caller.
func (b *Batcher[R]) flush(self *call[R]) {
	b.mu.Lock()
	n, weight := 0, 0
	for n < len(b.queue) && n < b.limits.MaxRequests {
		w := b.weight(b.queue[n].req)
		if n > 0 && weight+w > b.limits.MaxWeight {
			break
		}
		weight += w
		n++
	}
	batch := b.queue[:n:n]
	b.queue = b.queue[n:]
	b.mu.Unlock()

	reqs := make([]R, len(batch))
	for i, c := range batch {
		reqs[i] = c.req
	}
	res := b.commit(reqs)
	for i, c := range batch {
		if i < len(res) {
			c.res = res[i]
		} else {
			c.res = Result{Err: errShortResults}
		}
		if c != self {
			close(c.done)
		}
	}

	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.queue) == 0 {
		b.busy = false
		b.queue = nil // let the backing array go
		return
	}
	next := b.queue[0]
	next.lead = true
	close(next.done)
}

// Pending is how many requests wait for a commit (for tests and metrics).
func (b *Batcher[R]) Pending() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.queue)
}
