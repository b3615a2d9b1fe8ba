package scheduler

import (
	"testing"
	"time"

	"github.com/shoenig/test/must"

	"github.com/berth-io/berth/nomad/structs"
)

func TestService_SpreadsCountOverNodes(t *testing.T) {
	h := newHarness(t)
	for i := range 3 {
		h.upsertNode(testNode(i))
	}
	job := h.upsertJob(testJob("web", 3))
	eval := h.process(testEval(job, structs.EvalTriggerJobRegister))

	must.Eq(t, structs.EvalStatusComplete, eval.Status)
	must.Nil(t, eval.FailedTGAllocs)
	must.Eq(t, "", eval.BlockedEval)
	must.Eq(t, map[string]int{"web": 0}, eval.QueuedAllocations)
	allocs := h.live(job)
	must.SliceLen(t, 3, allocs)
	nodes := map[string]bool{}
	for i, a := range allocs {
		must.Eq(t, allocName("web", "web", i), a.Name)
		must.Eq(t, structs.AllocClientStatusPending, a.ClientStatus)
		must.Eq(t, &structs.Resources{CPU: 500, MemoryMB: 256}, a.Resources)
		nodes[a.NodeID] = true
	}
	must.MapLen(t, 3, nodes)

	// Processing again changes nothing: no plan at all.
	plans := len(h.plans)
	h.process(testEval(job, structs.EvalTriggerJobRegister))
	must.Eq(t, plans, len(h.plans))
}

func TestService_SpreadsThenLeastLoaded(t *testing.T) {
	h := newHarness(t)
	for i := range 2 {
		h.upsertNode(testNode(i))
	}
	// Node 0 is busy with another job's alloc.
	other := h.upsertJob(testJob("other", 1))
	busy := &structs.Allocation{
		ID: "busy", Namespace: other.Namespace, Name: "other.web[0]", JobID: other.ID, TaskGroup: "web",
		NodeID: testNode(0).ID, Resources: &structs.Resources{CPU: 3000, MemoryMB: 4000},
	}
	h.upsertAllocs(busy)
	job := h.upsertJob(testJob("web", 3))
	h.process(testEval(job, structs.EvalTriggerJobRegister))

	perNode := map[string]int{}
	for _, a := range h.live(job) {
		perNode[a.NodeID]++
	}
	// Spread first (1 and 1), then the third on the least loaded node.
	must.Eq(t, map[string]int{testNode(0).ID: 1, testNode(1).ID: 2}, perNode)
}

