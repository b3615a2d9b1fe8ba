package nomad_test

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/shoenig/test/must"

	"github.com/berth-io/berth/nomad"
	"github.com/berth-io/berth/nomad/claims"
	"github.com/berth-io/berth/nomad/structs"
	"github.com/berth-io/berth/testutil"
	"github.com/berth-io/berth/testutil/cluster"
)

// placeSharedClaim places alloc allocID of job on nodeID with a reserved
// multi-node-multi-writer claim on volID, as a plan would.
func placeSharedClaim(t *testing.T, s *cluster.Server, job *structs.Job, allocID, nodeID, volID string) {
	t.Helper()
	stored, err := s.State().JobByID(nil, structs.DefaultNamespace, job.ID)
	must.NoError(t, err)
	raftApply(t, s, structs.ApplyPlanResultsRequestType, &structs.ApplyPlanResultsRequest{
		AllocsUpdated: []*structs.Allocation{{
			ID: allocID, Namespace: structs.DefaultNamespace, EvalID: "eval-" + allocID, Name: job.ID + ".web[0]",
			NodeID: nodeID, JobID: job.ID, Job: stored, TaskGroup: "web",
		}},
		CSIClaims: []*structs.CSIVolumeClaimUpdate{{
			Namespace: structs.DefaultNamespace, VolumeID: volID,
			Claim: &structs.CSIVolumeClaim{
				AllocID: allocID, JobID: job.ID, NodeID: nodeID, Mode: structs.CSIVolumeClaimWrite,
				AccessMode:     structs.CSIVolumeAccessModeMultiNodeMultiWriter,
				AttachmentMode: structs.CSIVolumeAttachmentModeFilesystem,
				Step:           structs.CSIClaimReserved,
			},
		}},
		Timestamp: time.Now().UnixNano(),
	})
}

// TestCSIClaim_ANewLeaderWaitsOutAnUnpublishItDidNotMake is seed 4060's
// hole with three servers, pinned down: a leader's ControllerUnpublish
// from node 0 went unanswered (the node was cut off, then the leader
// died); the client making it goes on until the deadline the request
// carried. A new leader has empty controller locks and knows nothing of
// the call but what is in state: the claim's UnpublishUntil, which the old
// leader's volumewatcher wrote before calling. It must neither
// ControllerPublish the volume to node 0 for another claim before that
// deadline plus the clock skew, nor free the claim (which would drop the
// deadline from state), even once its own unpublish succeeded.
//
// The server here is that new leader: it never made the call.
func TestCSIClaim_ANewLeaderWaitsOutAnUnpublishItDidNotMake(t *testing.T) {
	clock := &testClock{now: time.Now()}
	pub := &fakePublisher{}
	s := csiServer(t, pub, func(c *nomad.Config) {
		c.CSIClock = clock.Now
		c.NumSchedulers = 0 // the test places the allocs itself
	})
	node := csiNode(0, true)
	joinNode(t, s, node)
	vol := testVolume("shared", hostpath)
	vol.RequestedCapabilities[0].AccessMode = structs.CSIVolumeAccessModeMultiNodeMultiWriter
	registerVolumes(t, s, "", vol)
	job := testJob("web")
	registerJob(t, s, job)

	// Alloc 1's claim as the old leader left it: node side done, and the
	// deadline of the ControllerUnpublish it started and never saw end.
	placeSharedClaim(t, s, job, "alloc-1", node.ID, "shared")
	until := clock.Now().Add(30 * time.Second)
	raftApply(t, s, structs.CSIVolumeClaimRequestType, &structs.CSIVolumeClaimBatchRequest{
		Claims: []*structs.CSIVolumeClaimUpdate{{Namespace: structs.DefaultNamespace, VolumeID: "shared", Claim: &structs.CSIVolumeClaim{
			AllocID: "alloc-1", JobID: job.ID, NodeID: node.ID, ExternalNodeID: "ext-0", Mode: structs.CSIVolumeClaimWrite,
			AccessMode:     structs.CSIVolumeAccessModeMultiNodeMultiWriter,
			AttachmentMode: structs.CSIVolumeAttachmentModeFilesystem,
			Step:           structs.CSIClaimNodeDetached, ControllerPublished: true, UnpublishUntil: until.UnixNano(),
		}}},
		Timestamp: time.Now().UnixNano(),
	})
	setAllocClientStatus(t, s, "alloc-1", structs.AllocClientStatusComplete)

	// This leader's own unpublish succeeds, but the claim stays until the
	// old call can no longer land, saying so.
	testutil.WaitForResult(t, func() (bool, error) {
		c := storedClaim(t, s, "shared", "alloc-1")
		if c == nil {
			return false, errors.New("alloc 1's claim was freed while its old unpublish may still run")
		}
		if c.Step != structs.CSIClaimControllerDetached {
			return false, fmt.Errorf("claim of alloc 1 is %s (last error %q)", c.Step, c.LastError)
		}
		if c.UnpublishUntil != until.UnixNano() {
			return false, fmt.Errorf("the old call's deadline on the claim is %d, want %d", c.UnpublishUntil, until.UnixNano())
		}
		return true, nil
	})
	c := mustStillHold(t, s, "shared", "alloc-1", structs.CSIClaimControllerDetached)
	must.StrContains(t, c.LastError, "may still be running")

	// Alloc 2 on the same node: its Claim must not publish yet.
	placeSharedClaim(t, s, job, "alloc-2", node.ID, "shared")
	a2, err := s.State().AllocByID(nil, "alloc-2")
	must.NoError(t, err)
	req := claimRequest("shared", a2)
	req.AccessMode = structs.CSIVolumeAccessModeMultiNodeMultiWriter
	_, err = csiClaim(s, req)
	must.ErrorIs(t, err, structs.ErrNotReady)
	must.StrContains(t, err.Error(), "alloc-1")
	must.StrContains(t, err.Error(), "controller unpublish")
	publishes, _ := pub.calls()
	must.Eq(t, 0, publishes, must.Sprint("published to the node while an unpublish from it may still land"))

	clock.Advance(until.Sub(clock.Now()) + claims.ClockSkew - time.Millisecond)
	_, err = csiClaim(s, req)
	must.ErrorIs(t, err, structs.ErrNotReady, must.Sprint("the clock skew is part of the wait"))

	clock.Advance(time.Millisecond)
	_, err = csiClaim(s, req)
	must.NoError(t, err)
	publishes, _ = pub.calls()
	must.Eq(t, 1, publishes)
	systemGC(t, s)
	waitFreed(t, s, "shared", "alloc-1")
}

