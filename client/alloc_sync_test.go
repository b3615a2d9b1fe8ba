package client

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/shoenig/test/must"

	"github.com/berth-io/berth/helper"
	"github.com/berth-io/berth/nomad/structs"
)

func newTestSyncer(t *testing.T, srv *fakeServer) *allocSyncer {
	c := &Client{cfg: &Config{RPC: srv}, logger: hclog.NewNullLogger()}
	return newAllocSyncer(c, 25*time.Millisecond, helper.Backoff{Base: time.Second, Max: time.Second, NoJitter: true})
}

func TestAllocSyncer_CoalescesRapidUpdates(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := newFakeServer(time.Hour)
		s := newTestSyncer(t, srv)
		ctx, cancel := context.WithCancel(context.Background())
		var wg sync.WaitGroup
		wg.Add(1)
		go func() {
			defer wg.Done()
			s.run(ctx)
		}()

		// 100 changes to 10 allocs within 10ms...
		for i := range 100 {
			s.queue(&structs.Allocation{ID: fmt.Sprintf("a%d", i%10), ClientStatus: fmt.Sprintf("v%d", i/10)})
			if i%10 == 9 {
				time.Sleep(time.Millisecond)
			}
		}
		advance(25 * time.Millisecond)
		// ...are one call carrying the newest version of each.
		batches := srv.updateBatches()
		must.Len(t, 1, batches)
		must.Len(t, 10, batches[0])
		for _, a := range batches[0] {
			must.Eq(t, "v9", a.ClientStatus)
		}
		must.Eq(t, "a0", batches[0][0].ID, must.Sprint("sorted by ID"))

		s.queue(&structs.Allocation{ID: "a1", ClientStatus: "later"})
		advance(25 * time.Millisecond)
		must.Len(t, 2, srv.updateBatches())
		cancel()
		wg.Wait()
	})
}

func TestAllocSyncer_RetriesFailedSendsKeepingNewerUpdates(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := newFakeServer(time.Hour)
		srv.failNext("Node.UpdateAlloc", errors.New("no route to server"))
		s := newTestSyncer(t, srv)
		ctx, cancel := context.WithCancel(context.Background())
		var wg sync.WaitGroup
		wg.Add(1)
		go func() {
			defer wg.Done()
			s.run(ctx)
		}()

		s.queue(&structs.Allocation{ID: "a", ClientStatus: "running"})
		s.queue(&structs.Allocation{ID: "b", ClientStatus: "running"})
		advance(25 * time.Millisecond) // first send fails
		must.Len(t, 0, srv.updateBatches())
		s.queue(&structs.Allocation{ID: "a", ClientStatus: "complete"}) // newer than the failed one
		advance(time.Second + 25*time.Millisecond)
		batches := srv.updateBatches()
		must.Len(t, 1, batches)
		got := map[string]string{}
		for _, a := range batches[0] {
			got[a.ID] = a.ClientStatus
		}
		must.Eq(t, map[string]string{"a": "complete", "b": "running"}, got)
		cancel()
		wg.Wait()
	})
}