func TestService_Infeasible(t *testing.T) {
	cases := []struct {
		name  string
		edit  func(*structs.Job)
		check func(t *testing.T, m *structs.AllocMetric)
	}{
		{
			name: "driver missing",
			edit: func(j *structs.Job) { j.TaskGroups[0].Tasks[0].Driver = "docker" },
			check: func(t *testing.T, m *structs.AllocMetric) {
				must.Eq(t, 3, m.NodesEvaluated)
				must.Eq(t, 3, m.NodesFiltered)
				must.Eq(t, map[string]int{filterMissingDrivers: 3}, m.ConstraintFiltered)
			},
		},
		{
			name: "driver cannot mount the task's volume",
			edit: func(j *structs.Job) {
				task := j.TaskGroups[0].Tasks[0]
				task.Driver = "raw_exec"
				task.VolumeMounts = []*structs.VolumeMount{{Volume: "data", Destination: "/data"}}
			},
			check: func(t *testing.T, m *structs.AllocMetric) {
				must.Eq(t, 3, m.NodesFiltered)
				must.Eq(t, map[string]int{filterDriverMounts: 3}, m.ConstraintFiltered)
			},
		},
		{
			name: "datacenter",
			edit: func(j *structs.Job) { j.Datacenters = []string{"eu-*"} },
			check: func(t *testing.T, m *structs.AllocMetric) {
				must.Eq(t, 0, m.NodesEvaluated)
				must.MapEmpty(t, m.NodesAvailable)
			},
		},
		{
			name: "resources",
			edit: func(j *structs.Job) { j.TaskGroups[0].Tasks[0].Resources.MemoryMB = 9000 },
			check: func(t *testing.T, m *structs.AllocMetric) {
				must.Eq(t, 3, m.NodesEvaluated)
				must.Eq(t, 3, m.NodesExhausted)
				must.Eq(t, map[string]int{dimensionMemory: 3}, m.DimensionExhausted)
				must.Eq(t, map[string]int{"dc1": 3}, m.NodesAvailable)
			},
		},
		{
			name: "constraint",
			edit: func(j *structs.Job) {
				j.Constraints = []*structs.Constraint{{LTarget: "${attr.kernel.name}", Operand: "=", RTarget: "windows"}}
			},
			check: func(t *testing.T, m *structs.AllocMetric) {
				must.Eq(t, map[string]int{"${attr.kernel.name} = windows": 3}, m.ConstraintFiltered)
			},
		},
		{
			name: "task constraint on meta",
			edit: func(j *structs.Job) {
				j.TaskGroups[0].Tasks[0].Constraints = []*structs.Constraint{{LTarget: "${meta.rack}", Operand: "=", RTarget: "r9"}}
			},
			check: func(t *testing.T, m *structs.AllocMetric) {
				must.Eq(t, map[string]int{"${meta.rack} = r9": 3}, m.ConstraintFiltered)
			},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t)
			for i := range 3 {
				h.upsertNode(testNode(i))
			}
			j := testJob("web", 2)
			tc.edit(j)
			job := h.upsertJob(j)
			eval := h.process(testEval(job, structs.EvalTriggerJobRegister))

			must.Eq(t, structs.EvalStatusComplete, eval.Status)
			must.SliceEmpty(t, h.live(job))
			must.MapContainsKey(t, eval.FailedTGAllocs, "web")
			m := eval.FailedTGAllocs["web"]
			must.Eq(t, 1, m.CoalescedFailures)
			tc.check(t, m)
			must.Eq(t, map[string]int{"web": 2}, eval.QueuedAllocations)

			// A blocked eval waits for capacity, with the same explanation.
			must.SliceLen(t, 1, h.created)
			blocked := h.created[0]
			must.Eq(t, structs.EvalStatusBlocked, blocked.Status)
			must.Eq(t, blocked.ID, eval.BlockedEval)
			must.Eq(t, eval.ID, blocked.PreviousEval)
			must.Eq(t, eval.FailedTGAllocs, blocked.FailedTGAllocs)
		})
	}
}

func TestService_DistinctHosts(t *testing.T) {
	h := newHarness(t)
	for i := range 3 {
		h.upsertNode(testNode(i))
	}
	j := testJob("web", 4)
	j.Constraints = []*structs.Constraint{{Operand: opDistinctHosts}}
	job := h.upsertJob(j)
	eval := h.process(testEval(job, structs.EvalTriggerJobRegister))

	must.SliceLen(t, 3, h.live(job))
	must.Eq(t, map[string]int{filterDistinctHosts: 3}, eval.FailedTGAllocs["web"].ConstraintFiltered)
	must.Eq(t, map[string]int{"web": 1}, eval.QueuedAllocations)
}

func TestService_DatacenterGlob(t *testing.T) {
	h := newHarness(t)
	n := testNode(0)
	n.Datacenter = "us-east-1"
	h.upsertNode(n)
	j := testJob("web", 1)
	j.Datacenters = []string{"eu-west", "us-*"}
	job := h.upsertJob(j)
	h.process(testEval(job, structs.EvalTriggerJobRegister))
	must.SliceLen(t, 1, h.live(job))
}

