package groupcommit

import (
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"

	"github.com/shoenig/test/must"

	"github.com/berth-io/berth/testutil"
)

// fakeLog is a Commit that records its batches, gives each one the next
// index, refuses odd requests, and holds any commit while gate is set
// until the gate is closed.
type fakeLog struct {
	mu      sync.Mutex
	batches [][]int
	gate    chan struct{}
	entered chan struct{} // receives once per held commit
}

func (f *fakeLog) commit(reqs []int) []Result {
	f.mu.Lock()
	f.batches = append(f.batches, slices.Clone(reqs))
	index := uint64(len(f.batches))
	gate := f.gate
	f.mu.Unlock()
	if gate != nil {
		f.entered <- struct{}{}
		<-gate
	}
	out := make([]Result, len(reqs))
	for i, r := range reqs {
		out[i].Index = index
		if r%2 == 1 {
			out[i].Err = fmt.Errorf("request %d refused", r)
		}
	}
	return out
}

func (f *fakeLog) hold() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.gate, f.entered = make(chan struct{}), make(chan struct{}, 1)
}

func (f *fakeLog) release() {
	f.mu.Lock()
	defer f.mu.Unlock()
	close(f.gate)
	f.gate = nil
}

func (f *fakeLog) got() [][]int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.batches)
}

// waitPending waits until n requests are queued behind the commit in
// flight.
func waitPending[R any](t *testing.T, b *Batcher[R], n int) {
	t.Helper()
	testutil.WaitForResult(t, func() (bool, error) {
		got := b.Pending()
		return got == n, fmt.Errorf("%d requests queued, want %d", got, n)
	})
}

func TestBatcher_LoneRequestCommitsAtOnce(t *testing.T) {
	f := &fakeLog{}
	b := New(f.commit, nil, Limits{MaxRequests: 100, MaxWeight: 100})
	r := b.Do(2)
	must.NoError(t, r.Err)
	must.Eq(t, 1, r.Index)
	r = b.Do(3)
	must.EqError(t, r.Err, "request 3 refused")
	must.Eq(t, [][]int{{2}, {3}}, f.got())
	must.Eq(t, 0, b.Pending())
}

// Requests arriving while an entry is in flight go out together as the
// next entry, and each caller gets its own result: a refused one does not
// fail the others.
func TestBatcher_ConcurrentRequestsShareOneEntry(t *testing.T) {
	f := &fakeLog{}
	b := New(f.commit, nil, Limits{MaxRequests: 100, MaxWeight: 100})
	f.hold()
	first := make(chan Result)
	go func() { first <- b.Do(0) }()
	<-f.entered // entry {0} is in flight

	const n = 10
	results := make([]Result, n+1)
	var wg sync.WaitGroup
	for i := 1; i <= n; i++ {
		wg.Go(func() { results[i] = b.Do(i) })
	}
	waitPending(t, b, n)
	f.release()
	must.NoError(t, (<-first).Err)
	wg.Wait()

	batches := f.got()
	must.Len(t, 2, batches)
	must.Eq(t, []int{0}, batches[0])
	second := slices.Sorted(slices.Values(batches[1]))
	must.Eq(t, []int{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}, second)
	for i := 1; i <= n; i++ {
		must.Eq(t, 2, results[i].Index, must.Sprintf("request %d", i))
		if i%2 == 1 {
			must.EqError(t, results[i].Err, fmt.Sprintf("request %d refused", i))
		} else {
			must.NoError(t, results[i].Err, must.Sprintf("request %d", i))
		}
	}
	must.Eq(t, 0, b.Pending())
}

// A queue longer than the limits goes out as several entries, in order;
// a request heavier than MaxWeight goes alone.
func TestBatcher_Limits(t *testing.T) {
	f := &fakeLog{}
	weight := func(r int) int { return r / 10 } // 20 weighs 2, 50 weighs 5
	b := New(f.commit, weight, Limits{MaxRequests: 3, MaxWeight: 4})
	f.hold()
	first := make(chan Result)
	go func() { first <- b.Do(0) }()
	<-f.entered

	var wg sync.WaitGroup
	queued := []int{10, 12, 14, 16, 50, 20, 22, 24}
	for i, r := range queued {
		wg.Go(func() { b.Do(r) })
		waitPending(t, b, i+1) // keep arrival order
	}
	f.release()
	<-first
	wg.Wait()
	must.Eq(t, [][]int{{0}, {10, 12, 14}, {16}, {50}, {20, 22}, {24}}, f.got())
}

func TestBatcher_ShortResultsAreAnError(t *testing.T) {
	b := New(func(reqs []int) []Result { return nil }, nil, Limits{MaxRequests: 10, MaxWeight: 10})
	must.True(t, errors.Is(b.Do(1).Err, errShortResults))
}
