package state

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/shoenig/test/must"

	"github.com/berth-io/berth/nomad/structs"
	"github.com/berth-io/berth/plugins/drivers"
)

// implementations runs a test against both DBs; reopen returns a DB over
// the same data (a new process for bbolt, the same store for memory).
func implementations(t *testing.T, fn func(t *testing.T, db DB, reopen func() DB)) {
	t.Run("bolt", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "client", "state.db")
		db, err := NewBoltDB(path)
		must.NoError(t, err)
		cur := db
		t.Cleanup(func() { cur.Close() })
		fn(t, db, func() DB {
			must.NoError(t, cur.Close())
			next, err := NewBoltDB(path)
			must.NoError(t, err)
			cur = next
			return next
		})
	})
	t.Run("mem", func(t *testing.T) {
		db := NewMemDB()
		fn(t, db, func() DB { return db })
	})
}

func testAlloc() *structs.Allocation {
	return &structs.Allocation{
		ID: "a1", Namespace: "default", NodeID: "n1", JobID: "web", TaskGroup: "g",
		DesiredStatus: structs.AllocDesiredStatusRun, AllocModifyIndex: 7,
		Job: &structs.Job{ID: "web", Type: structs.JobTypeService, TaskGroups: []*structs.TaskGroup{{
			Name: "g", RestartPolicy: &structs.RestartPolicy{Attempts: 2, Interval: time.Minute, Delay: time.Second, Mode: "fail"},
			Tasks: []*structs.Task{{Name: "t", Driver: "mock", Config: map[string]any{"run_for": "1s", "n": int64(3)}}},
		}}},
	}
}

func TestDB_RoundTrips(t *testing.T) {
	implementations(t, func(t *testing.T, db DB, reopen func() DB) {
		id, err := db.GetNodeIdentity()
		must.NoError(t, err)
		must.Nil(t, id)
		must.NoError(t, db.PutNodeIdentity(&NodeIdentity{ID: "node-1", SecretID: "secret-1"}))

		alloc := testAlloc()
		must.NoError(t, db.PutAlloc(alloc))
		must.NoError(t, db.PutAllocState("a1", &AllocState{TasksExited: true}))
		ts := &structs.TaskState{State: structs.TaskStateRunning, Restarts: 2, StartedAt: 42,
			Events: []*structs.TaskEvent{{Type: "Started", Time: 41, Details: map[string]string{"k": "v"}}}}
		must.NoError(t, db.PutTaskState("a1", "t", ts))
		h := &drivers.TaskHandle{Version: 1, State: drivers.TaskStateRunning, DriverState: []byte{1, 2, 3},
			Config: &drivers.TaskConfig{ID: "a1/t", AllocID: "a1", Name: "t", Config: map[string]any{"command": "/bin/sleep", "args": []any{"10"}},
				Env: map[string]string{"A": "b"}, StdoutPath: "/x/t.stdout.0"}}
		must.NoError(t, db.PutTaskHandle("a1", "t", h))
		must.NoError(t, db.PutHookData("a1", "csi_hook", []byte(`{"vol":"m"}`)))
		must.NoError(t, db.Put(BucketCSIUsage, "vol1/rw", []byte("2")))
		must.NoError(t, db.Put(BucketCSIUsage, "vol2/ro", []byte("1")))

		db = reopen()

		id, err = db.GetNodeIdentity()
		must.NoError(t, err)
		must.Eq(t, &NodeIdentity{ID: "node-1", SecretID: "secret-1"}, id)

		allocs, err := db.GetAllocs()
		must.NoError(t, err)
		must.Len(t, 1, allocs)
		must.Eq(t, "a1", allocs[0].ID)
		must.Eq(t, uint64(7), allocs[0].AllocModifyIndex)
		must.Eq(t, map[string]any{"run_for": "1s", "n": int64(3)}, allocs[0].Job.TaskGroups[0].Tasks[0].Config)
		must.Eq(t, time.Minute, allocs[0].Job.TaskGroups[0].RestartPolicy.Interval)

		as, err := db.GetAllocState("a1")
		must.NoError(t, err)
		must.Eq(t, &AllocState{TasksExited: true}, as)

		gotTS, err := db.GetTaskState("a1", "t")
		must.NoError(t, err)
		must.Eq(t, ts, gotTS)

		gotH, err := db.GetTaskHandle("a1", "t")
		must.NoError(t, err)
		must.Eq(t, h, gotH)

		hd, err := db.GetHookData("a1", "csi_hook")
		must.NoError(t, err)
		must.Eq(t, `{"vol":"m"}`, string(hd))

		usage, err := db.List(BucketCSIUsage)
		must.NoError(t, err)
		must.Eq(t, map[string][]byte{"vol1/rw": []byte("2"), "vol2/ro": []byte("1")}, usage)
		must.NoError(t, db.Delete(BucketCSIUsage, "vol1/rw"))
		v, err := db.Get(BucketCSIUsage, "vol1/rw")
		must.NoError(t, err)
		must.Nil(t, v)

		must.NoError(t, db.DeleteTaskHandle("a1", "t"))
		gotH, err = db.GetTaskHandle("a1", "t")
		must.NoError(t, err)
		must.Nil(t, gotH)
		gotTS, err = db.GetTaskState("a1", "t")
		must.NoError(t, err)
		must.NotNil(t, gotTS, must.Sprint("deleting the handle keeps the task state"))
	})
}