func TestService_SkipsUnschedulableNodes(t *testing.T) {
	h := newHarness(t)
	down := testNode(0)
	down.Status = structs.NodeStatusDown
	inelig := testNode(1)
	inelig.SchedulingEligibility = structs.NodeSchedulingIneligible
	init := testNode(2)
	init.Status = structs.NodeStatusInit
	unhealthy := testNode(3)
	unhealthy.Drivers["exec"].Healthy = false
	for _, n := range []*structs.Node{down, inelig, init, unhealthy, testNode(4)} {
		h.upsertNode(n)
	}
	job := h.upsertJob(testJob("web", 2))
	eval := h.process(testEval(job, structs.EvalTriggerJobRegister))

	allocs := h.live(job)
	must.SliceLen(t, 2, allocs)
	for _, a := range allocs {
		must.Eq(t, testNode(4).ID, a.NodeID)
	}
	must.Nil(t, eval.FailedTGAllocs)
}

func TestBatch_DoesNotReplaceCompletedAlloc(t *testing.T) {
	for _, typ := range []string{structs.JobTypeBatch, structs.JobTypeService} {
		t.Run(typ, func(t *testing.T) {
			h := newHarness(t)
			for i := range 2 {
				h.upsertNode(testNode(i))
			}
			j := testJob("work", 2)
			j.Type = typ
			job := h.upsertJob(j)
			h.process(testEval(job, structs.EvalTriggerJobRegister))
			allocs := h.live(job)
			must.SliceLen(t, 2, allocs)
			h.setClientStatus(allocs[0].ID, structs.AllocClientStatusComplete, testNow)

			h.process(testEval(job, structs.EvalTriggerRetryFailedAlloc))
			all, err := h.store.AllocsByJob(nil, job.Namespace, job.ID)
			must.NoError(t, err)
			if typ == structs.JobTypeBatch {
				must.SliceLen(t, 2, all) // done is done
			} else {
				must.SliceLen(t, 3, all) // a service is replaced
				must.SliceLen(t, 2, h.live(job))
			}
		})
	}
}

func TestService_StopAndPurgeStopAll(t *testing.T) {
	for _, purge := range []bool{false, true} {
		t.Run(map[bool]string{false: "stop", true: "purge"}[purge], func(t *testing.T) {
			h := newHarness(t)
			for i := range 3 {
				h.upsertNode(testNode(i))
			}
			job := h.upsertJob(testJob("web", 3))
			h.process(testEval(job, structs.EvalTriggerJobRegister))
			must.SliceLen(t, 3, h.live(job))

			if purge {
				must.NoError(t, h.store.DeleteJob(h.next(), job.Namespace, job.ID))
			} else {
				must.NoError(t, h.store.StopJob(h.next(), job.Namespace, job.ID))
			}
			eval := h.process(testEval(job, structs.EvalTriggerJobDeregister))
			must.Eq(t, structs.EvalStatusComplete, eval.Status)
			must.SliceEmpty(t, h.live(job))
			all, err := h.store.AllocsByJob(nil, job.Namespace, job.ID)
			must.NoError(t, err)
			for _, a := range all {
				must.Eq(t, structs.AllocDesiredStatusStop, a.DesiredStatus)
				must.Eq(t, descJobStopped, a.DesiredDescription)
			}
		})
	}
}

func TestService_ScaleDownStopsHighestIndexes(t *testing.T) {
	h := newHarness(t)
	for i := range 3 {
		h.upsertNode(testNode(i))
	}
	job := h.upsertJob(testJob("web", 3))
	h.process(testEval(job, structs.EvalTriggerJobRegister))
	before := h.live(job)

	j := job.Copy()
	j.TaskGroups[0].Count = 1
	job = h.upsertJob(j)
	h.process(testEval(job, structs.EvalTriggerJobRegister))
	after := h.live(job)
	must.SliceLen(t, 1, after)
	must.Eq(t, before[0].ID, after[0].ID) // web[0] kept, updated in place
	must.Eq(t, job.Version, after[0].Job.Version)
}

