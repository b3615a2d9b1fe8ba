package state

import (
	"testing"

	"github.com/hashicorp/go-memdb"
	"github.com/shoenig/test/must"

	"github.com/berth-io/berth/nomad/structs"
)

// populate writes one of everything, at indexes 1..7.
func populate(t *testing.T, s *StateStore) {
	t.Helper()
	n := mockNode("n1")
	n.CSINodePlugins = map[string]*structs.CSIInfo{"ebs": csiInfo("ebs", false)}
	must.NoError(t, s.UpsertNode(1, n))
	job := mockJob("default", "web")
	must.NoError(t, s.UpsertJob(2, job, mockEval("e1", "default", "web")))
	must.NoError(t, s.UpsertCSIVolumes(3, []*structs.CSIVolume{mockVolume("default", "data", "ebs")}))
	must.NoError(t, s.UpsertPlanResults(4, &structs.ApplyPlanResultsRequest{
		AllocsUpdated: []*structs.Allocation{mockAlloc("a1", job, "n1")},
		CSIClaims:     []*structs.CSIVolumeClaimUpdate{claimUpdate("default", "data", mockClaim("a1", "n1", structs.CSIClaimReserved))},
	}))
}

func TestStateStore_TableIndexes(t *testing.T) {
	s := testStore(t)
	latest, err := s.LatestIndex()
	must.NoError(t, err)
	must.Eq(t, 0, latest)

	populate(t, s)
	want := map[string]uint64{
		TableNodes:      1,
		TableCSIPlugins: 1,
		TableJobs:       4, // status became running with the alloc
		TableEvals:      2,
		TableCSIVolumes: 4,
		TableAllocs:     4,
	}
	for table, idx := range want {
		must.Eq(t, idx, mustIndex(t, s, table), must.Sprint(table))
	}
	latest, err = s.LatestIndex()
	must.NoError(t, err)
	must.Eq(t, 4, latest)

	// A failed write bumps nothing.
	must.Error(t, s.DeleteCSIVolumes(9, "default", []string{"data"}, false))
	must.Eq(t, 4, mustIndex(t, s, TableCSIVolumes))
	latest, _ = s.LatestIndex()
	must.Eq(t, 4, latest)
}

func TestStateStore_SnapshotIsPointInTime(t *testing.T) {
	s := testStore(t)
	must.NoError(t, s.UpsertNode(1, mockNode("n1")))
	snap, err := s.Snapshot()
	must.NoError(t, err)
	must.NoError(t, s.UpsertNode(2, mockNode("n2")))
	must.NoError(t, s.UpdateNodeStatus(3, "n1", structs.NodeStatusDown, "", 1))

	iter, err := snap.Nodes(nil)
	must.Eq(t, []string{"n1"}, ids(t, iter, err))
	n, _ := snap.NodeByID(nil, "n1")
	must.Eq(t, structs.NodeStatusReady, n.Status)
	idx, _ := snap.Index(TableNodes)
	must.Eq(t, 1, idx)

	// Writes to a snapshot stay in the snapshot.
	must.NoError(t, snap.UpsertNode(4, mockNode("n9")))
	n, _ = s.NodeByID(nil, "n9")
	must.Nil(t, n)
}

