package main

import (
	"context"
	"testing"
	"time"

	"github.com/shoenig/test/must"

	"github.com/berth-io/berth/nomad/structs"
)

// A poll that meets a leader election keeps polling; any other error ends
// the wait. (A 3-server run failed its stop phase on "no cluster leader".)
func TestWaitFor_PollsThroughLeaderElections(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	calls := 0
	err := waitFor(ctx, "the test", func() (bool, error) {
		calls++
		if calls == 1 {
			return false, structs.NewError(structs.CodeNoLeader, "no cluster leader: CSIVolume.List reached a server that is not the leader")
		}
		return true, nil
	})
	must.NoError(t, err)
	must.Eq(t, 2, calls)

	err = waitFor(ctx, "the test", func() (bool, error) {
		return false, structs.NewError(structs.CodePermissionDenied, "no")
	})
	must.ErrorContains(t, err, "waiting for the test")
}
