package scheduler

import (
	"github.com/berth-io/berth/nomad/structs"
)

// computeSystem plans one pass for a system job: one alloc per group on
// every ready, eligible node in the job's datacenters where the group's
// drivers and constraints hold. Allocs are named "job.group[0]".
//
//	alloc on a node that is down or gone  ──► stop as lost (no replacement)
//	second alloc of a group on a node     ──► stop
//	node draining                         ──► stop per MigrateOnDrain, else keep
//	node no longer fits the job           ──► stop
//	older job version                     ──► update in place, or stop + place
//	failed or complete alloc              ──► keep (system allocs are not rescheduled)
//
// Nodes that fail the group's drivers or constraints are skipped, not
// failures; a node that passes them but has no room, or whose CSI claim
// is taken, is a failed placement, retried by a blocked eval.
func (s *Scheduler) computeSystem(st State, eval *structs.Evaluation) (*outcome, error) {
	job, allocs, nodes, err := readJobState(st, eval)
	if err != nil {
		return nil, err
	}
	now := s.now()
	p := newPlacer(st, eval, job, nodes, s.newID)
	p.now = s.now
	out := &outcome{plan: p.plan, failed: map[string]*structs.AllocMetric{}, queued: map[string]int{}}
	stopped := job == nil || job.Stop

	type slot struct{ node, group string }
	held := map[slot]bool{}
	nonSystem := map[string]bool{} // node → a non-system alloc is still live there
	nonSystemLeft := func(nodeID string) (bool, error) {
		if left, ok := nonSystem[nodeID]; ok {
			return left, nil
		}
		onNode, err := st.AllocsByNode(nil, nodeID)
		if err != nil {
			return false, err
		}
		nonSystem[nodeID] = NonSystemLeft(onNode)
		return nonSystem[nodeID], nil
	}

	sortAllocs(allocs)
	for _, a := range allocs {
		if desiredTerminal(a) {
			continue
		}
		var tg *structs.TaskGroup
		if !stopped {
			tg = job.LookupTaskGroup(a.TaskGroup)
		}
		if tg == nil {
			if !a.ClientTerminalStatus() {
				desc := descNotNeeded
				if stopped {
					desc = descJobStopped
				}
				p.stop(a, desc, lostStatus(nodes, a))
			}
			continue
		}
		key := slot{a.NodeID, tg.Name}
		node := nodes[a.NodeID]
		if a.ClientTerminalStatus() {
			held[key] = true
			continue
		}
		switch {
		case nodeLost(node):
			p.stop(a, descLost, structs.AllocClientStatusLost)
			continue
		case held[key]:
			p.stop(a, descDuplicate, "")
			continue
		case node.DrainStrategy != nil:
			left, err := nonSystemLeft(node.ID)
			if err != nil {
				return nil, err
			}
			if MigrateOnDrain(node.DrainStrategy, structs.JobTypeSystem, left, now) {
				p.stop(a, descDrainStopped, "")
			} else {
				held[key] = true
			}
			continue
		case !dcMatches(job.Datacenters, node.Datacenter) || staticInfeasible(job, tg, node, p.res) != "":
			p.stop(a, descNotFeasible, "")
			continue
		}
		held[key] = true
		if !jobChanged(a, job) {
			continue
		}
		if _, candidate := p.candIndex[node.ID]; !candidate {
			continue // ineligible or not ready: keep the old version running there
		}
		destructive := destructiveUpdate(a.Job, job, tg.Name)
		if !destructive {
			ok, err := p.fitsInPlace(a, tg)
			if err != nil {
				return nil, err
			}
			destructive = !ok
		}
		if destructive {
			p.stop(a, descUpdating, "")
			held[key] = false
			continue
		}
		updated := a.Copy()
		updated.Job = job
		updated.Resources = groupResources(tg)
		updated.EvalID = eval.ID
		p.update(a, updated)
	}
	if stopped {
		out.failed = nil
		return out, nil
	}

	for _, tg := range job.TaskGroups {
		out.queued[tg.Name] = 0
	}
	for i, node := range p.candidates {
		for _, tg := range job.TaskGroups {
			if held[slot{node.ID, tg.Name}] || p.staticReason(tg, i) != "" {
				continue
			}
			alloc, metric, err := p.place(placeRequest{tg: tg, name: allocName(job.ID, tg.Name, 0), index: 0}, []int{i})
			if err != nil {
				return nil, err
			}
			if alloc != nil {
				continue
			}
			out.queued[tg.Name]++
			if m := out.failed[tg.Name]; m != nil {
				sumMetric(m, metric)
			} else {
				out.failed[tg.Name] = metric
			}
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

// sumMetric adds the metric of another node's failed placement to m.
func sumMetric(m, other *structs.AllocMetric) {
	m.NodesEvaluated += other.NodesEvaluated
	m.NodesFiltered += other.NodesFiltered
	m.NodesExhausted += other.NodesExhausted
	for k, v := range other.ConstraintFiltered {
		m.ConstraintFiltered[k] += v
	}
	for k, v := range other.DimensionExhausted {
		m.DimensionExhausted[k] += v
	}
}