func TestService_ReschedulesFailedAllocs(t *testing.T) {
	cases := []struct {
		name     string
		typ      string
		policy   *structs.ReschedulePolicy
		tracker  int           // reschedule events the failed alloc already has
		failedAt time.Duration // before testNow
		// want: "now", "later" or "never"
		want      string
		wantDelay time.Duration
	}{
		{name: "service default after delay", typ: structs.JobTypeService, failedAt: time.Minute, want: "now", wantDelay: 30 * time.Second},
		{name: "service default within delay", typ: structs.JobTypeService, failedAt: 10 * time.Second, want: "later", wantDelay: 30 * time.Second},
		{name: "service exponential third", typ: structs.JobTypeService, tracker: 2, failedAt: time.Minute, want: "later", wantDelay: 2 * time.Minute},
		{name: "batch default first", typ: structs.JobTypeBatch, failedAt: 10 * time.Second, want: "now", wantDelay: 5 * time.Second},
		{name: "batch default used up", typ: structs.JobTypeBatch, tracker: 1, failedAt: time.Hour, want: "never"},
		{
			name: "limited attempts left", typ: structs.JobTypeService, tracker: 1, failedAt: time.Minute, want: "now",
			policy: &structs.ReschedulePolicy{Attempts: 2, Interval: time.Hour, Delay: time.Second, DelayFunction: delayConstant},
		},
		{
			name: "no attempts", typ: structs.JobTypeService, failedAt: time.Minute, want: "never",
			policy: &structs.ReschedulePolicy{Attempts: 0, Interval: time.Hour},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t)
			for i := range 2 {
				h.upsertNode(testNode(i))
			}
			j := testJob("work", 1)
			j.Type = tc.typ
			j.TaskGroups[0].ReschedulePolicy = tc.policy
			job := h.upsertJob(j)
			h.process(testEval(job, structs.EvalTriggerJobRegister))
			failed := h.live(job)[0]
			if tc.tracker > 0 {
				a := failed.Copy()
				a.RescheduleTracker = &structs.RescheduleTracker{}
				for i := range tc.tracker {
					a.RescheduleTracker.Events = append(a.RescheduleTracker.Events, &structs.RescheduleEvent{
						RescheduleTime: testNow.Add(-time.Duration(i+2) * time.Minute).UnixNano(), PrevAllocID: "older",
					})
				}
				h.upsertAllocs(a)
			}
			h.setClientStatus(failed.ID, structs.AllocClientStatusFailed, testNow.Add(-tc.failedAt))

			eval := h.process(testEval(job, structs.EvalTriggerRetryFailedAlloc))
			must.Eq(t, structs.EvalStatusComplete, eval.Status)
			old := h.alloc(failed.ID)
			switch tc.want {
			case "now":
				must.Eq(t, descRescheduled, old.DesiredDescription)
				live := h.live(job)
				must.SliceLen(t, 1, live)
				next := live[0]
				must.Eq(t, failed.ID, next.PreviousAllocation)
				must.Eq(t, failed.Name, next.Name)
				must.NotEq(t, failed.NodeID, next.NodeID) // avoids the node it failed on
				must.SliceLen(t, tc.tracker+1, next.RescheduleTracker.Events)
				last := next.RescheduleTracker.Events[tc.tracker]
				must.Eq(t, failed.ID, last.PrevAllocID)
				if tc.wantDelay > 0 {
					must.Eq(t, int64(tc.wantDelay), last.Delay)
				}
			case "later":
				must.Eq(t, structs.AllocDesiredStatusRun, old.DesiredStatus)
				must.NotEq(t, "", old.FollowupEvalID)
				follow, err := h.store.EvalByID(nil, old.FollowupEvalID)
				must.NoError(t, err)
				must.Eq(t, structs.EvalStatusPending, follow.Status)
				must.Eq(t, testNow.Add(-tc.failedAt).Add(tc.wantDelay).UnixNano(), follow.WaitUntil)

				// The follow-up, run when due, reschedules it.
				due := time.Unix(0, follow.WaitUntil)
				h.processAt(follow, due)
				must.Eq(t, descRescheduled, h.alloc(failed.ID).DesiredDescription)
				must.SliceLen(t, 1, h.live(job))
			case "never":
				must.Eq(t, structs.AllocDesiredStatusRun, old.DesiredStatus)
				must.Eq(t, "", old.FollowupEvalID)
				must.SliceEmpty(t, h.live(job)) // the failed one is not replaced
				all, err := h.store.AllocsByJob(nil, job.Namespace, job.ID)
				must.NoError(t, err)
				must.SliceLen(t, 1, all)
			}
		})
	}
}

