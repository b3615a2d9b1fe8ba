package client

import (
	"errors"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/shoenig/test/must"

	"github.com/berth-io/berth/client/allocrunner"
	"github.com/berth-io/berth/client/internal/fakedriver"
	"github.com/berth-io/berth/nomad/structs"
)

// barrier lets n callers through once all n are waiting in it; a caller
// that waited `patience` without the others fails. Had the client built
// runners or handed over updates one after the other, the first caller
// would wait alone and fail.
type barrier struct {
	n        int
	patience time.Duration
	lock     sync.Mutex
	in       int
	all      chan struct{}
}

func newBarrier(n int) *barrier {
	return &barrier{n: n, patience: time.Second, all: make(chan struct{})}
}

func (b *barrier) wait() error {
	b.lock.Lock()
	b.in++
	if b.in == b.n {
		close(b.all)
	}
	b.lock.Unlock()
	select {
	case <-b.all:
		return nil
	case <-time.After(b.patience):
		return errors.New("waited alone: the client did not run these in parallel")
	}
}

// barrierRunner is a minimal runner whose Update waits in a barrier
// before it takes the alloc (and persists it).
type barrierRunner struct {
	allocrunner.AllocRunner
	updates *barrier
	errs    chan<- error
}

func (r *barrierRunner) Update(a *structs.Allocation) {
	if a.DesiredStatus != structs.AllocDesiredStatusRun {
		if err := r.updates.wait(); err != nil {
			r.errs <- err
		}
	}
	r.AllocRunner.Update(a)
}

// Each new runner persists its alloc with an fsync of state.db: the client
// builds the runners of allocs that arrive together in parallel, so their
// writes share a group commit, and hands their stops over in parallel
// likewise (issue 20's K=10 publish and K=100 stop).
func TestClient_BuildsAndUpdatesRunnersOfABatchInParallel(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const k = 5
		srv := newFakeServer(time.Hour)
		host := fakedriver.NewHost()
		cfg := testConfig(t, srv, host, t.TempDir())
		builds, updates := newBarrier(k), newBarrier(k)
		errs := make(chan error, 2*k)
		cfg.AllocRunnerFactory = func(rc *allocrunner.Config) (allocrunner.AllocRunner, error) {
			if err := builds.wait(); err != nil {
				errs <- err
			}
			r, err := allocrunner.NewMinimal(rc)
			if err != nil {
				return nil, err
			}
			return &barrierRunner{AllocRunner: r, updates: updates, errs: errs}, nil
		}
		c := newTestClient(t, cfg)
		defer c.Shutdown()
		synctest.Wait()

		var allocs []*structs.Allocation
		var ids []string
		for range k {
			a := testAlloc(c.NodeID(), structs.JobTypeService, &structs.Task{Name: "t"})
			allocs, ids = append(allocs, a), append(ids, a.ID)
		}
		// advance, not synctest.Wait: a serial client would hold its alloc
		// lock while a caller waits out its patience, which only the
		// bubble's clock moving ends.
		srv.placeAllocs(allocs...)
		advance(time.Minute)
		must.SliceLen(t, k, c.AllocIDs())
		srv.stopAllocs(ids...)
		advance(time.Minute)
		close(errs)
		for err := range errs {
			t.Error(err)
		}
		for _, id := range ids {
			a, err := c.Alloc(id)
			must.NoError(t, err)
			must.Eq(t, structs.AllocDesiredStatusStop, a.DesiredStatus)
		}
	})
}

// runSignalRunner closes ran when it starts running.
type runSignalRunner struct {
	allocrunner.AllocRunner
	ran chan struct{}
}

func (r *runSignalRunner) Run() {
	close(r.ran)
	r.AllocRunner.Run()
}

// A runner runs as soon as it is built (its alloc persisted), not once
// the slowest runner of its batch is: the first of a job's allocs must
// not claim late because another's commit is slow (issue 20's K=10
// publish). Here the second alloc's build waits for the first runner to
// run; a client that started runners only after building all of them
// would leave it waiting out its patience.
func TestClient_RunsEachRunnerOfABatchOnceBuilt(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := newFakeServer(time.Hour)
		host := fakedriver.NewHost()
		cfg := testConfig(t, srv, host, t.TempDir())
		first := testAlloc("", structs.JobTypeService, &structs.Task{Name: "t"})
		second := testAlloc("", structs.JobTypeService, &structs.Task{Name: "t"})
		firstRan := make(chan struct{})
		errs := make(chan error, 1)
		cfg.AllocRunnerFactory = func(rc *allocrunner.Config) (allocrunner.AllocRunner, error) {
			if rc.Alloc.ID == second.ID {
				select {
				case <-firstRan:
				case <-time.After(time.Second):
					errs <- errors.New("the first alloc's runner did not run while the second's was still being built")
				}
			}
			r, err := allocrunner.NewMinimal(rc)
			if err != nil || rc.Alloc.ID != first.ID {
				return r, err
			}
			return &runSignalRunner{AllocRunner: r, ran: firstRan}, nil
		}
		c := newTestClient(t, cfg)
		defer c.Shutdown()
		synctest.Wait()

		first.NodeID, second.NodeID = c.NodeID(), c.NodeID()
		srv.placeAllocs(first, second)
		advance(time.Minute)
		must.SliceLen(t, 2, c.AllocIDs())
		select {
		case err := <-errs:
			t.Fatal(err)
		default:
		}
	})
}
