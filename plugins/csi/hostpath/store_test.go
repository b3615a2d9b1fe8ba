package hostpath

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/shoenig/test/must"
)

func openTestStore(t *testing.T, dir string) *store {
	t.Helper()
	s, err := openStore(context.Background(), dir, hclog.NewNullLogger())
	must.NoError(t, err)
	t.Cleanup(func() { s.close() })
	return s
}

func readState(t *testing.T, s *store) *State {
	t.Helper()
	var out *State
	must.NoError(t, s.read(context.Background(), func(st *State) error {
		out = st
		return nil
	}))
	return out
}

func sampleVolume(id string) *Volume {
	return &Volume{
		ID:            id,
		Name:          "name-" + id,
		CapacityBytes: 1 << 20,
		Parameters:    map[string]string{"k": "v"},
		CreatedAt:     time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC),
		Attachments:   []Attachment{{NodeID: "a", Mode: modeSingleNodeWriter}},
		Stages:        []Stage{{NodeID: "a", Path: "/s/" + id, Mode: modeSingleNodeWriter}},
		Publishes: []Publish{{NodeID: "a", TargetPath: "/t/" + id, StagingPath: "/s/" + id,
			Mode: modeSingleNodeWriter, Readonly: true, CreatedTarget: true}},
	}
}

func TestStoreRoundTrip(t *testing.T) {
	ctx := context.Background()
	cases := []struct {
		name string
		// updates run one transaction each, alternately durable or not.
		updates []func(tx *txn)
		want    func(st *State)
	}{
		{
			name:    "empty",
			updates: nil,
			want:    func(st *State) {},
		},
		{
			name: "volumes, snapshots and nodes",
			updates: []func(tx *txn){
				func(tx *txn) { tx.putVolume(sampleVolume("v1")); tx.putNode(&Node{ID: "a", MaxVolumes: 3}) },
				func(tx *txn) {
					tx.putSnapshot(&Snapshot{ID: "s1", Name: "snap", SourceVolumeID: "v1", SizeBytes: 7, CreatedAt: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)})
				},
				func(tx *txn) { tx.putVolume(sampleVolume("v2")) },
			},
			want: func(st *State) {
				st.Volumes["v1"] = sampleVolume("v1")
				st.Volumes["v2"] = sampleVolume("v2")
				st.Snapshots["s1"] = &Snapshot{ID: "s1", Name: "snap", SourceVolumeID: "v1", SizeBytes: 7, CreatedAt: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)}
				st.Nodes["a"] = &Node{ID: "a", MaxVolumes: 3}
			},
		},
		{
			name: "deletes",
			updates: []func(tx *txn){
				func(tx *txn) { tx.putVolume(sampleVolume("v1")); tx.putVolume(sampleVolume("v2")) },
				func(tx *txn) { tx.putSnapshot(&Snapshot{ID: "s1"}) },
				func(tx *txn) { tx.deleteVolume("v1"); tx.deleteSnapshot("s1") },
			},
			want: func(st *State) { st.Volumes["v2"] = sampleVolume("v2") },
		},
		{
			name: "replace",
			updates: []func(tx *txn){
				func(tx *txn) { tx.putVolume(sampleVolume("v1")) },
				func(tx *txn) {
					c := tx.Volumes["v1"].Copy()
					c.Publishes = nil
					tx.putVolume(c)
				},
			},
			want: func(st *State) {
				v := sampleVolume("v1")
				v.Publishes = nil
				st.Volumes["v1"] = v
			},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			s := openTestStore(t, dir)
			for i, u := range tc.updates {
				must.NoError(t, s.update(ctx, i%2 == 0, func(tx *txn) error { u(tx); return nil }))
			}
			want := newState()
			tc.want(want)
			got := readState(t, s)
			want.Seq = got.Seq
			must.Eq(t, want, got)

			// A new store (a restarted plugin) loads the same state.
			must.NoError(t, s.close())
			again := readState(t, openTestStore(t, dir))
			must.Eq(t, got, again)
		})
	}
}

func TestStoreFailedUpdateChangesNothing(t *testing.T) {
	s := openTestStore(t, t.TempDir())
	err := s.update(context.Background(), false, func(tx *txn) error {
		tx.putVolume(sampleVolume("v1"))
		return fmt.Errorf("refused")
	})
	must.ErrorContains(t, err, "refused")
	must.MapEmpty(t, readState(t, s).Volumes)
}

