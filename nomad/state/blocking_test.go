package state

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/go-memdb"
	"github.com/shoenig/test/must"

	"github.com/berth-io/berth/nomad/structs"
)

// nodesQuery is the shape of a list endpoint: read the table, report its
// index. Each run is announced on ran.
func nodesQuery(ran chan<- uint64) QueryFunc {
	return func(ws memdb.WatchSet, snap *StateSnapshot) (uint64, error) {
		if _, err := snap.Nodes(ws); err != nil {
			return 0, err
		}
		idx, err := snap.Index(TableNodes)
		ran <- idx
		return idx, err
	}
}

type queryResult struct {
	index uint64
	err   error
}

// startQuery runs a blocking query in a goroutine the test owns and waits
// for its first run.
func startQuery(t *testing.T, ctx context.Context, s *StateStore, minIndex uint64, ran chan uint64) <-chan queryResult {
	t.Helper()
	done := make(chan queryResult, 1)
	exited := make(chan struct{})
	go func() {
		defer close(exited)
		idx, err := s.BlockingQuery(ctx, minIndex, nodesQuery(ran))
		done <- queryResult{idx, err}
	}()
	select {
	case <-ran:
	case <-time.After(5 * time.Second):
		t.Fatal("blocking query never ran")
	}
	t.Cleanup(func() {
		select {
		case <-exited:
		case <-time.After(5 * time.Second):
			t.Error("blocking query did not return")
		}
	})
	return done
}

func TestBlockingQuery_ReturnsAtOnce(t *testing.T) {
	s := testStore(t)
	must.NoError(t, s.UpsertNode(5, mockNode("n1")))
	for _, min := range []uint64{0, 4} {
		ran := make(chan uint64, 1)
		idx, err := s.BlockingQuery(context.Background(), min, nodesQuery(ran))
		must.NoError(t, err)
		must.Eq(t, 5, idx)
	}
}

func TestBlockingQuery_WakesOnWriteNotOnUnrelated(t *testing.T) {
	s := testStore(t)
	must.NoError(t, s.UpsertNode(5, mockNode("n1")))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ran := make(chan uint64, 10)
	done := startQuery(t, ctx, s, 5, ran)

	// A write to another table does not re-run the query.
	must.NoError(t, s.UpsertJob(6, mockJob("default", "web")))
	must.NoError(t, s.UpsertEvals(7, []*structs.Evaluation{mockEval("e1", "default", "web")}))
	select {
	case idx := <-ran:
		t.Fatalf("query re-ran (index %d) after writes to other tables", idx)
	case r := <-done:
		t.Fatalf("query returned early: %+v", r)
	default:
	}

	// A node write wakes it, and it returns the new index.
	must.NoError(t, s.UpsertNode(8, mockNode("n2")))
	select {
	case r := <-done:
		must.NoError(t, r.err)
		must.Eq(t, 8, r.index)
	case <-time.After(5 * time.Second):
		t.Fatal("query did not wake on a node write")
	}
}

func TestBlockingQuery_TimesOut(t *testing.T) {
	s := testStore(t)
	must.NoError(t, s.UpsertNode(5, mockNode("n1")))
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	var runs atomic.Int32
	idx, err := s.BlockingQuery(ctx, 5, func(ws memdb.WatchSet, snap *StateSnapshot) (uint64, error) {
		runs.Add(1)
		_, _ = snap.Nodes(ws)
		return snap.Index(TableNodes)
	})
	must.NoError(t, err) // the max wait passing is a normal end
	must.Eq(t, 5, idx)
	must.Eq(t, 1, runs.Load())
}

func TestBlockingQuery_CancelledAndRunError(t *testing.T) {
	s := testStore(t)
	ctx, cancel := context.WithCancel(context.Background())
	ran := make(chan uint64, 10)
	done := startQuery(t, ctx, s, 1, ran)
	cancel()
	select {
	case r := <-done:
		must.ErrorIs(t, r.err, context.Canceled)
	case <-time.After(5 * time.Second):
		t.Fatal("query ignored cancellation")
	}

	boom := errors.New("boom")
	_, err := s.BlockingQuery(context.Background(), 1, func(memdb.WatchSet, *StateSnapshot) (uint64, error) {
		return 0, boom
	})
	must.ErrorIs(t, err, boom)
}

func TestBlockingQuery_Abandon(t *testing.T) {
	old := testStore(t)
	must.NoError(t, old.UpsertNode(5, mockNode("n1")))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	t.Run("method returns when its store is abandoned", func(t *testing.T) {
		ran := make(chan uint64, 10)
		done := startQuery(t, ctx, old, 5, ran)
		old.Abandon()
		select {
		case r := <-done:
			must.NoError(t, r.err)
			must.Eq(t, 5, r.index)
		case <-time.After(5 * time.Second):
			t.Fatal("query did not wake on abandon")
		}
	})

	t.Run("func form carries on in the new store", func(t *testing.T) {
		cur := testStore(t)
		must.NoError(t, cur.UpsertNode(5, mockNode("n1")))
		var current atomic.Pointer[StateStore]
		current.Store(cur)
		ran := make(chan uint64, 10)
		done := make(chan queryResult, 1)
		go func() {
			idx, err := BlockingQueryFunc(ctx, current.Load, 5, nodesQuery(ran))
			done <- queryResult{idx, err}
		}()
		<-ran

		// A restore swaps in a store that is no newer: the query re-runs
		// there and keeps waiting.
		next := testStore(t)
		must.NoError(t, next.UpsertNode(5, mockNode("n1")))
		current.Store(next)
		cur.Abandon()
		select {
		case idx := <-ran:
			must.Eq(t, 5, idx)
		case <-time.After(5 * time.Second):
			t.Fatal("query did not re-run on the new store")
		}
		must.NoError(t, next.UpsertNode(6, mockNode("n2")))
		select {
		case r := <-done:
			must.NoError(t, r.err)
			must.Eq(t, 6, r.index)
		case <-time.After(5 * time.Second):
			t.Fatal("query did not wake on a write to the new store")
		}
	})
}
