package leader

import (
	"context"
	"time"

	"github.com/berth-io/berth/helper/delayqueue"
	"github.com/berth-io/berth/nomad/structs"
)

// heartbeats keeps one deadline per live node on the leader. A client
// heartbeat (Node.UpdateStatus) moves its node's deadline to now + TTL +
// grace; a node whose deadline passes is marked down through Raft, with
// an eval for every job that has live allocs on it, in the same entry —
// the schedulers then mark those allocs lost and replace them.
//
//	first seen (term start, new node) ──► deadline now+TTL+grace
//	heartbeat                         ──► deadline now+TTL+grace
//	deadline passes                   ──► down (+ evals), deadline dropped
//	node down or deregistered         ──► deadline dropped
//
// Clients are told TTL; grace covers network delay and leader failover.
// Methods are safe for concurrent use; runHeartbeats owns the wait.
type heartbeats struct {
	ttl   time.Duration
	grace time.Duration
	now   func() time.Time
	// queue holds each live node's deadline; runHeartbeats waits on it.
	queue *delayqueue.Queue[string]
}

func newHeartbeats(ttl, grace time.Duration, now func() time.Time) *heartbeats {
	if now == nil {
		now = time.Now
	}
	return &heartbeats{ttl: ttl, grace: grace, now: now, queue: delayqueue.New[string](now)}
}

// reset records a heartbeat of nodeID.
func (h *heartbeats) reset(nodeID string) {
	h.queue.Set(nodeID, h.now().Add(h.ttl+h.grace))
}

// track gives nodeID a deadline unless it has one.
func (h *heartbeats) track(nodeID string) {
	h.queue.SetIfAbsent(nodeID, h.now().Add(h.ttl+h.grace))
}

// untrack drops nodeID's deadline.
func (h *heartbeats) untrack(nodeID string) {
	h.queue.Remove(nodeID)
}

// deadline returns nodeID's deadline, if it has one.
func (h *heartbeats) deadline(nodeID string) (time.Time, bool) {
	return h.queue.Due(nodeID)
}

// runHeartbeats marks nodes down as their deadlines pass, until ctx ends.
func (s *server) runHeartbeats(ctx context.Context, sc *Term) {
	logger := s.logger.Named("heartbeat")
	h := sc.heartbeats
	for {
		expired, err := h.queue.Wait(ctx)
		if err != nil {
			return
		}
		if err := s.expireNodes(expired, h); err != nil {
			// Give them another deadline; a heartbeat in between wins.
			logger.Warn("marking nodes down failed; retrying", "nodes", len(expired), "error", err)
			for _, id := range expired {
				h.track(id)
			}
		}
	}
}

// expireNodes marks down, in one Raft entry, the nodes of ids that are
// still up and did not heartbeat since their deadline was popped, with one
// eval per job that has live allocs on them.
func (s *server) expireNodes(ids []string, h *heartbeats) error {
	snap, err := s.config.State().Snapshot()
	if err != nil {
		return err
	}
	now := time.Now().UnixNano()
	var down []string
	req := &structs.NodeBatchUpdateStatusRequest{Timestamp: now}
	for _, id := range ids {
		if _, beat := h.deadline(id); beat {
			continue // heartbeated after the pop
		}
		node, err := snap.NodeByID(nil, id)
		if err != nil {
			return err
		}
		if node == nil || node.Status == structs.NodeStatusDown {
			continue
		}
		down = append(down, id)
		req.Updates = append(req.Updates, &structs.NodeUpdateStatusRequest{
			NodeID:      id,
			Status:      structs.NodeStatusDown,
			Description: "node missed its heartbeat deadline",
			Timestamp:   now,
		})
	}
	if len(down) == 0 {
		return nil
	}
	if req.Evals, err = LiveAllocJobEvals(snap, down, structs.EvalTriggerNodeUpdate, now); err != nil {
		return err
	}
	_, err = s.raftApply(structs.NodeBatchUpdateStatusRequestType, req)
	if err == nil {
		s.logger.Named("heartbeat").Warn("nodes missed their heartbeat deadline; marked down", "nodes", down, "evals", len(req.Evals))
	}
	return err
}
