package nomad

import (
	"context"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	"github.com/shoenig/test/must"
)

// droppedFuture is a Raft future raft took and never answers, as
// hashicorp/raft does with an entry queued for its FSM when it shuts down
// (hashicorp/raft#498).
type droppedFuture struct{ never chan struct{} }

func (f droppedFuture) Error() error { <-f.never; return nil }

// answeredFuture has its outcome already.
type answeredFuture struct{ err error }

func (f answeredFuture) Error() error { return f.err }

// TestRaftWait_EndsOnShutdownWhenRaftDropsTheFuture: a call waiting on a
// future raft dropped must end when the server shuts down, or Shutdown
// waits for that call forever (simulator seed 2793: a leader restart hung
// 60+ min on a GetClientAllocs in waitCaughtUp's barrier).
func TestRaftWait_EndsOnShutdownWhenRaftDropsTheFuture(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	s := &Server{ctx: ctx, cancel: cancel}
	f := droppedFuture{never: make(chan struct{})}
	t.Cleanup(func() { close(f.never) })

	got := make(chan error, 1)
	go func() { got <- s.raftWait(f) }()
	s.cancel() // what Shutdown does first
	select {
	case err := <-got:
		must.ErrorIs(t, err, raft.ErrRaftShutdown)
	case <-time.After(30 * time.Second):
		t.Fatal("raftWait on a future raft never answers did not end when the server shut down")
	}
}

func TestRaftWait_ReturnsTheFuturesOutcome(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	s := &Server{ctx: ctx, cancel: cancel}
	must.NoError(t, s.raftWait(answeredFuture{}))
	lost := raft.ErrLeadershipLost
	must.ErrorIs(t, s.raftWait(answeredFuture{err: lost}), lost)

}
