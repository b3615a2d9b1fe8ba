package scheduler

import (
	"testing"
	"time"

	"github.com/shoenig/test/must"

	"github.com/berth-io/berth/nomad/structs"
)

func systemJob(id string) *structs.Job {
	j := testJob(id, 1)
	j.Type = structs.JobTypeSystem
	return j
}

func TestSystem_OnePerEligibleNode(t *testing.T) {
	h := newHarness(t)
	for i := range 3 {
		h.upsertNode(testNode(i))
	}
	inelig := testNode(3)
	inelig.SchedulingEligibility = structs.NodeSchedulingIneligible
	down := testNode(4)
	down.Status = structs.NodeStatusDown
	windows := testNode(5)
	windows.Attributes["kernel.name"] = "windows"
	otherDC := testNode(6)
	otherDC.Datacenter = "dc2"
	for _, n := range []*structs.Node{inelig, down, windows, otherDC} {
		h.upsertNode(n)
	}
	j := systemJob("agent")
	j.Constraints = []*structs.Constraint{{LTarget: "${attr.kernel.name}", Operand: "=", RTarget: "linux"}}
	job := h.upsertJob(j)
	eval := h.process(testEval(job, structs.EvalTriggerJobRegister))

	must.Nil(t, eval.FailedTGAllocs) // filtered nodes are not failures
	must.Eq(t, "", eval.BlockedEval)
	live := h.live(job)
	must.SliceLen(t, 3, live)
	nodes := map[string]bool{}
	for _, a := range live {
		must.Eq(t, "agent.web[0]", a.Name)
		nodes[a.NodeID] = true
	}
	must.Eq(t, map[string]bool{testNode(0).ID: true, testNode(1).ID: true, testNode(2).ID: true}, nodes)

	// A node that joins later gets one; the others are left alone.
	h.upsertNode(testNode(7))
	h.process(testEval(job, structs.EvalTriggerNodeUpdate))
	must.SliceLen(t, 4, h.live(job))
	must.SliceLen(t, 2, h.plans)
	_, placed := h.plans[1].Counts()
	must.Eq(t, 1, placed)

	// A node that goes down loses its alloc; nothing replaces it.
	must.NoError(t, h.store.UpdateNodeStatus(h.next(), testNode(0).ID, structs.NodeStatusDown, "", testNow.UnixNano()))
	h.process(testEval(job, structs.EvalTriggerNodeUpdate))
	must.SliceLen(t, 3, h.live(job))
}

func TestSystem_ExhaustedNodeIsAFailure(t *testing.T) {
	h := newHarness(t)
	h.upsertNode(testNode(0))
	small := testNode(1)
	small.NodeResources.MemoryMB = 100
	h.upsertNode(small)
	job := h.upsertJob(systemJob("agent"))
	eval := h.process(testEval(job, structs.EvalTriggerJobRegister))
	must.SliceLen(t, 1, h.live(job))
	must.Eq(t, map[string]int{dimensionMemory: 1}, eval.FailedTGAllocs["web"].DimensionExhausted)
	must.NotEq(t, "", eval.BlockedEval)
}

func TestSystem_StopAndUpdate(t *testing.T) {
	h := newHarness(t)
	for i := range 2 {
		h.upsertNode(testNode(i))
	}
	job := h.upsertJob(systemJob("agent"))
	h.process(testEval(job, structs.EvalTriggerJobRegister))
	before := h.live(job)

	j := job.Copy()
	j.TaskGroups[0].Tasks[0].Config["command"] = "/bin/true"
	job = h.upsertJob(j)
	h.process(testEval(job, structs.EvalTriggerJobRegister))
	after := h.live(job)
	must.SliceLen(t, 2, after)
	for _, a := range after {
		must.Eq(t, job.Version, a.Job.Version)
		must.NotEq(t, before[0].ID, a.ID)
		must.NotEq(t, before[1].ID, a.ID)
	}

	must.NoError(t, h.store.StopJob(h.next(), job.Namespace, job.ID))
	h.process(testEval(job, structs.EvalTriggerJobDeregister))
	must.SliceEmpty(t, h.live(job))
}

