package scheduler

import (
	"maps"
	"reflect"

	"github.com/berth-io/berth/nomad/structs"
)

// jobChanged reports whether alloc a runs another version of job.
func jobChanged(a *structs.Allocation, job *structs.Job) bool {
	if a.Job == job {
		return false
	}
	return a.Job == nil || a.Job.Version != job.Version || a.Job.JobModifyIndex != job.JobModifyIndex
}

// destructiveUpdate reports whether moving an alloc of group from job
// version old to version updated needs a new alloc (stop, then place)
// rather than an in-place update: anything its tasks see has changed —
// the tasks themselves, the group's volumes, or group or job meta (which
// tasks see in their environment). Count, restart and reschedule
// policies, priority and constraints update in place (constraints are
// re-checked on the alloc's node; see placer.fitsInPlace).
func destructiveUpdate(old, updated *structs.Job, group string) bool {
	oldTG, newTG := old.LookupTaskGroup(group), updated.LookupTaskGroup(group)
	if oldTG == nil || newTG == nil {
		return true
	}
	return !reflect.DeepEqual(oldTG.Tasks, newTG.Tasks) ||
		!reflect.DeepEqual(oldTG.Volumes, newTG.Volumes) ||
		!maps.Equal(oldTG.Meta, newTG.Meta) ||
		!maps.Equal(old.Meta, updated.Meta)
}
