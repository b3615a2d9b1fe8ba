package groupcommit

import (
	"fmt"
	"math/rand/v2"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/shoenig/test/must"

	"github.com/berth-io/berth/testutil"
)

// fakePipe is a Submit whose commits end only when the test says: it
// records each batch as submitted (its index is its position) and holds
// its wait until finish(index) is called.
type fakePipe struct {
	mu       sync.Mutex
	batches  [][]int
	gates    []chan struct{}
	inFlight int // submitted, wait not returned
	maxSeen  int
}

func (f *fakePipe) submit(reqs []int) func() []Result {
	f.mu.Lock()
	f.batches = append(f.batches, slices.Clone(reqs))
	index := uint64(len(f.batches))
	gate := make(chan struct{})
	f.gates = append(f.gates, gate)
	f.inFlight++
	f.maxSeen = max(f.maxSeen, f.inFlight)
	f.mu.Unlock()
	return func() []Result {
		<-gate
		f.mu.Lock()
		f.inFlight--
		f.mu.Unlock()
		out := make([]Result, len(reqs))
		for i, r := range reqs {
			out[i].Index = index
			if r%2 == 1 {
				out[i].Err = fmt.Errorf("request %d refused", r)
			}
		}
		return out
	}
}

func (f *fakePipe) finish(index int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	close(f.gates[index-1])
}

func (f *fakePipe) got() [][]int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.batches)
}

// waitSubmitted waits until n batches were submitted.
func (f *fakePipe) waitSubmitted(t *testing.T, n int) {
	t.Helper()
	testutil.WaitForResult(t, func() (bool, error) {
		got := len(f.got())
		return got == n, fmt.Errorf("%d batches submitted, want %d", got, n)
	})
}

// A request arriving while a commit is in flight goes out at once as the
// next one, not after the first ended: two commits are seen in flight
// together. With depth 1 (New's behaviour, and this package's before
// pipelining) the same request stays queued: the check below is what
// tells the two apart.
func TestPipelined_SecondCommitGoesOutWhileFirstInFlight(t *testing.T) {
	for _, depth := range []int{1, 2} {
		t.Run(fmt.Sprintf("depth=%d", depth), func(t *testing.T) {
			f := &fakePipe{}
			b := NewPipelined(f.submit, nil, Limits{MaxRequests: 100, MaxWeight: 100}, depth)
			first := make(chan Result, 1)
			go func() { first <- b.Do(0) }()
			f.waitSubmitted(t, 1)

			second := make(chan Result, 1)
			go func() { second <- b.Do(2) }()
			if depth == 1 {
				waitPending(t, b, 1)
				must.Len(t, 1, f.got(), must.Sprint("depth 1 submitted the second request before the first commit ended"))
				must.Eq(t, 1, b.InFlight())
				f.finish(1)
				f.waitSubmitted(t, 2)
				f.finish(2)
				must.Eq(t, 1, (<-first).Index)
				must.Eq(t, 2, (<-second).Index)
				must.Eq(t, 1, f.maxSeen)
				return
			}
			f.waitSubmitted(t, 2)
			must.Eq(t, 2, b.InFlight())
			must.Eq(t, 0, b.Pending())
			// Each caller is answered only once its own commit ended:
			// the second, ended first, does not answer the first.
			f.finish(2)
			must.Eq(t, 2, (<-second).Index)
			select {
			case r := <-first:
				t.Fatalf("first caller answered (%+v) before its commit ended", r)
			default:
			}
			f.finish(1)
			must.Eq(t, 1, (<-first).Index)
			must.Eq(t, 2, f.maxSeen)
			must.Eq(t, 0, b.InFlight())
		})
	}
}

// With depth commits in flight, later requests queue and go out together,
// in arrival order, as soon as one of them ends.
func TestPipelined_DepthBoundsCommitsInFlight(t *testing.T) {
	f := &fakePipe{}
	b := NewPipelined(f.submit, nil, Limits{MaxRequests: 100, MaxWeight: 100}, 2)
	var wg sync.WaitGroup
	results := make([]Result, 10)
	wg.Go(func() { results[0] = b.Do(0) })
	f.waitSubmitted(t, 1)
	wg.Go(func() { results[1] = b.Do(1) })
	f.waitSubmitted(t, 2)
	for i := 2; i < 10; i++ {
		wg.Go(func() { results[i] = b.Do(i) })
		waitPending(t, b, i-1) // keep arrival order
	}
	must.Len(t, 2, f.got())
	f.finish(1)
	f.waitSubmitted(t, 3)
	must.Eq(t, []int{2, 3, 4, 5, 6, 7, 8, 9}, f.got()[2])
	f.finish(2)
	f.finish(3)
	wg.Wait()
	must.Eq(t, 2, f.maxSeen)
	for i, r := range results {
		must.Eq(t, uint64(min(i, 2)+1), r.Index, must.Sprintf("request %d", i))
		if i%2 == 1 {
			must.EqError(t, r.Err, fmt.Sprintf("request %d refused", i))
		} else {
			must.NoError(t, r.Err, must.Sprintf("request %d", i))
		}
	}
}

// Many callers at once, commits ending in random order: every caller is
// answered with the index of the batch that carried it, every request
// goes out exactly once, batches are submitted one at a time and never
// more than depth are in flight.
func TestPipelined_ManyCallers(t *testing.T) {
	const depth, callers = 3, 400
	var submitting atomic.Int32
	var mu sync.Mutex
	var batches [][]int
	var live, maxLive int
	submit := func(reqs []int) func() []Result {
		if submitting.Add(1) != 1 {
			t.Error("two submits at once")
		}
		defer submitting.Add(-1)
		mu.Lock()
		batches = append(batches, slices.Clone(reqs))
		index := uint64(len(batches))
		live++
		maxLive = max(maxLive, live)
		mu.Unlock()
		return func() []Result {
			for range rand.IntN(50) {
				runtime.Gosched()
			}
			mu.Lock()
			live--
			mu.Unlock()
			out := make([]Result, len(reqs))
			for i := range out {
				out[i].Index = index
			}
			return out
		}
	}
	b := NewPipelined(submit, nil, Limits{MaxRequests: 7, MaxWeight: 100}, depth)
	got := make([]uint64, callers)
	var wg sync.WaitGroup
	for i := range callers {
		wg.Go(func() { got[i] = b.Do(i).Index })
	}
	wg.Wait()
	must.LessEq(t, depth, maxLive)
	seen := make(map[int]int)
	for bi, batch := range batches {
		must.LessEq(t, 7, len(batch))
		for _, r := range batch {
			seen[r]++
			must.Eq(t, uint64(bi+1), got[r], must.Sprintf("request %d", r))
		}
	}
	must.MapLen(t, callers, seen)
	for r, n := range seen {
		must.Eq(t, 1, n, must.Sprintf("request %d submitted %d times", r, n))
	}
	must.Eq(t, 0, b.Pending())
	must.Eq(t, 0, b.InFlight())
}
