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
//
// NewPipelined lets up to depth commits be in flight at once, for a log
// that takes an entry before the previous one is durable (Raft: the
// leader appends and replicates entries as they come, one fsync for all it
// has): while commit N waits, the callers queued meanwhile go out as N+1
// instead of waiting for N to end. Batches are still submitted one at a
// time and in queue order (the log orders them as the callers arrived),
// and each caller is still answered only once its own commit is done.
//
//	caller A ──Do──► submit {A} ── wait ─────────────► A answered
//	caller B ──Do──► queued ──► submit {B, C} ── wait ────► B, C answered
//	caller C ──Do──► queued ┘
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

// Submit starts the commit of reqs, as Commit does, and returns at once
// with the function that waits for it and returns one Result per request.
// The Batcher calls Submit from one goroutine at a time, in the order the
// requests were queued, and each wait once, possibly while later batches
// are submitted and waited for.
type Submit[R any] func(reqs []R) (wait func() []Result)

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
// use; the zero value is not usable: call New or NewPipelined.
type Batcher[R any] struct {
	submit Submit[R]
	weight func(R) int
	limits Limits
	depth  int

	// mu guards queue, leading and inFlight. leading is true while some
	// caller gathers and submits a batch (the leader: one at a time, so
	// batches go out in queue order); inFlight counts the batches
	// submitted and not yet answered. The queue may be non-empty only
	// while there is a leader or depth batches are in flight: whoever
	// ends either state hands the lead to the first queued caller.
	mu       sync.Mutex
	queue    []*call[R]
	leading  bool
	inFlight int
}

type call[R any] struct {
	req R
	// done is closed when res is set, or when this caller must lead
	// the next batch (lead).
	done chan struct{}
	lead bool
	res  Result
}

// New returns a Batcher committing through commit, one commit at a time.
// weight gives a request's weight against limits.MaxWeight (nil: 1 each).
func New[R any](commit Commit[R], weight func(R) int, limits Limits) *Batcher[R] {
	submit := func(reqs []R) func() []Result {
		res := commit(reqs)
		return func() []Result { return res }
	}
	return NewPipelined(submit, weight, limits, 1)
}

// NewPipelined returns a Batcher that submits a batch through submit
// while up to depth-1 earlier ones are still in flight (depth ≥ 1; 1 is
// New's one commit at a time).
func NewPipelined[R any](submit Submit[R], weight func(R) int, limits Limits, depth int) *Batcher[R] {
	if weight == nil {
		weight = func(R) int { return 1 }
	}
	limits.MaxRequests = max(limits.MaxRequests, 1)
	limits.MaxWeight = max(limits.MaxWeight, 1)
	return &Batcher[R]{submit: submit, weight: weight, limits: limits, depth: max(depth, 1)}
}

// Do commits req, alone or with requests of other callers, and returns
// its result once the commit carrying it is done (or failed). It blocks
// for as long as the commits before it and its own take; the commit
// function bounds each (e.g. Raft's apply timeout).
func (b *Batcher[R]) Do(req R) Result {
	c := &call[R]{req: req, done: make(chan struct{})}
	b.mu.Lock()
	b.queue = append(b.queue, c)
	// The queue was empty if so (see mu): c is its head.
	lead := !b.leading && b.inFlight < b.depth
	if lead {
		b.leading = true
	}
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

// flush submits the head of the queue (which holds self) as one batch,
// hands the lead on when another batch may go out meanwhile, waits for
// the batch's commit and answers its callers.
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
	wait := b.submit(reqs)

	b.mu.Lock()
	b.inFlight++
	b.leading = false
	b.handOffLocked()
	b.mu.Unlock()

	res := wait()
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
	b.inFlight--
	b.handOffLocked()
	b.mu.Unlock()
}

// handOffLocked makes the first queued caller the leader when there is
// none and another batch may be in flight.
func (b *Batcher[R]) handOffLocked() {
	if len(b.queue) == 0 {
		b.queue = nil // let the backing array go
		return
	}
	if b.leading || b.inFlight >= b.depth {
		return
	}
	b.leading = true
	next := b.queue[0]
	next.lead = true
	close(next.done)
}

// InFlight is how many batches are submitted and not yet answered (for
// tests and metrics).
func (b *Batcher[R]) InFlight() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.inFlight
}

// Pending is how many requests wait for a commit (for tests and metrics).
func (b *Batcher[R]) Pending() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.queue)
}
