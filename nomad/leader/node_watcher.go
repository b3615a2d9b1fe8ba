package leader

import (
	"context"
	"maps"
	"reflect"
	"slices"
	"strings"
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
// first pass reads every node and starts the heartbeat deadlines: every
// non-down node gets TTL plus grace to heartbeat the new leader. Later
// passes read only the nodes written since the last one (nodePass), so a
// node write costs the leader the same at 10 nodes and at 5,000.
func (s *server) watchNodes(ctx context.Context, sc *Term) {
	logger := s.logger.Named("node_watcher")
	var view *nodeView
	var index uint64
	for attempt := 0; ; {
		idx, err := s.waitForTables(ctx, index, state.TableNodes)
		if ctx.Err() != nil {
			return
		}
		var next *nodeView
		if err == nil {
			next, err = s.nodePass(sc, view)
		}
		if err != nil {
			logger.Warn("reacting to node changes failed; retrying", "error", err)
			if !retryWait(ctx, attempt) {
				return
			}
			attempt++
			continue
		}
		attempt, index, view = 0, max(idx, 1), next
	}
}

// nodeView is what the node watcher knows between passes: every node as
// of the nodes table's index, and the index of the last node deletion
// then.
type nodeView struct {
	nodes   map[string]*structs.Node
	index   uint64
	deleted uint64
}

// nodePass reads what changed since view (nil: nothing read yet this
// term), reacts to it, updates the heartbeat deadlines, and returns the
// new view. The first pass, and any pass after a node was deleted (a
// deletion leaves no row to find by index), reads every node and diffs
// the whole table against the last one (the term's start read, on the
// first pass); the others read only the nodes written since view's index
// and reuse view's map. view is changed only when the pass succeeds: a
// failed pass is retried from the same view, so no change is lost.
func (s *server) nodePass(sc *Term, view *nodeView) (*nodeView, error) {
	snap, err := s.config.State().Snapshot()
	if err != nil {
		return nil, err
	}
	next := &nodeView{}
	if next.index, err = snap.Index(state.TableNodes); err != nil {
		return nil, err
	}
	if next.deleted, err = snap.NodesDeletedIndex(); err != nil {
		return nil, err
	}
	if view == nil || next.deleted > view.deleted || next.index < view.index {
		// next.index < view.index: a restored snapshot went back.
		if next.nodes, err = s.readNodes(snap); err != nil {
			return nil, err
		}
		prev := sc.startNodes
		if view != nil {
			prev = view.nodes
		}
		if prev != nil {
			if err := s.reactToNodes(snap, sc, diffNodes(prev, next.nodes), next.index); err != nil {
				return nil, err
			}
		}
		for id, n := range next.nodes {
			trackHeartbeat(sc, id, n)
		}
		for id := range prev {
			if next.nodes[id] == nil {
				sc.heartbeats.untrack(id)
			}
		}
		return next, nil
	}
	iter, err := snap.NodesModifiedSince(nil, view.index)
	if err != nil {
		return nil, err
	}
	var changed []*structs.Node
	for raw := iter.Next(); raw != nil; raw = iter.Next() {
		changed = append(changed, raw.(*structs.Node))
	}
	s.nodesRead.Add(uint64(len(changed)))
	slices.SortFunc(changed, func(a, b *structs.Node) int { return strings.Compare(a.ID, b.ID) })
	var ch nodeChanges
	for _, n := range changed {
		diffNode(&ch, view.nodes[n.ID], n)
	}
	if err := s.reactToNodes(snap, sc, ch, next.index); err != nil {
		return nil, err
	}
	next.nodes = view.nodes
	for _, n := range changed {
		next.nodes[n.ID] = n
		trackHeartbeat(sc, n.ID, n)
	}
	return next, nil
}

// trackHeartbeat gives a node that is not down a heartbeat deadline
// (when it has none) and drops a down node's.
func trackHeartbeat(sc *Term, id string, n *structs.Node) {
	if n.Status == structs.NodeStatusDown {
		sc.heartbeats.untrack(id)
	} else {
		sc.heartbeats.track(id)
	}
}

// readNodes reads every node of snap, by ID.
func (s *server) readNodes(snap *state.StateSnapshot) (map[string]*structs.Node, error) {
	nodes, err := readNodes(snap)
	s.nodesRead.Add(uint64(len(nodes)))
	return nodes, err
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
		diffNode(&ch, prev[id], cur[id])
	}
	for _, id := range slices.Sorted(maps.Keys(prev)) {
		if cur[id] == nil {
			ch.removed = append(ch.removed, id)
		}
	}
	return ch
}

// diffNode adds to ch what changed from node p (nil: not known before) to
// n, a node as stored now.
func diffNode(ch *nodeChanges, p, n *structs.Node) {
	if n == p || !n.Ready() {
		return
	}
	if p == nil || !p.Ready() || fingerprintChanged(p, n) {
		ch.schedulable = append(ch.schedulable, n.ID)
		ch.capacityGrew = true
	}
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
