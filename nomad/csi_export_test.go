package nomad

import (
	"context"

	"github.com/berth-io/berth/helper/groupcommit"
	"github.com/berth-io/berth/nomad/structs"
	"github.com/berth-io/berth/nomad/volumewatcher"
)

// Test hooks for the external claim tests (package nomad_test).

// ReconcileVolumeForTest runs one volumewatcher pass over a volume now,
// on the caller's goroutine, exactly as the watcher would: a test can then
// assert what the watcher did not do, without waiting for it.
func (s *Server) ReconcileVolumeForTest(ns, id string) error {
	sc, err := s.csiTerm()
	if err != nil {
		return err
	}
	return sc.volumes.Release(context.Background(), ns, id, volumewatcher.ReleaseOptions{})
}

// CommitClaimGroupsForTest commits groups of claim writes as the claim
// group commit does, one group per caller.
func (s *Server) CommitClaimGroupsForTest(groups [][]*structs.CSIVolumeClaimUpdate) []groupcommit.Result {
	return s.submitClaimGroups(groups)()
}

// WriteClaimsForTest writes claim transitions through the group commit.
func (s *Server) WriteClaimsForTest(updates ...*structs.CSIVolumeClaimUpdate) (uint64, error) {
	return s.writeClaims(updates...)
}

// ErrMayStillRunForTest is errMayStillRun: a fake ControllerPublisher
// wraps it to model a call whose answer the server lost (the session
// broke under it) while the client may still run it.
var ErrMayStillRunForTest = errMayStillRun

// ErrTriedBeforeForTest is errTriedBefore: a fake ControllerPublisher
// wraps it to model a final answer that followed another controller's
// retryable one.
var ErrTriedBeforeForTest = errTriedBefore

// HandOffPendingForTest is how many proposed messages the FSM's hand-off
// still holds.
func (s *Server) HandOffPendingForTest() int {
	s.fsm.decoded.mu.Lock()
	defer s.fsm.decoded.mu.Unlock()
	return len(s.fsm.decoded.m)
}
