package state

import (
	"testing"

	"github.com/hashicorp/go-memdb"
	"github.com/shoenig/test/must"

	"github.com/berth-io/berth/nomad/structs"
)

func versionsOf(t *testing.T, s *StateStore, ns, id string) []uint64 {
	t.Helper()
	vs, err := s.JobVersionsByID(nil, ns, id)
	must.NoError(t, err)
	out := []uint64{}
	for _, v := range vs {
		out = append(out, v.Version)
	}
	return out
}

func TestJobVersions_KeptPerSpecChange(t *testing.T) {
	s := testStore(t)
	must.NoError(t, s.UpsertJob(1, mockJob("default", "web")))
	// Same ID in another namespace, and an ID that web is a prefix of:
	// neither is a version of default/web.
	must.NoError(t, s.UpsertJob(2, mockJob("prod", "web")))
	must.NoError(t, s.UpsertJob(3, mockJob("default", "webapp")))

	// An identical spec re-registered is no new version, but its row
	// follows the job (the new SubmitTime).
	same := mockJob("default", "web")
	same.SubmitTime = 2000
	must.NoError(t, s.UpsertJob(4, same))
	must.Eq(t, []uint64{0}, versionsOf(t, s, "default", "web"))
	v0, err := s.JobByIDAndVersion(nil, "default", "web", 0)
	must.NoError(t, err)
	must.Eq(t, 2000, v0.SubmitTime)

	changed := mockJob("default", "web")
	changed.TaskGroups[0].Count = 3
	changed.SubmitTime = 3000
	must.NoError(t, s.UpsertJob(5, changed))
	must.Eq(t, []uint64{1, 0}, versionsOf(t, s, "default", "web"))
	must.Eq(t, []uint64{0}, versionsOf(t, s, "prod", "web"))
	must.Eq(t, []uint64{0}, versionsOf(t, s, "default", "webapp"))
	must.Eq(t, 5, mustIndex(t, s, TableJobVersions))

	// The old version is the old spec; the newest is the job in force.
	v0, err = s.JobByIDAndVersion(nil, "default", "web", 0)
	must.NoError(t, err)
	must.Eq(t, 1, v0.TaskGroups[0].Count)
	vs, err := s.JobVersionsByID(nil, "default", "web")
	must.NoError(t, err)
	cur, err := s.JobByID(nil, "default", "web")
	must.NoError(t, err)
	must.Eq(t, cur, vs[0])
	none, err := s.JobByIDAndVersion(nil, "default", "web", 7)
	must.NoError(t, err)
	must.Nil(t, none)
}

// TestJobVersions_StatusChangeFollows: the newest row stays equal to the
// job when the job's status changes without a new version.
func TestJobVersions_StatusChangeFollows(t *testing.T) {
	s := testStore(t)
	job := mockJob("default", "web")
	must.NoError(t, s.UpsertJob(1, job, mockEval("e1", "default", "web")))
	done := mockEval("e1", "default", "web")
	done.Status = structs.EvalStatusComplete
	must.NoError(t, s.UpsertPlanResults(2, &structs.ApplyPlanResultsRequest{
		AllocsUpdated: []*structs.Allocation{mockAlloc("a1", job, "n1")},
		Evals:         []*structs.Evaluation{done},
	}))
	vs, err := s.JobVersionsByID(nil, "default", "web")
	must.NoError(t, err)
	must.SliceLen(t, 1, vs)
	must.Eq(t, structs.JobStatusRunning, vs[0].Status)
}

func TestJobVersions_Bounded(t *testing.T) {
	s := testStore(t)
	for i := range 10 {
		j := mockJob("default", "web")
		j.Priority = 10 + i
		must.NoError(t, s.UpsertJob(uint64(i+1), j))
	}
	// The default keeps Nomad's 6, newest first; a trim never drops the
	// job in force.
	must.Eq(t, []uint64{9, 8, 7, 6, 5, 4}, versionsOf(t, s, "default", "web"))

	j := mockJob("default", "web")
	j.Priority = 99
	must.NoError(t, s.RegisterJob(11, j, 2))
	must.Eq(t, []uint64{10, 9}, versionsOf(t, s, "default", "web"))

	// A stop is a version too.
	must.NoError(t, s.StopJobKeeping(12, "default", "web", 2, 5000))
	must.Eq(t, []uint64{11, 10}, versionsOf(t, s, "default", "web"))
	v, err := s.JobByIDAndVersion(nil, "default", "web", 11)
	must.NoError(t, err)
	must.True(t, v.Stop)
	must.Eq(t, 5000, v.SubmitTime, must.Sprint("a stop is submitted when it is asked for"))
	// Stopping a stopped job again is no new version and keeps its date.
	must.NoError(t, s.StopJobKeeping(13, "default", "web", 2, 6000))
	v, err = s.JobByIDAndVersion(nil, "default", "web", 11)
	must.NoError(t, err)
	must.Eq(t, 5000, v.SubmitTime)
}