// oldClaimUpdate is a claim update as servers wrote it before
// UnpublishUntil existed, field names as msgpack encodes them.
type oldClaimUpdate struct {
	Namespace, VolumeID string
	Claim               struct {
		AllocID, JobID, NodeID, ExternalNodeID string
		Mode                                   structs.CSIVolumeClaimMode
		AccessMode                             structs.CSIVolumeAccessMode
		AttachmentMode                         structs.CSIVolumeAttachmentMode
		Step                                   structs.CSIClaimStep
		ControllerPublished                    bool
	}
}

// A claim in state written before UnpublishUntil existed (a Raft log or a
// snapshot of an older server) decodes with none and is released as it
// was then: controller-unpublished and freed at once, holding nothing.
func TestCSIUnpublish_ClaimsWrittenBeforeTheDeadlineReleaseAsBefore(t *testing.T) {
	clock := &testClock{now: time.Now()}
	pub := &fakePublisher{}
	s := csiServer(t, pub, func(c *nomad.Config) {
		c.CSIClock = clock.Now
		c.NumSchedulers = 0
	})
	node := csiNode(0, true)
	joinNode(t, s, node)
	vol := testVolume("shared", hostpath)
	vol.RequestedCapabilities[0].AccessMode = structs.CSIVolumeAccessModeMultiNodeMultiWriter
	registerVolumes(t, s, "", vol)
	job := testJob("web")
	registerJob(t, s, job)
	placeSharedClaim(t, s, job, "alloc-1", node.ID, "shared")
	setAllocClientStatus(t, s, "alloc-1", structs.AllocClientStatusComplete)

	var u oldClaimUpdate
	u.Namespace, u.VolumeID = structs.DefaultNamespace, "shared"
	u.Claim.AllocID, u.Claim.JobID, u.Claim.NodeID, u.Claim.ExternalNodeID = "alloc-1", job.ID, node.ID, "ext-0"
	u.Claim.Mode, u.Claim.AccessMode = structs.CSIVolumeClaimWrite, structs.CSIVolumeAccessModeMultiNodeMultiWriter
	u.Claim.AttachmentMode = structs.CSIVolumeAttachmentModeFilesystem
	u.Claim.Step, u.Claim.ControllerPublished = structs.CSIClaimNodeDetached, true
	raftApply(t, s, structs.CSIVolumeClaimRequestType, &struct {
		Claims    []oldClaimUpdate
		Timestamp int64
	}{Claims: []oldClaimUpdate{u}, Timestamp: time.Now().UnixNano()})

	past := waitFreed(t, s, "shared", "alloc-1") // the clock never moves
	must.Zero(t, past.UnpublishUntil)
	_, unpublishes := pub.calls()
	must.Eq(t, 1, unpublishes)
}
