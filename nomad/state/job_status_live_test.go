package state

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/shoenig/test/must"

	"github.com/berth-io/berth/nomad/structs"
)

// TestJobStatus_LiveHintMatchesRecount drives random plans and client
// updates through the store and checks, after each write, that every
// job's stored status is what a recount of all its allocs and evals says:
// the live-alloc hint (touchJobLive) may skip the recount only when it
// would have answered "running". Writes that end the hinted alloc in the
// same request (a client update that reports it running, then failed)
// or that stop it through the plan's own stops are drawn.
func TestJobStatus_LiveHintMatchesRecount(t *testing.T) {
	for seed := range uint64(40) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) { liveHintSchedule(t, seed) })
	}
}

func liveHintSchedule(t *testing.T, seed uint64) {
	r := rand.New(rand.NewPCG(seed, 20))
	s := testStore(t)
	index := uint64(1)
	next := func() uint64 { index++; return index }
	jobs := []string{"a", "b", "c"}
	for _, id := range jobs {
		must.NoError(t, s.RegisterJob(next(), mockJob("default", id), 0))
	}
	pick := func(xs ...string) string { return xs[r.IntN(len(xs))] }
	var allocs []string
	clientStatuses := []string{structs.AllocClientStatusPending, structs.AllocClientStatusRunning,
		structs.AllocClientStatusComplete, structs.AllocClientStatusFailed, structs.AllocClientStatusLost}
	for step := range 60 {
		switch {
		case len(allocs) == 0 || r.IntN(2) == 0:
			req := &structs.ApplyPlanResultsRequest{Timestamp: int64(step)}
			for range 1 + r.IntN(3) {
				job, _ := s.JobByID(nil, "default", pick(jobs...))
				// An alloc (and an eval) stays in its job, as every real one does.
				id := fmt.Sprintf("alloc-%s-%d", job.ID, r.IntN(4))
				a := mockAlloc(id, job, "n1")
				a.DesiredStatus = pick(structs.AllocDesiredStatusRun, structs.AllocDesiredStatusRun, structs.AllocDesiredStatusStop)
				a.ClientStatus = pick(clientStatuses...)
				req.AllocsUpdated = append(req.AllocsUpdated, a)
				allocs = append(allocs, id)
			}
			if len(allocs) > 0 && r.IntN(3) == 0 {
				req.AllocsStopped = append(req.AllocsStopped, &structs.AllocStopUpdate{AllocID: pick(allocs...)})
			}
			if r.IntN(2) == 0 {
				job := pick(jobs...)
				e := mockEval(fmt.Sprintf("eval-%s-%d", job, r.IntN(3)), "default", job)
				e.Status = pick(structs.EvalStatusPending, structs.EvalStatusBlocked, structs.EvalStatusComplete, structs.EvalStatusFailed)
				req.Evals = append(req.Evals, e)
			}
			must.NoError(t, s.UpsertPlanResults(next(), req))
		default:
			var ups []*structs.Allocation
			for range 1 + r.IntN(3) {
				ups = append(ups, &structs.Allocation{ID: pick(allocs...), ClientStatus: pick(clientStatuses...)})
			}
			must.NoError(t, s.UpdateAllocsFromClient(next(), ups))
		}
		for _, id := range jobs {
			job, err := s.JobByID(nil, "default", id)
			must.NoError(t, err)
			txn := s.writeTxn(0)
			want, err := jobStatusTxn(txn, job)
			txn.Abort()
			must.NoError(t, err)
			must.Eq(t, want, job.Status, must.Sprintf("seed %d step %d: job %q", seed, step, id))
		}
	}
}