func TestDrain_Scheduling(t *testing.T) {
	drain := func(d *structs.DrainStrategy) func(h *harness) {
		return func(h *harness) {
			must.NoError(t, h.store.UpdateNodeDrain(h.next(), testNode(0).ID, d, false, testNow.Add(-time.Minute).UnixNano()))
		}
	}
	cases := []struct {
		name  string
		drain *structs.DrainStrategy
		now   time.Time
		// want live allocs on node 0 after one eval per job: service, batch, system
		service, batch, system int
	}{
		{"before deadline", &structs.DrainStrategy{Deadline: time.Hour}, testNow, 0, 1, 1},
		{"after deadline", &structs.DrainStrategy{Deadline: time.Hour}, testNow.Add(2 * time.Hour), 0, 0, 0},
		{"force", &structs.DrainStrategy{Deadline: -1}, testNow, 0, 0, 0},
		{"ignore system jobs", &structs.DrainStrategy{Deadline: -1, IgnoreSystemJobs: true}, testNow, 0, 0, 1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t)
			for i := range 2 {
				h.upsertNode(testNode(i))
			}
			jobs := map[string]*structs.Job{}
			for _, typ := range []string{structs.JobTypeService, structs.JobTypeBatch, structs.JobTypeSystem} {
				j := testJob(typ, 2)
				j.Type = typ
				j.Constraints = []*structs.Constraint{{Operand: opDistinctHosts}}
				jobs[typ] = h.upsertJob(j)
				h.process(testEval(jobs[typ], structs.EvalTriggerJobRegister))
			}
			drain(tc.drain)(h)
			// Service and batch first, then system, as the drainer does.
			for _, typ := range []string{structs.JobTypeService, structs.JobTypeBatch, structs.JobTypeSystem} {
				h.processAt(testEval(jobs[typ], structs.EvalTriggerNodeDrain), tc.now)
			}
			onNode0 := func(typ string) int {
				n := 0
				for _, a := range h.live(jobs[typ]) {
					if a.NodeID == testNode(0).ID {
						n++
					}
				}
				return n
			}
			must.Eq(t, tc.service, onNode0(structs.JobTypeService))
			must.Eq(t, tc.batch, onNode0(structs.JobTypeBatch))
			must.Eq(t, tc.system, onNode0(structs.JobTypeSystem))
			// Migrated service allocs have nowhere to go (distinct hosts):
			// they are queued, not lost.
			must.SliceLen(t, 1, h.live(jobs[structs.JobTypeService]))
		})
	}
}

func TestSystem_WaitsForNonSystemAllocsOnDrain(t *testing.T) {
	h := newHarness(t)
	h.upsertNode(testNode(0))
	batch := testJob("batch", 1)
	batch.Type = structs.JobTypeBatch
	bj := h.upsertJob(batch)
	h.process(testEval(bj, structs.EvalTriggerJobRegister))
	sj := h.upsertJob(systemJob("agent"))
	h.process(testEval(sj, structs.EvalTriggerJobRegister))
	must.NoError(t, h.store.UpdateNodeDrain(h.next(), testNode(0).ID, &structs.DrainStrategy{Deadline: time.Hour}, false, testNow.UnixNano()))

	h.process(testEval(sj, structs.EvalTriggerNodeDrain))
	must.SliceLen(t, 1, h.live(sj)) // the batch alloc is still running

	h.setClientStatus(h.live(bj)[0].ID, structs.AllocClientStatusComplete, testNow)
	h.process(testEval(sj, structs.EvalTriggerNodeDrain))
	must.SliceEmpty(t, h.live(sj))
	must.Eq(t, descDrainStopped, h.alloc(h.plans[len(h.plans)-1].NodeUpdate[testNode(0).ID][0].AllocID).DesiredDescription)
}