func TestJobVersions_PurgeRemovesThem(t *testing.T) {
	s := testStore(t)
	must.NoError(t, s.UpsertJob(1, mockJob("default", "web")))
	j := mockJob("default", "web")
	j.Priority = 70
	must.NoError(t, s.UpsertJob(2, j))
	must.NoError(t, s.UpsertJob(3, mockJob("default", "webapp")))

	ws := memdb.NewWatchSet()
	_, err := s.JobVersionsByID(ws, "default", "web")
	must.NoError(t, err)
	must.NoError(t, s.DeleteJob(4, "default", "web"))
	must.True(t, fired(ws), must.Sprint("a purge wakes readers of the versions"))
	must.Eq(t, []uint64{}, versionsOf(t, s, "default", "web"))
	must.Eq(t, []uint64{0}, versionsOf(t, s, "default", "webapp"))
	must.Eq(t, 4, mustIndex(t, s, TableJobVersions))

	// Registered again, the job starts over at version 0 with no trace
	// of the purged one's versions.
	must.NoError(t, s.UpsertJob(5, mockJob("default", "web")))
	must.Eq(t, []uint64{0}, versionsOf(t, s, "default", "web"))
	v0, err := s.JobByIDAndVersion(nil, "default", "web", 0)
	must.NoError(t, err)
	must.Eq(t, 5, v0.CreateIndex)
}

// fired reports whether a channel of ws has closed, without waiting.
func fired(ws memdb.WatchSet) bool {
	for ch := range ws {
		select {
		case <-ch:
			return true
		default:
		}
	}
	return false
}

func TestJobVersions_Stability(t *testing.T) {
	s := testStore(t)
	must.NoError(t, s.UpsertJob(1, mockJob("default", "web")))
	j := mockJob("default", "web")
	j.Priority = 70
	must.NoError(t, s.UpsertJob(2, j))

	// An old version: its row only.
	must.NoError(t, s.UpdateJobStability(3, "default", "web", 0, true))
	v0, err := s.JobByIDAndVersion(nil, "default", "web", 0)
	must.NoError(t, err)
	must.True(t, v0.Stable)
	cur, err := s.JobByID(nil, "default", "web")
	must.NoError(t, err)
	must.False(t, cur.Stable)

	// The version in force: the job too, and no new version.
	must.NoError(t, s.UpdateJobStability(4, "default", "web", 1, true))
	cur, err = s.JobByID(nil, "default", "web")
	must.NoError(t, err)
	must.True(t, cur.Stable)
	must.Eq(t, 1, cur.Version)
	must.Eq(t, 4, cur.ModifyIndex)
	must.Eq(t, []uint64{1, 0}, versionsOf(t, s, "default", "web"))

	// The same spec registered again stays stable; a new spec starts
	// unstable, whatever the caller sent.
	same := mockJob("default", "web")
	same.Priority = 70
	must.NoError(t, s.UpsertJob(5, same))
	cur, _ = s.JobByID(nil, "default", "web")
	must.True(t, cur.Stable)
	next := mockJob("default", "web")
	next.Priority = 80
	next.Stable = true
	must.NoError(t, s.UpsertJob(6, next))
	cur, _ = s.JobByID(nil, "default", "web")
	must.Eq(t, 2, cur.Version)
	must.False(t, cur.Stable)

	must.ErrorIs(t, s.UpdateJobStability(7, "default", "web", 9, true), structs.ErrNotFound)
	must.ErrorIs(t, s.UpdateJobStability(7, "default", "nope", 0, true), structs.ErrNotFound)
}
