package nomad

import (
	"context"
	"errors"
	"fmt"
	"io"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
	"github.com/shoenig/test/must"

	"github.com/berth-io/berth/testutil"
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

// blockingFSM holds its goroutine in the entry "block" until release.
type blockingFSM struct{ entered, release chan struct{} }

func (f *blockingFSM) Apply(l *raft.Log) any {
	if string(l.Data) == "block" {
		close(f.entered)
		<-f.release
	}
	return nil
}
func (f *blockingFSM) Snapshot() (raft.FSMSnapshot, error) { return nil, errors.New("no snapshots") }
func (f *blockingFSM) Restore(io.ReadCloser) error         { return errors.New("no snapshots") }

// TestRaftWait_EndsOnABarrierRaftDropped reproduces what the fake future
// above stands for with a real hashicorp/raft: a barrier committed and
// queued for the FSM behind a slow entry when raft shuts down is dropped
// in about 2 trials of 5 (the FSM goroutine picks shutdown over its
// queue), and its Error() never returns. raftWait on it ends when the
// server shuts down. Trials are repeated until raft drops one (60 in a
// row all answered: about one run in 10^12).
func TestRaftWait_EndsOnABarrierRaftDropped(t *testing.T) {
	for trial := range 60 {
		if droppedBarrierTrial(t) {
			t.Logf("raft dropped the barrier in trial %d", trial+1)
			return
		}
	}
	t.Fatal("raft answered the barrier queued behind a blocked FSM at shutdown 60 times out of 60: nothing was tested")
}

// droppedBarrierTrial queues a barrier behind a blocked FSM entry, shuts
// raft down, and reports whether raft dropped it; if it did, it checks
// that raftWait on it ends with the server's shutdown.
func droppedBarrierTrial(t *testing.T) bool {
	t.Helper()
	conf := raft.DefaultConfig()
	conf.LocalID = "s1"
	conf.HeartbeatTimeout = 50 * time.Millisecond
	conf.ElectionTimeout = 50 * time.Millisecond
	conf.LeaderLeaseTimeout = 50 * time.Millisecond
	conf.CommitTimeout = 5 * time.Millisecond
	conf.Logger = hclog.NewNullLogger()
	store := raft.NewInmemStore()
	addr, trans := raft.NewInmemTransport("")
	fsm := &blockingFSM{entered: make(chan struct{}), release: make(chan struct{})}
	r, err := raft.NewRaft(conf, fsm, store, store, raft.NewInmemSnapshotStore(), trans)
	must.NoError(t, err)
	must.NoError(t, r.BootstrapCluster(raft.Configuration{Servers: []raft.Server{{ID: conf.LocalID, Address: addr}}}).Error())
	select {
	case <-fsm.entered:
		t.Fatal("entered before anything was applied")
	default:
	}
	testutil.WaitForResult(t, func() (bool, error) {
		return r.State() == raft.Leader, fmt.Errorf("raft is %s, not leader", r.State())
	})
	r.Apply([]byte("block"), 0)
	<-fsm.entered // the Apply's commit is certain once its entry reaches the FSM
	b := r.Barrier(0)
	testutil.WaitForResult(t, func() (bool, error) {
		p := r.Stats()["fsm_pending"]
		return p != "0", fmt.Errorf("barrier not queued for the FSM yet (fsm_pending %s)", p)
	})
	shut := r.Shutdown()
	close(fsm.release)
	must.NoError(t, shut.Error())
	if r.Stats()["fsm_pending"] == "0" {
		return false // the FSM took the barrier before it stopped: answered
	}

	ctx, cancel := context.WithCancel(context.Background())
	s := &Server{ctx: ctx, cancel: cancel}
	got := make(chan error, 1)
	go func() { got <- s.raftWait(b) }()
	s.cancel()
	select {
	case err := <-got:
		must.ErrorIs(t, err, raft.ErrRaftShutdown)
	case <-time.After(30 * time.Second):
		t.Fatal("raftWait on a barrier raft dropped at shutdown did not end when the server shut down")
	}
	return true
}
