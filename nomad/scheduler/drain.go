package scheduler

import (
	"time"

	"github.com/berth-io/berth/nomad/structs"
)

// Node drains, as schedulers and the server's drainer both apply them. A
// draining node takes no new allocs; its allocs leave it in this order:
//
//	service  at once: stopped and placed elsewhere (migrated)
//	batch    left to finish; migrated once the drain's deadline passes
//	system   last: stopped once no non-system alloc is left on the node,
//	         or at the deadline; never when the drain ignores system jobs
//
// The drain is complete when no live alloc it must move is left.

// DrainDeadline returns when drain d forces every remaining alloc off its
// node (unix ns), and whether it has a deadline at all. A negative
// Deadline forces at once; otherwise ForceDeadline, or StartedAt plus a
// positive Deadline, is the deadline.
func DrainDeadline(d *structs.DrainStrategy) (int64, bool) {
	switch {
	case d == nil:
		return 0, false
	case d.Deadline < 0:
		return d.StartedAt, true
	case d.ForceDeadline != 0:
		return d.ForceDeadline, true
	case d.Deadline > 0 && d.StartedAt != 0:
		return d.StartedAt + int64(d.Deadline), true
	}
	return 0, false
}

// DrainForced reports whether drain d's deadline has passed at now.
func DrainForced(d *structs.DrainStrategy, now time.Time) bool {
	at, ok := DrainDeadline(d)
	return ok && now.UnixNano() >= at
}

// MigrateOnDrain reports whether a live alloc of a job of type jobType on
// a node drained by d must be stopped now. nonSystemLeft says whether a
// live alloc of a non-system job is still on the node.
func MigrateOnDrain(d *structs.DrainStrategy, jobType string, nonSystemLeft bool, now time.Time) bool {
	if d == nil {
		return false
	}
	switch jobType {
	case structs.JobTypeService:
		return true
	case structs.JobTypeBatch:
		return DrainForced(d, now)
	case structs.JobTypeSystem:
		return !d.IgnoreSystemJobs && (!nonSystemLeft || DrainForced(d, now))
	}
	return true
}

// DrainComplete reports whether drain d of a node holding allocs is done:
// no live alloc of a non-system job is left, nor of a system job unless
// the drain ignores them.
func DrainComplete(d *structs.DrainStrategy, allocs []*structs.Allocation) bool {
	for _, a := range allocs {
		if a.TerminalStatus() {
			continue
		}
		if AllocJobType(a) != structs.JobTypeSystem || !d.IgnoreSystemJobs {
			return false
		}
	}
	return true
}

// NonSystemLeft reports whether a live alloc of a non-system job is among
// allocs.
func NonSystemLeft(allocs []*structs.Allocation) bool {
	for _, a := range allocs {
		if !a.TerminalStatus() && AllocJobType(a) != structs.JobTypeSystem {
			return true
		}
	}
	return false
}

// AllocJobType is the type of the job an alloc runs (service if unknown).
func AllocJobType(a *structs.Allocation) string {
	if a.Job == nil {
		return structs.JobTypeService
	}
	return a.Job.Type
}
