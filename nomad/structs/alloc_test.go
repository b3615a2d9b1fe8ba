package structs

import (
	"testing"

	"github.com/shoenig/test/must"
)

// Copy shares what never changes once stored (the job, the metric) and
// copies what the servers and clients write (resources, task states, the
// reschedule history).
func TestAllocation_CopySharesOnlyWhatIsImmutable(t *testing.T) {
	a := &Allocation{
		ID: "a1", Job: &Job{ID: "j"},
		Resources:         &Resources{CPU: 100, MemoryMB: 64},
		Metrics:           &AllocMetric{NodesEvaluated: 3, ScoreMetaData: []*NodeScoreMeta{{NodeID: "n1", Scores: map[string]float64{"load": 0.5}}}},
		TaskStates:        map[string]*TaskState{"t": {State: "running"}},
		RescheduleTracker: &RescheduleTracker{Events: []*RescheduleEvent{{PrevAllocID: "a0"}}},
	}
	c := a.Copy()
	must.True(t, c.Job == a.Job)
	must.True(t, c.Metrics == a.Metrics)

	c.Resources.CPU = 1
	c.TaskStates["t"].State = "dead"
	c.TaskStates["u"] = &TaskState{}
	c.RescheduleTracker.Events[0] = nil
	must.Eq(t, 100, a.Resources.CPU)
	must.Eq(t, "running", a.TaskStates["t"].State)
	must.MapLen(t, 1, a.TaskStates)
	must.NotNil(t, a.RescheduleTracker.Events[0])

	s := a.Stub()
	s.TaskStates["t"].State = "dead"
	must.Eq(t, "running", a.TaskStates["t"].State, must.Sprint("a stub's task states are its own"))
}