// TestStateStore_CopyDiscipline checks that an object handed out by a read
// never changes under its holder, and that a write never changes the
// caller's object.
func TestStateStore_CopyDiscipline(t *testing.T) {
	s := testStore(t)
	populate(t, s)

	node, _ := s.NodeByID(nil, "n1")
	job, _ := s.JobByID(nil, "default", "web")
	alloc, _ := s.AllocByID(nil, "a1")
	eval, _ := s.EvalByID(nil, "e1")
	vol, _ := s.CSIVolumeByID(nil, "default", "data")
	plugin, _ := s.CSIPluginByID(nil, "ebs")
	saved := []any{node.Copy(), job.Copy(), alloc.Copy(), eval.Copy(), vol.Copy(), plugin.Copy()}

	// Every kind of write that touches those objects.
	n2 := mockNode("n1")
	n2.Name = "changed"
	must.NoError(t, s.UpsertNode(10, n2))
	must.NoError(t, s.UpdateNodeStatus(11, "n1", structs.NodeStatusDown, "gone", 5))
	must.NoError(t, s.UpdateNodeDrain(12, "n1", &structs.DrainStrategy{}, false, 5))
	j2 := mockJob("default", "web")
	j2.Priority = 90
	must.NoError(t, s.UpsertJob(13, j2))
	must.NoError(t, s.UpdateAllocsFromClient(14, []*structs.Allocation{{
		ID: "a1", ClientStatus: structs.AllocClientStatusRunning,
		TaskStates: map[string]*structs.TaskState{"web": {State: structs.TaskStateRunning}},
	}}))
	must.NoError(t, s.UpsertPlanResults(15, &structs.ApplyPlanResultsRequest{
		AllocsStopped: []*structs.AllocStopUpdate{{AllocID: "a1"}},
	}))
	done := mockEval("e1", "default", "web")
	done.Status = structs.EvalStatusComplete
	must.NoError(t, s.UpsertEvals(16, []*structs.Evaluation{done}))
	must.NoError(t, s.UpdateCSIVolumeClaims(17, []*structs.CSIVolumeClaimUpdate{
		claimUpdate("default", "data", mockClaim("a1", "n1", structs.CSIClaimTaken)),
	}, 9))
	must.NoError(t, s.UpdateCSIVolumeClaims(18, []*structs.CSIVolumeClaimUpdate{
		claimUpdate("default", "data", mockClaim("a1", "n1", structs.CSIClaimNodeDetached)),
		claimUpdate("default", "data", mockClaim("a1", "n1", structs.CSIClaimControllerDetached)),
		claimUpdate("default", "data", mockClaim("a1", "n1", structs.CSIClaimFreed)),
	}, 9))
	v2 := mockVolume("default", "data", "ebs")
	v2.Parameters = map[string]string{"type": "hdd"}
	must.NoError(t, s.UpsertCSIVolumes(19, []*structs.CSIVolume{v2}))

	held := []any{node, job, alloc, eval, vol, plugin}
	for i := range held {
		must.Eq(t, saved[i], held[i])
	}

	// The caller's objects are untouched by the writes they went into.
	must.Eq(t, 0, n2.CreateIndex)
	must.Eq(t, 0, j2.ModifyIndex)
	must.Eq(t, 0, v2.ModifyIndex)
	must.Eq(t, 0, done.ModifyIndex)
}

func TestStateStore_WatchOnlyRelevantTables(t *testing.T) {
	s := testStore(t)
	populate(t, s)

	reads := map[string]func(ws memdb.WatchSet) error{
		TableNodes:      func(ws memdb.WatchSet) error { _, err := s.Nodes(ws); return err },
		TableJobs:       func(ws memdb.WatchSet) error { _, err := s.Jobs(ws, "default"); return err },
		TableAllocs:     func(ws memdb.WatchSet) error { _, err := s.AllocsByNode(ws, "n1"); return err },
		TableEvals:      func(ws memdb.WatchSet) error { _, err := s.EvalsByJob(ws, "default", "web"); return err },
		TableCSIVolumes: func(ws memdb.WatchSet) error { _, err := s.CSIVolumesByNodeID(ws, "n1"); return err },
		TableCSIPlugins: func(ws memdb.WatchSet) error { _, err := s.CSIPlugins(ws); return err },
	}
	writes := map[string]func(index uint64) error{
		TableNodes: func(i uint64) error { return s.UpdateNodeEligibility(i, "n1", structs.NodeSchedulingIneligible, 0) },
		TableJobs: func(i uint64) error {
			j := mockJob("default", "web")
			j.Priority = 10
			return s.UpsertJob(i, j)
		},
		TableAllocs: func(i uint64) error {
			return s.UpdateAllocsFromClient(i, []*structs.Allocation{{ID: "a1", ClientStatus: structs.AllocClientStatusPending, ModifyTime: int64(i)}})
		},
		TableEvals: func(i uint64) error {
			e := mockEval("e1", "default", "web")
			e.StatusDescription = "again"
			return s.UpsertEvals(i, []*structs.Evaluation{e})
		},
		TableCSIVolumes: func(i uint64) error {
			return s.UpdateCSIVolumeClaims(i, []*structs.CSIVolumeClaimUpdate{
				claimUpdate("default", "data", mockClaim("a1", "n1", structs.CSIClaimTaken)),
			}, int64(i))
		},
		TableCSIPlugins: func(i uint64) error {
			n := mockNode("n1")
			info := csiInfo("ebs", false)
			info.UpdateTime = int64(i) // a new fingerprint each time
			n.CSINodePlugins = map[string]*structs.CSIInfo{"ebs": info}
			return s.UpsertNode(i, n)
		},
	}
	index := uint64(100)
	for readTable, read := range reads {
		for writeTable, write := range writes {
			// Some writes touch two tables by design: a node write can
			// change plugins.
			if writeTable == TableCSIPlugins && readTable == TableNodes {
				continue
			}
			t.Run(readTable+" after "+writeTable, func(t *testing.T) {
				ws := memdb.NewWatchSet()
				must.NoError(t, read(ws))
				index++
				must.NoError(t, write(index))
				must.Eq(t, readTable == writeTable, watchFired(ws))
			})
		}
	}
}