// Two stores on one directory behave like two plugin processes sharing a
// root: each sees the other's changes on its next call.
func TestStoreSharedBetweenProcesses(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	a, b := openTestStore(t, dir), openTestStore(t, dir)

	must.NoError(t, a.update(ctx, false, func(tx *txn) error { tx.putVolume(sampleVolume("v1")); return nil }))
	must.MapContainsKey(t, readState(t, b).Volumes, "v1")

	must.NoError(t, b.update(ctx, true, func(tx *txn) error {
		c := tx.Volumes["v1"].Copy()
		c.Stages = nil
		tx.putVolume(c)
		tx.putVolume(sampleVolume("v2"))
		return nil
	}))
	st := readState(t, a)
	must.MapContainsKeys(t, st.Volumes, []string{"v1", "v2"})
	must.SliceEmpty(t, st.Volumes["v1"].Stages)
	must.EqOp(t, readState(t, b).Seq, st.Seq)
}

func TestStoreCompaction(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	a, b := openTestStore(t, dir), openTestStore(t, dir)
	must.NoError(t, b.read(ctx, func(*State) error { return nil }))

	for i := range compactAfter + 10 {
		must.NoError(t, a.update(ctx, false, func(tx *txn) error {
			tx.putVolume(&Volume{ID: fmt.Sprintf("v%04d", i%50), CapacityBytes: int64(i)})
			return nil
		}))
	}
	_, err := os.Stat(filepath.Join(dir, checkpointFileName))
	must.NoError(t, err, must.Sprint("compaction should have written a checkpoint"))
	fi, err := os.Stat(filepath.Join(dir, journalFileName))
	must.NoError(t, err)
	must.Less(t, int64(4096), fi.Size(), must.Sprint("the journal should have been restarted"))

	// b held the old journal open; it must notice the new one.
	st := readState(t, b)
	must.MapLen(t, 50, st.Volumes)
	must.EqOp(t, int64(compactAfter+9), st.Volumes[fmt.Sprintf("v%04d", (compactAfter+9)%50)].CapacityBytes)
	must.Eq(t, readState(t, a), st)

	// And a fresh process loads checkpoint plus journal.
	must.Eq(t, st, readState(t, openTestStore(t, dir)))
}

// A crash in the middle of a journal write leaves a partial line; it is
// ignored, and the next write replaces it.
func TestStoreTornJournal(t *testing.T) {
	ctx := context.Background()
	for _, tail := range []string{`{"seq":2,"kind":"volume","id":"v9","vol`, "\x00\x00\x00\x00\n"} {
		t.Run(fmt.Sprintf("%q", tail[:4]), func(t *testing.T) {
			dir := t.TempDir()
			s := openTestStore(t, dir)
			must.NoError(t, s.update(ctx, true, func(tx *txn) error { tx.putVolume(sampleVolume("v1")); return nil }))
			must.NoError(t, s.close())

			f, err := os.OpenFile(filepath.Join(dir, journalFileName), os.O_WRONLY|os.O_APPEND, 0)
			must.NoError(t, err)
			_, err = f.WriteString(tail)
			must.NoError(t, err)
			must.NoError(t, f.Close())

			s = openTestStore(t, dir)
			st := readState(t, s)
			must.MapLen(t, 1, st.Volumes)
			must.NoError(t, s.update(ctx, false, func(tx *txn) error { tx.putVolume(sampleVolume("v2")); return nil }))
			must.NoError(t, s.close())

			st = readState(t, openTestStore(t, dir))
			must.MapContainsKeys(t, st.Volumes, []string{"v1", "v2"})
			must.MapNotContainsKey(t, st.Volumes, "v9")
		})
	}
}

func TestStoreLockHonoursContext(t *testing.T) {
	dir := t.TempDir()
	a, b := openTestStore(t, dir), openTestStore(t, dir)
	held := make(chan struct{})
	release := make(chan struct{})
	done := make(chan error, 1)
	go func() {
		done <- a.update(context.Background(), false, func(*txn) error {
			close(held)
			<-release
			return nil
		})
	}()
	<-held
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	err := b.read(ctx, func(*State) error { return nil })
	must.ErrorIs(t, err, context.DeadlineExceeded)
	close(release)
	must.NoError(t, <-done)
	must.NoError(t, b.read(context.Background(), func(*State) error { return nil }))
}
