package nomad

import (
	"github.com/berth-io/berth/helper/groupcommit"
	"github.com/berth-io/berth/nomad/structs"
)

// Test hooks for the external scheduling tests (package nomad_test).

// RaftApplyForTest commits msg through Raft as the leader's own loops do,
// for state no endpoint writes yet (claim steps, volumes without plugins).
func (s *Server) RaftApplyForTest(t structs.MessageType, msg any) (uint64, error) {
	_, index, err := s.raftApply(t, msg)
	return index, err
}

// HeartbeatDeadlineForTest reports whether the leader holds a heartbeat
// deadline for nodeID.
func (s *Server) HeartbeatDeadlineForTest(nodeID string) bool {
	sc := s.sched.Load()
	if sc == nil {
		return false
	}
	_, ok := sc.term.HeartbeatDeadline(nodeID)
	return ok
}

// CommitAllocUpdatesForTest commits Node.UpdateAlloc writes as the alloc
// update group commit does, one request per caller.
func (s *Server) CommitAllocUpdatesForTest(reqs []*structs.AllocUpdateRequest) []groupcommit.Result {
	return s.commitAllocUpdates(reqs)
}
