package scheduler

import (
	"cmp"
	"maps"
	"slices"
	"time"

	"github.com/berth-io/berth/nomad/structs"
)

// Why the scheduler stops an alloc (Allocation.DesiredDescription).
const (
	descJobStopped   = "alloc not needed since its job was stopped"
	descNotNeeded    = "alloc not needed due to job update"
	descUpdating     = "alloc is being updated due to job update"
	descLost         = "alloc is lost since its node is down"
	descMigrating    = "alloc is being migrated off its draining node"
	descRescheduled  = "alloc was rescheduled because it failed"
	descDuplicate    = "alloc not needed: another alloc has its name"
	descNotFeasible  = "alloc not needed: its node no longer fits the job"
	descDrainStopped = "alloc stopped: its node is draining"
)

// reconcileInput is everything reconcile looks at.
type reconcileInput struct {
	job    *structs.Job // nil when purged
	allocs []*structs.Allocation
	nodes  map[string]*structs.Node // every node, by ID
	now    time.Time
	evalID string
	// followUpDue is set when the eval is a follow-up whose WaitUntil has
	// come: failed allocs waiting for it are rescheduled now.
	followUpDue bool
	// inPlace reports whether live alloc a can take the job's new version
	// of tg where it is; otherwise the update is destructive.
	inPlace func(a *structs.Allocation, tg *structs.TaskGroup) (bool, error)
}

type stopDecision struct {
	alloc        *structs.Allocation
	desc         string
	clientStatus string // lost, or empty
}

type updateDecision struct {
	old, updated *structs.Allocation
}

type followUp struct {
	alloc *structs.Allocation
	at    time.Time
}

// reconcileResult is what must change for a service or batch job to match
// its spec.
type reconcileResult struct {
	stops     []stopDecision
	updates   []updateDecision
	places    []placeRequest
	followUps []followUp // failed allocs to reschedule later
	// userStopped are allocs an operator stopped that have no
	// replacement yet (replaceable); reconcileGroup links the next
	// placement of each one's name to it.
	userStopped []*structs.Allocation
}

// reconcile compares a service or batch job with its allocs. Each group
// keeps Count allocs named "job.group[i]", i in [0, Count). Allocs the
// servers already stopped are ignored; every other alloc either holds its
// name or is stopped:
//
//	live (pending/running):
//	  name out of range, or taken ──► stop
//	  node down or gone          ──► stop as lost, place a replacement
//	  node draining (service; batch after the deadline)
//	                             ──► stop, place elsewhere (migrate)
//	  older job version          ──► update in place, or stop + place
//	failed:
//	  reschedule policy allows it now ──► stop, place (tracker + 1)
//	  later                            ──► hold the name; follow-up eval
//	  never (attempts used up)         ──► hold the name
//	complete: batch holds its name (done); service frees it
//
// Names no alloc holds are placed; the placement of a name whose alloc an
// operator stopped (alloc stop) replaces that alloc (PreviousAllocation).
// A stopped or purged job stops every live alloc.
func reconcile(in reconcileInput) (*reconcileResult, error) {
	r := &reconcileResult{}
	groups := map[string][]*structs.Allocation{}
	for _, a := range in.allocs {
		if desiredTerminal(a) {
			if replaceable(a) {
				r.userStopped = append(r.userStopped, a)
			}
			continue
		}
		groups[a.TaskGroup] = append(groups[a.TaskGroup], a)
	}
	stopped := in.job == nil || in.job.Stop
	names := map[string]bool{}
	for name := range groups {
		names[name] = true
	}
	if !stopped {
		for _, tg := range in.job.TaskGroups {
			names[tg.Name] = true
		}
	}
	for _, name := range slices.Sorted(maps.Keys(names)) {
		allocs := groups[name]
		sortAllocs(allocs)
		var tg *structs.TaskGroup
		if !stopped {
			tg = in.job.LookupTaskGroup(name)
		}
		if tg == nil {
			desc := descNotNeeded
			if stopped {
				desc = descJobStopped
			}
			for _, a := range allocs {
				if !a.ClientTerminalStatus() {
					r.stops = append(r.stops, stopDecision{a, desc, lostStatus(in.nodes, a)})
				}
			}
			continue
		}
		if err := reconcileGroup(in, tg, allocs, r); err != nil {
			return nil, err
		}
	}
	return r, nil
}

