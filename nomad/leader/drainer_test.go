package leader

import (
	"testing"
	"time"

	"github.com/shoenig/test/must"

	"github.com/berth-io/berth/nomad/structs"
)

func TestDrainStepFor(t *testing.T) {
	now := time.Unix(1000, 0)
	alloc := func(id, typ string) *structs.Allocation {
		return &structs.Allocation{ID: id, JobID: id, Job: &structs.Job{ID: id, Type: typ},
			DesiredStatus: structs.AllocDesiredStatusRun, ClientStatus: structs.AllocClientStatusRunning}
	}
	svc, batch, sys := alloc("svc", structs.JobTypeService), alloc("batch", structs.JobTypeBatch), alloc("sys", structs.JobTypeSystem)
	stopped := svc.Copy()
	stopped.DesiredStatus = structs.AllocDesiredStatusStop
	hour := &structs.DrainStrategy{Deadline: time.Hour, StartedAt: now.UnixNano(), ForceDeadline: now.Add(time.Hour).UnixNano()}

	step := drainStepFor(hour, []*structs.Allocation{svc, batch, sys}, now)
	must.False(t, step.complete)
	must.Eq(t, []string{"svc"}, allocIDs(step.move))
	must.Eq(t, now.Add(time.Hour), step.next)

	step = drainStepFor(hour, []*structs.Allocation{stopped, batch, sys}, now.Add(2*time.Hour))
	must.Eq(t, []string{"batch", "sys"}, allocIDs(step.move))

	step = drainStepFor(hour, []*structs.Allocation{stopped, sys}, now)
	must.Eq(t, []string{"sys"}, allocIDs(step.move)) // system last

	ignore := *hour
	ignore.IgnoreSystemJobs = true
	must.True(t, drainStepFor(&ignore, []*structs.Allocation{stopped, sys}, now).complete)
	must.True(t, drainStepFor(hour, []*structs.Allocation{stopped}, now).complete)
	must.True(t, drainStepFor(hour, nil, now).complete)
}

func allocIDs(allocs []*structs.Allocation) []string {
	out := []string{}
	for _, a := range allocs {
		out = append(out, a.ID)
	}
	return out
}
