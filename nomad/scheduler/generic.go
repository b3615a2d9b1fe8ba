package scheduler

import (
	"fmt"
	"slices"

	"github.com/berth-io/berth/nomad/structs"
)

// computeGeneric plans one pass for a service or batch job: reconcile,
// then stops, in-place updates, follow-up evals, and placements, in that
// order, so placements see the room the stops free.
func (s *Scheduler) computeGeneric(st State, eval *structs.Evaluation) (*outcome, error) {
	job, allocs, nodes, err := readJobState(st, eval)
	if err != nil {
		return nil, err
	}
	now := s.now()
	p := newPlacer(st, eval, job, nodes, s.newID)
	p.now = s.now
	p.scanAll = s.scanAll
	r, err := reconcile(reconcileInput{
		job: job, allocs: allocs, nodes: nodes, now: now, evalID: eval.ID, inPlace: p.fitsInPlace,
		followUpDue: eval.WaitUntil != 0 && now.UnixNano() >= eval.WaitUntil,
	})
	if err != nil {
		return nil, err
	}
	for _, d := range r.stops {
		p.stop(d.alloc, d.desc, d.clientStatus)
	}
	for _, d := range r.updates {
		p.update(d.old, d.updated)
	}
	s.addFollowUps(p, eval, job, r.followUps)

	out := &outcome{plan: p.plan, failed: map[string]*structs.AllocMetric{}, queued: map[string]int{}}
	if job != nil && !job.Stop {
		for _, tg := range job.TaskGroups {
			out.queued[tg.Name] = 0
		}
	}
	for _, req := range r.places {
		if m := out.failed[req.tg.Name]; m != nil && !perAllocVolumes(req.tg) {
			// Placements of a group that already failed fail the same way:
			// the plan only fills up. Volumes per alloc can differ, though.
			m.CoalescedFailures++
			out.queued[req.tg.Name]++
			continue
		}
		alloc, metric, err := p.place(req, nil)
		if err != nil {
			return nil, err
		}
		if alloc != nil {
			continue
		}
		out.queued[req.tg.Name]++
		if m := out.failed[req.tg.Name]; m != nil {
			mergeMetric(m, metric)
		} else {
			out.failed[req.tg.Name] = metric
		}
	}
	for _, m := range out.failed {
		trimMetric(m)
	}
	if len(out.failed) == 0 {
		out.failed = nil
	}
	return out, nil
}

// addFollowUps creates one pending eval per distinct time at which failed
// allocs may be rescheduled (WaitUntil), and records it on those allocs
// (FollowupEvalID), so later evals do not create it again.
func (s *Scheduler) addFollowUps(p *placer, eval *structs.Evaluation, job *structs.Job, fus []followUp) {
	if len(fus) == 0 || job == nil {
		return
	}
	slices.SortStableFunc(fus, func(a, b followUp) int { return a.at.Compare(b.at) })
	byTime := map[int64]*structs.Evaluation{}
	now := s.now().UnixNano()
	for _, fu := range fus {
		at := fu.at.UnixNano()
		e := byTime[at]
		if e == nil {
			e = &structs.Evaluation{
				ID:                s.newID(),
				Namespace:         job.Namespace,
				Priority:          job.Priority,
				Type:              job.Type,
				TriggeredBy:       structs.EvalTriggerRetryFailedAlloc,
				JobID:             job.ID,
				JobModifyIndex:    job.JobModifyIndex,
				Status:            structs.EvalStatusPending,
				StatusDescription: "created for delayed rescheduling of failed allocs",
				WaitUntil:         at,
				PreviousEval:      eval.ID,
				CreateTime:        now,
				ModifyTime:        now,
			}
			byTime[at] = e
			p.plan.Evals = append(p.plan.Evals, e)
		}
		updated := fu.alloc.Copy()
		updated.FollowupEvalID = e.ID
		p.update(fu.alloc, updated)
	}
}

// perAllocVolumes reports whether tg's allocs each get their own volume.
func perAllocVolumes(tg *structs.TaskGroup) bool {
	for _, v := range tg.Volumes {
		if v.PerAlloc {
			return true
		}
	}
	return false
}

// readJobState reads the eval's job (nil when purged), all its allocs,
// and every node by ID.
func readJobState(st State, eval *structs.Evaluation) (*structs.Job, []*structs.Allocation, map[string]*structs.Node, error) {
	job, err := st.JobByID(nil, eval.Namespace, eval.JobID)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("reading job %q: %w", eval.JobID, err)
	}
	allocs, err := st.AllocsByJob(nil, eval.Namespace, eval.JobID)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("reading allocs of job %q: %w", eval.JobID, err)
	}
	iter, err := st.Nodes(nil)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("reading nodes: %w", err)
	}
	nodes := map[string]*structs.Node{}
	for raw := iter.Next(); raw != nil; raw = iter.Next() {
		n := raw.(*structs.Node)
		nodes[n.ID] = n
	}
	// The allocs slice is ours (the store builds a new one per read), but
	// reconcile sorts it: keep that from surprising a caller.
	return job, slices.Clone(allocs), nodes, nil
}