func TestStateStore_Abandon(t *testing.T) {
	s := testStore(t)
	snap, err := s.Snapshot()
	must.NoError(t, err)
	select {
	case <-s.AbandonCh():
		t.Fatal("abandoned too early")
	default:
	}
	s.Abandon()
	s.Abandon() // idempotent
	<-s.AbandonCh()
	<-snap.AbandonCh() // a snapshot follows its store
}

func TestStateStore_Restore(t *testing.T) {
	src := testStore(t)
	populate(t, src)
	dst := testStore(t)
	r, err := dst.Restore()
	must.NoError(t, err)

	snap, err := src.Snapshot()
	must.NoError(t, err)
	iterAll := func(f func() (memdb.ResultIterator, error), restore func(any) error) {
		iter, err := f()
		must.NoError(t, err)
		for raw := iter.Next(); raw != nil; raw = iter.Next() {
			must.NoError(t, restore(raw))
		}
	}
	iterAll(func() (memdb.ResultIterator, error) { return snap.Nodes(nil) }, func(o any) error { return r.NodeRestore(o.(*structs.Node)) })
	iterAll(func() (memdb.ResultIterator, error) { return snap.Jobs(nil, "*") }, func(o any) error { return r.JobRestore(o.(*structs.Job)) })
	iterAll(func() (memdb.ResultIterator, error) { return snap.Allocs(nil) }, func(o any) error { return r.AllocRestore(o.(*structs.Allocation)) })
	iterAll(func() (memdb.ResultIterator, error) { return snap.Evals(nil, "*") }, func(o any) error { return r.EvalRestore(o.(*structs.Evaluation)) })
	iterAll(func() (memdb.ResultIterator, error) { return snap.CSIVolumes(nil, "*") }, func(o any) error { return r.CSIVolumeRestore(o.(*structs.CSIVolume)) })
	iterAll(func() (memdb.ResultIterator, error) { return snap.CSIPlugins(nil) }, func(o any) error { return r.CSIPluginRestore(o.(*structs.CSIPlugin)) })
	iterAll(snap.Indexes, func(o any) error { return r.IndexRestore(o.(*IndexEntry)) })

	// Nothing is visible before Commit.
	n, _ := dst.NodeByID(nil, "n1")
	must.Nil(t, n)
	must.NoError(t, r.Commit())

	n, _ = dst.NodeByID(nil, "n1")
	must.NotNil(t, n)
	vols, err := dst.CSIVolumesByNodeID(nil, "n1") // secondary indexes are rebuilt
	must.Eq(t, []string{"default/data"}, ids(t, vols, err))
	latest, _ := dst.LatestIndex()
	must.Eq(t, 4, latest)
}
