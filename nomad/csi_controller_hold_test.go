package nomad

import (
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/berth-io/berth/nomad/claims"
)

// An unpublish the server stopped waiting for keeps the node's controller
// lock until the client must have ended it (its deadline, plus the clock
// skew allowed), so a later publish to that node cannot be overtaken by it
// (seed 4060); an answered call releases the lock at once.
func TestHoldWhileMayRun_KeepsTheLockUntilTheAbandonedCallIsOver(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		deadline := time.Now().Add(2 * time.Second)
		for _, err := range []error{nil, errors.New("plugin said no")} {
			released := false
			holdWhileMayRun(func() { released = true }, err, deadline, true)
			if !released {
				t.Fatalf("an answered call (%v) must release the lock at once", err)
			}
		}
		released := false
		holdWhileMayRun(func() { released = true }, mayStillRun{errors.New("session broke")}, time.Time{}, false)
		if !released {
			t.Fatal("without a deadline there is nothing to wait for: release at once")
		}

		// Released by a timer's goroutine: atomic for the race detector.
		var later atomic.Bool
		abandoned := mayStillRun{fmt.Errorf("node session broke")}
		holdWhileMayRun(func() { later.Store(true) }, abandoned, deadline, true)
		time.Sleep(time.Until(deadline.Add(claims.ClockSkew)) - time.Millisecond)
		synctest.Wait()
		if later.Load() {
			t.Fatal("released before the abandoned call's deadline plus the clock skew")
		}
		time.Sleep(2 * time.Millisecond)
		synctest.Wait()
		if !later.Load() {
			t.Fatal("never released after the deadline plus the clock skew")
		}
	})
}