func TestService_LostAllocsReplaced(t *testing.T) {
	h := newHarness(t)
	for i := range 3 {
		h.upsertNode(testNode(i))
	}
	job := h.upsertJob(testJob("web", 3))
	h.process(testEval(job, structs.EvalTriggerJobRegister))
	var onNode0 *structs.Allocation
	for _, a := range h.live(job) {
		if a.NodeID == testNode(0).ID {
			onNode0 = a
		}
	}
	must.NotNil(t, onNode0)
	must.NoError(t, h.store.UpdateNodeStatus(h.next(), testNode(0).ID, structs.NodeStatusDown, "missed heartbeats", testNow.UnixNano()))

	eval := h.process(testEval(job, structs.EvalTriggerNodeUpdate))
	must.Nil(t, eval.FailedTGAllocs)
	lost := h.alloc(onNode0.ID)
	must.Eq(t, structs.AllocDesiredStatusStop, lost.DesiredStatus)
	must.Eq(t, structs.AllocClientStatusLost, lost.ClientStatus)
	must.Eq(t, descLost, lost.DesiredDescription)
	live := h.live(job)
	must.SliceLen(t, 3, live)
	for _, a := range live {
		must.NotEq(t, testNode(0).ID, a.NodeID)
		if a.Name == onNode0.Name {
			must.Eq(t, onNode0.ID, a.PreviousAllocation)
		}
	}
}

func TestService_InPlaceVersusDestructiveUpdate(t *testing.T) {
	cases := []struct {
		name        string
		edit        func(*structs.Job)
		destructive bool
	}{
		{"restart policy", func(j *structs.Job) {
			j.TaskGroups[0].RestartPolicy = &structs.RestartPolicy{Attempts: 9, Mode: structs.RestartPolicyModeFail}
		}, false},
		{"priority", func(j *structs.Job) { j.Priority = 70 }, false},
		{"task config", func(j *structs.Job) { j.TaskGroups[0].Tasks[0].Config["command"] = "/bin/true" }, true},
		{"task env", func(j *structs.Job) { j.TaskGroups[0].Tasks[0].Env = map[string]string{"A": "b"} }, true},
		{"job meta", func(j *structs.Job) { j.Meta = map[string]string{"owner": "ops"} }, true},
		{"constraint the node no longer meets", func(j *structs.Job) {
			j.Constraints = []*structs.Constraint{{LTarget: "${node.unique.id}", Operand: "!=", RTarget: testNode(0).ID}}
		}, true},
		{"task resources", func(j *structs.Job) { j.TaskGroups[0].Tasks[0].Resources.CPU = 900 }, true},
		{"reschedule policy", func(j *structs.Job) {
			j.TaskGroups[0].ReschedulePolicy = &structs.ReschedulePolicy{Attempts: 3, Interval: time.Hour}
		}, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t)
			h.upsertNode(testNode(0))
			job := h.upsertJob(testJob("web", 1))
			h.process(testEval(job, structs.EvalTriggerJobRegister))
			before := h.live(job)[0]

			j := job.Copy()
			tc.edit(j)
			job = h.upsertJob(j)
			h.process(testEval(job, structs.EvalTriggerJobRegister))
			live := h.live(job)
			if tc.destructive {
				must.Eq(t, descUpdating, h.alloc(before.ID).DesiredDescription)
				if len(live) == 1 {
					must.NotEq(t, before.ID, live[0].ID)
					must.Eq(t, before.ID, live[0].PreviousAllocation)
				}
				return
			}
			must.SliceLen(t, 1, live)
			must.Eq(t, before.ID, live[0].ID)
			must.Eq(t, job.Version, live[0].Job.Version)
			must.Eq(t, groupResources(job.TaskGroups[0]), live[0].Resources)
		})
	}
}

