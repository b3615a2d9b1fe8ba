package main

import (
	"testing"
	"time"

	"github.com/shoenig/test/must"

	"github.com/berth-io/berth/api"
)

func TestMountedAt(t *testing.T) {
	at := time.Unix(0, 1_700_000_000_123_456_789)
	ev := func(typ, step string, ns int64) *api.TaskEvent {
		return &api.TaskEvent{Type: typ, Time: ns, Details: map[string]string{"step": step}}
	}
	cases := []struct {
		name   string
		states map[string]*api.TaskState
		ok     bool
	}{
		{name: "no task state yet", states: nil},
		{name: "another task only", states: map[string]*api.TaskState{"other": {Events: []*api.TaskEvent{ev(csiVolumeEvent, csiStepMounted, at.UnixNano())}}}},
		{name: "still waiting for the plugin", states: map[string]*api.TaskState{workTask: {Events: []*api.TaskEvent{
			ev(api.TaskReceived, "", 1), ev(csiVolumeEvent, "waiting-for-plugin", 2), nil,
		}}}},
		{name: "mounted", ok: true, states: map[string]*api.TaskState{workTask: {Events: []*api.TaskEvent{
			ev(api.TaskReceived, "", 1), ev(csiVolumeEvent, "claim-blocked", 2), ev(csiVolumeEvent, csiStepMounted, at.UnixNano()),
			ev(api.TaskStarted, "", at.UnixNano()+5),
		}}}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, ok := mountedAt(c.states, workTask)
			must.Eq(t, c.ok, ok)
			if c.ok {
				must.True(t, got.Equal(at))
			}
		})
	}
}

func TestDescribeAlloc(t *testing.T) {
	a := &api.AllocationListStub{
		ID: "a1", Name: "bench-claim.work[0]", ClientStatus: api.AllocClientStatusFailed, ClientDescription: "failed tasks",
		TaskStates: map[string]*api.TaskState{workTask: {Events: []*api.TaskEvent{
			{Type: api.TaskReceived, DisplayMessage: "Task received by client"},
			{Type: api.TaskSetupFailure, Message: "volume \"data\": no such volume"},
		}}},
	}
	must.Eq(t, "alloc a1 (bench-claim.work[0]) is failed: failed tasks; last events of task \"work\":\n"+
		"    Received: Task received by client\n"+
		"    Setup Failure: volume \"data\": no such volume", describeAlloc(a, workTask))
}

func TestWorkJob_PerAllocVolumeAndSmallResources(t *testing.T) {
	jobID, volume := manyNames(100)
	j := workJob(jobID, volume, 100, true)
	j.Canonicalize()
	tg := j.TaskGroups[0]
	must.Eq(t, 100, *tg.Count)
	must.True(t, tg.Volumes["data"].PerAlloc)
	must.Eq(t, "data", tg.Volumes["data"].Name)
	task := tg.Tasks[0]
	must.Eq(t, "exec", task.Driver, must.Sprint("raw_exec cannot mount volumes"))
	must.Eq(t, "data", *task.VolumeMounts[0].Volume)
	// 100 of them must fit a 2-core node next to the plugin.
	must.LessEq(t, 2000, 100**task.Resources.CPU)
}