func reconcileGroup(in reconcileInput, tg *structs.TaskGroup, allocs []*structs.Allocation, r *reconcileResult) error {
	held := map[int]bool{}
	place := func(idx int, prev *structs.Allocation, tracker *structs.RescheduleTracker, avoid string) {
		r.places = append(r.places, placeRequest{
			tg: tg, name: allocName(in.job.ID, tg.Name, idx), index: idx,
			prev: prev, tracker: tracker, avoid: avoid,
		})
	}
	inRange := func(idx int) bool { return idx >= 0 && idx < tg.Count }

	var failed, complete []*structs.Allocation
	for _, a := range allocs {
		switch a.ClientStatus {
		case structs.AllocClientStatusFailed:
			failed = append(failed, a)
			continue
		case structs.AllocClientStatusComplete:
			complete = append(complete, a)
			continue
		case structs.AllocClientStatusLost:
			continue // the servers stop lost allocs when they mark them
		}
		idx := a.Index()
		node := in.nodes[a.NodeID]
		if !inRange(idx) || held[idx] {
			r.stops = append(r.stops, stopDecision{a, descNotNeeded, lostStatus(in.nodes, a)})
			continue
		}
		held[idx] = true
		switch {
		case nodeLost(node):
			r.stops = append(r.stops, stopDecision{a, descLost, structs.AllocClientStatusLost})
			place(idx, a, copyTracker(a), "")
			continue
		case node.DrainStrategy != nil && MigrateOnDrain(node.DrainStrategy, in.job.Type, true, in.now):
			r.stops = append(r.stops, stopDecision{a, descMigrating, ""})
			place(idx, a, copyTracker(a), "")
			continue
		}
		if !jobChanged(a, in.job) {
			continue
		}
		destructive := destructiveUpdate(a.Job, in.job, tg.Name)
		if !destructive {
			ok, err := in.inPlace(a, tg)
			if err != nil {
				return err
			}
			destructive = !ok
		}
		if destructive {
			r.stops = append(r.stops, stopDecision{a, descUpdating, ""})
			place(idx, a, copyTracker(a), "")
			continue
		}
		updated := a.Copy()
		updated.Job = in.job
		updated.Resources = groupResources(tg)
		updated.EvalID = in.evalID
		r.updates = append(r.updates, updateDecision{a, updated})
	}

	policy := reschedulePolicy(in.job.Type, tg)
	for _, a := range failed {
		idx := a.Index()
		if !inRange(idx) || held[idx] {
			r.stops = append(r.stops, stopDecision{a, descNotNeeded, ""})
			continue
		}
		held[idx] = true
		when, at, delay := rescheduleDecision(a, policy, in.now)
		if when == rescheduleLater && in.followUpDue && a.FollowupEvalID == in.evalID {
			when = rescheduleNow
		}
		switch when {
		case rescheduleNow:
			r.stops = append(r.stops, stopDecision{a, descRescheduled, ""})
			place(idx, a, nextTracker(a, policy, in.now, delay), a.NodeID)
		case rescheduleLater:
			if a.FollowupEvalID == "" || a.FollowupEvalID == in.evalID {
				r.followUps = append(r.followUps, followUp{a, at})
			}
		}
	}
	if in.job.Type == structs.JobTypeBatch {
		for _, a := range complete {
			if idx := a.Index(); inRange(idx) {
				held[idx] = true
			}
		}
	}
	stoppedBy := map[int]*structs.Allocation{} // name index → the alloc an operator stopped there, latest
	for _, a := range r.userStopped {
		if a.TaskGroup != tg.Name {
			continue
		}
		if old := stoppedBy[a.Index()]; old == nil || a.ModifyIndex > old.ModifyIndex {
			stoppedBy[a.Index()] = a
		}
	}
	for idx := range tg.Count {
		if !held[idx] {
			// The replacement of an alloc an operator stopped names it
			// (PreviousAllocation), as drain and reschedule replacements do.
			place(idx, stoppedBy[idx], nil, "")
		}
	}
	return nil
}

// replaceable reports whether a was stopped by an operator (alloc stop)
// and has no replacement yet: the alloc its name's next placement replaces.
func replaceable(a *structs.Allocation) bool {
	return a.DesiredDescription == structs.AllocDescStoppedByUser && a.NextAllocation == ""
}

// desiredTerminal reports whether the servers already stopped a.
func desiredTerminal(a *structs.Allocation) bool {
	return a.DesiredStatus == structs.AllocDesiredStatusStop || a.DesiredStatus == structs.AllocDesiredStatusEvict
}

// nodeLost reports whether allocs on node are lost: it is down or gone.
func nodeLost(node *structs.Node) bool {
	return node == nil || node.Status == structs.NodeStatusDown
}

// lostStatus is the client status to stop a with: lost when its node is.
func lostStatus(nodes map[string]*structs.Node, a *structs.Allocation) string {
	if nodeLost(nodes[a.NodeID]) && !a.ClientTerminalStatus() {
		return structs.AllocClientStatusLost
	}
	return ""
}

// sortAllocs orders allocs oldest first, so the oldest keeps a name two
// allocs share.
func sortAllocs(allocs []*structs.Allocation) {
	slices.SortFunc(allocs, func(a, b *structs.Allocation) int {
		if c := cmp.Compare(a.CreateIndex, b.CreateIndex); c != 0 {
			return c
		}
		return cmp.Compare(a.ID, b.ID)
	})
}