func TestService_PartialRejectionReplans(t *testing.T) {
	h := newHarness(t)
	for i := range 3 {
		h.upsertNode(testNode(i))
	}
	job := h.upsertJob(testJob("web", 3))
	h.rejectNodes = map[string]bool{testNode(0).ID: true}
	eval := h.process(testEval(job, structs.EvalTriggerJobRegister))

	must.SliceLen(t, 2, h.plans)
	must.Eq(t, structs.EvalStatusComplete, eval.Status)
	must.SliceLen(t, 3, h.live(job))
}

// TestProcess_FinalOnlyWithAWholeCommit: the last plan carries the eval's
// end (Plan.Final) only when no placement failed, and the scheduler
// writes the eval itself unless the planner committed that end with the
// plan: after a rejection it plans again, and with a failed placement it
// creates the blocked eval and updates the eval as before.
func TestProcess_FinalOnlyWithAWholeCommit(t *testing.T) {
	t.Run("whole", func(t *testing.T) {
		h := newHarness(t)
		h.writeFinal = true
		h.upsertNode(testNode(0))
		job := h.upsertJob(testJob("web", 2))
		eval := h.process(testEval(job, structs.EvalTriggerJobRegister))
		must.Eq(t, structs.EvalStatusComplete, eval.Status)
		must.SliceEmpty(t, h.updates)
		must.SliceLen(t, 1, h.plans)
		stored, err := h.store.EvalByID(nil, eval.ID)
		must.NoError(t, err)
		must.Eq(t, structs.EvalStatusComplete, stored.Status)
		must.Eq(t, h.live(job)[0].CreateIndex, stored.ModifyIndex)
	})
	t.Run("rejected then whole", func(t *testing.T) {
		h := newHarness(t)
		h.writeFinal = true
		for i := range 2 {
			h.upsertNode(testNode(i))
		}
		job := h.upsertJob(testJob("web", 2))
		h.rejectNodes = map[string]bool{testNode(0).ID: true, testNode(1).ID: true}
		eval := h.process(testEval(job, structs.EvalTriggerJobRegister))
		must.SliceLen(t, 2, h.plans)
		must.NotNil(t, h.plans[0].Final)
		must.SliceLen(t, 1, h.finals, must.Sprint("the rejected plan's Final must not count as written"))
		must.SliceEmpty(t, h.updates)
		must.Eq(t, structs.EvalStatusComplete, eval.Status)
		must.SliceLen(t, 2, h.live(job))
	})
	t.Run("failed placement", func(t *testing.T) {
		h := newHarness(t)
		h.writeFinal = true
		h.upsertNode(testNode(0))
		job := testJob("web", 2)
		job.TaskGroups[0].Tasks[0].Resources.MemoryMB = 5000 // one per node
		job = h.upsertJob(job)
		eval := h.process(testEval(job, structs.EvalTriggerJobRegister))
		must.Nil(t, h.plans[0].Final)
		must.SliceLen(t, 1, h.updates)
		must.NotEq(t, "", eval.BlockedEval)
		must.SliceLen(t, 1, h.created)
	})
}

func TestScheduler_UnknownJobTypeFailsEval(t *testing.T) {
	h := newHarness(t)
	job := h.upsertJob(testJob("web", 1))
	e := testEval(job, structs.EvalTriggerJobRegister)
	e.Type = "sysbatch"
	eval := h.process(e)
	must.Eq(t, structs.EvalStatusFailed, eval.Status)
	must.StrContains(t, eval.StatusDescription, `unknown job type "sysbatch"`)
}