func TestDB_DeleteAllocRemovesEverythingAndRefusesStragglers(t *testing.T) {
	implementations(t, func(t *testing.T, db DB, reopen func() DB) {
		must.NoError(t, db.PutAlloc(testAlloc()))
		must.NoError(t, db.PutTaskState("a1", "t", &structs.TaskState{State: "running"}))
		must.NoError(t, db.PutHookData("a1", "h", []byte("x")))

		must.NoError(t, db.DeleteAlloc("a1"))
		must.NoError(t, db.DeleteAlloc("a1"), must.Sprint("delete is idempotent"))

		allocs, err := db.GetAllocs()
		must.NoError(t, err)
		must.Len(t, 0, allocs)
		ts, err := db.GetTaskState("a1", "t")
		must.NoError(t, err)
		must.Nil(t, ts)

		// A task runner still finishing must not resurrect the alloc.
		must.ErrorIs(t, db.PutTaskState("a1", "t", &structs.TaskState{}), ErrUnknownAlloc)
		must.ErrorIs(t, db.PutTaskHandle("a1", "t", &drivers.TaskHandle{}), ErrUnknownAlloc)
		must.ErrorIs(t, db.PutHookData("a1", "h", []byte("y")), ErrUnknownAlloc)
		must.ErrorIs(t, db.PutAllocState("a1", &AllocState{}), ErrUnknownAlloc)

		db = reopen()
		allocs, err = db.GetAllocs()
		must.NoError(t, err)
		must.Len(t, 0, allocs)
	})
}

func TestDB_ClosedFails(t *testing.T) {
	implementations(t, func(t *testing.T, db DB, _ func() DB) {
		must.NoError(t, db.Close())
		_, err := db.GetNodeIdentity()
		must.ErrorIs(t, err, ErrClosed)
		must.ErrorIs(t, db.PutAlloc(testAlloc()), ErrClosed)
	})
}

func TestBoltDB_SecondOpenFailsClearly(t *testing.T) {
	defer func(d time.Duration) { openTimeout = d }(openTimeout)
	openTimeout = 50 * time.Millisecond
	path := filepath.Join(t.TempDir(), "state.db")
	db, err := NewBoltDB(path)
	must.NoError(t, err)
	defer db.Close()
	_, err = NewBoltDB(path)
	must.ErrorContains(t, err, "locked by another process")
}
