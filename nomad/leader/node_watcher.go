package leader

import (
	"context"
	"maps"
	"reflect"
	"slices"
	"time"

	"github.com/berth-io/berth/nomad/state"
	"github.com/berth-io/berth/nomad/structs"
)

// watchNodes reacts to the nodes table on the leader (diffNodes):
//
//	node not down                            ──► has a heartbeat deadline (grace on first sight)
//	node down or deregistered                ──► no heartbeat deadline
//	node became schedulable, or a schedulable
//	node's fingerprint changed               ──► one eval per system job; blocked evals retried
//	node deregistered                        ──► one eval per job with live allocs on it
//
// So a node that registers (and starts heartbeating) gets its system
// allocs, whichever endpoint made it ready, with no hook in the endpoints.
// Changes are diffed from the nodes Run read before the loops started
// (Term.readStart): what the previous leader saw is not acted on again,
// and a node that registers while the term starts is not missed. The
// first pass starts the heartbeat deadlines: every non-down node gets TTL
// plus grace to heartbeat the new leader.
func (s *server) watchNodes(ctx context.Context, sc *Term) {
	logger := s.logger.Named("node_watcher")
	prev := sc.startNodes
	var index uint64
	for attempt := 0; ; {
		idx, err := s.waitForTables(ctx, index, state.TableNodes)
		if ctx.Err() != nil {
			return
		}
		var cur map[string]*structs.Node
		var snap *state.StateSnapshot
		if err == nil {
			snap, err = s.config.State().Snapshot()
		}
		if err == nil {
			cur, err = readNodes(snap)
		}
		if err == nil && prev != nil {
			err = s.reactToNodes(snap, sc, diffNodes(prev, cur), idx)
		}
		if err != nil {
			logger.Warn("reacting to node changes failed; retrying", "error", err)
			if !retryWait(ctx, attempt) {
				return
			}
			attempt++
			continue
		}
		for id, n := range cur {
			if n.Status == structs.NodeStatusDown {
				sc.heartbeats.untrack(id)
			} else {
				sc.heartbeats.track(id)
			}
		}
		for id := range prev {
			if cur[id] == nil {
				sc.heartbeats.untrack(id)
			}
		}
		attempt, index, prev = 0, max(idx, 1), cur
	}
}

func readNodes(snap *state.StateSnapshot) (map[string]*structs.Node, error) {
	iter, err := snap.Nodes(nil)
	if err != nil {
		return nil, err
	}
	nodes := map[string]*structs.Node{}
	for raw := iter.Next(); raw != nil; raw = iter.Next() {
		n := raw.(*structs.Node)
		nodes[n.ID] = n
	}
	return nodes, nil
}

func (s *server) reactToNodes(snap *state.StateSnapshot, sc *Term, ch nodeChanges, index uint64) error {
	if ch.capacityGrew {
		sc.blocked.CapacityChanged(index)
	}
	now := time.Now().UnixNano()
	var evals []*structs.Evaluation
	if len(ch.schedulable) > 0 {
		iter, err := snap.Jobs(nil, structs.AllNamespaces)
		if err != nil {
			return err
		}
		nodeID := ""
		if len(ch.schedulable) == 1 {
			nodeID = ch.schedulable[0]
		}
		for raw := iter.Next(); raw != nil; raw = iter.Next() {
			job := raw.(*structs.Job)
			if job.Type == structs.JobTypeSystem && !job.Stop {
				evals = append(evals, newJobEval(job, nodeID, structs.EvalTriggerNodeUpdate, now))
			}
		}
	}
	if len(ch.removed) > 0 {
		lost, err := LiveAllocJobEvals(snap, ch.removed, structs.EvalTriggerNodeUpdate, now)
		if err != nil {
			return err
		}
		evals = append(evals, lost...)
	}
	if len(evals) == 0 {
		return nil
	}
	_, err := s.raftApply(structs.EvalUpdateRequestType, &structs.EvalUpdateRequest{Evals: evals, Timestamp: now})
	return err
}

// nodeChanges is what changed in the nodes table that the leader acts on.
type nodeChanges struct {
	// schedulable nodes may now take allocs they could not before.
	schedulable []string
	// removed nodes were deregistered.
	removed []string
	// capacityGrew is set when blocked evals may now place.
	capacityGrew bool
}

// diffNodes compares two reads of the nodes table. Stored nodes are
// immutable, so an unchanged pointer means an unchanged node.
func diffNodes(prev, cur map[string]*structs.Node) nodeChanges {
	var ch nodeChanges
	for _, id := range slices.Sorted(maps.Keys(cur)) {
		n, p := cur[id], prev[id]
		if n == p || !n.Ready() {
			continue
		}
		if p == nil || !p.Ready() || fingerprintChanged(p, n) {
			ch.schedulable = append(ch.schedulable, id)
			ch.capacityGrew = true
		}
	}
	for _, id := range slices.Sorted(maps.Keys(prev)) {
		if cur[id] == nil {
			ch.removed = append(ch.removed, id)
		}
	}
	return ch
}

// fingerprintChanged reports whether a node changed in what scheduling
// looks at: datacenter, class, attributes, meta, resources, drivers'
// health, and CSI node plugins' health and limits.
func fingerprintChanged(a, b *structs.Node) bool {
	if a.Datacenter != b.Datacenter || a.NodeClass != b.NodeClass ||
		!maps.Equal(a.Attributes, b.Attributes) || !maps.Equal(a.Meta, b.Meta) ||
		!reflect.DeepEqual(a.NodeResources, b.NodeResources) {
		return true
	}
	if len(a.Drivers) != len(b.Drivers) {
		return true
	}
	for name, d := range a.Drivers {
		o := b.Drivers[name]
		if o == nil || o.Detected != d.Detected || o.Healthy != d.Healthy || o.MountConfig != d.MountConfig {
			return true
		}
	}
	if len(a.CSINodePlugins) != len(b.CSINodePlugins) {
		return true
	}
	for id, p := range a.CSINodePlugins {
		o := b.CSINodePlugins[id]
		if o == nil || o.Healthy != p.Healthy || !reflect.DeepEqual(o.NodeInfo, p.NodeInfo) {
			return true
		}
	}
	return false
}
