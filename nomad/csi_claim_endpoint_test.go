package nomad_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"sync"
	"testing"
	"time"

	"github.com/shoenig/test/must"

	"github.com/berth-io/berth/nomad"
	"github.com/berth-io/berth/nomad/claims"
	"github.com/berth-io/berth/nomad/structs"
	"github.com/berth-io/berth/testutil"
	"github.com/berth-io/berth/testutil/cluster"
)

// The claim protocol end to end on in-process servers. The tests play the
// clients (they call Claim and Unpublish, and report alloc status) and the
// controller (fakePublisher, with scripted answers).

// fakePublisher is a nomad.ControllerPublisher with scripted answers.
type fakePublisher struct {
	// mu guards everything below.
	mu             sync.Mutex
	publishCtx     map[string]string
	publishErrs    []error // returned by the next calls, in order
	publishCalls   []*structs.CSIVolumeClaim
	unpublishCalls []*structs.CSIVolumeClaim
	// unpublishHook, when set, answers ControllerUnpublish call n (from
	// 1), outside mu.
	unpublishHook func(ctx context.Context, n int) error
}

var _ nomad.ControllerPublisher = (*fakePublisher)(nil)

func (f *fakePublisher) ControllerPublish(ctx context.Context, vol *structs.CSIVolume, claim *structs.CSIVolumeClaim) (map[string]string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.publishCalls = append(f.publishCalls, claim)
	if len(f.publishErrs) > 0 {
		err := f.publishErrs[0]
		f.publishErrs = f.publishErrs[1:]
		return nil, err
	}
	return maps.Clone(f.publishCtx), nil
}

func (f *fakePublisher) ControllerUnpublish(ctx context.Context, vol *structs.CSIVolume, claim *structs.CSIVolumeClaim) error {
	f.mu.Lock()
	f.unpublishCalls = append(f.unpublishCalls, claim)
	n, hook := len(f.unpublishCalls), f.unpublishHook
	f.mu.Unlock()
	if hook != nil {
		return hook(ctx, n)
	}
	return nil
}

func (f *fakePublisher) calls() (publish, unpublish int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.publishCalls), len(f.unpublishCalls)
}

// csiConfig is schedConfig plus fast claim retries and the publisher.
func csiConfig(pub *fakePublisher) func(c *nomad.Config) {
	return func(c *nomad.Config) {
		schedConfig(time.Minute)(c)
		c.CSIClaimRetryBase = 20 * time.Millisecond
		c.CSIClaimRetryMax = 100 * time.Millisecond
		if pub != nil { // a nil *fakePublisher must not become a non-nil interface
			c.ControllerPublisher = pub
		}
	}
}

func csiServer(t *testing.T, pub *fakePublisher, cb func(c *nomad.Config)) *cluster.Server {
	t.Helper()
	return cluster.NewServer(t, func(c *nomad.Config) {
		csiConfig(pub)(c)
		if cb != nil {
			cb(c)
		}
	})
}

// csiNode is schedNode i; with controller its hostpath plugin requires a
// controller, and the node runs a healthy one.
func csiNode(i int, controller bool) *structs.Node {
	n := schedNode(i)
	if controller {
		n.CSINodePlugins[hostpath].RequiresControllerPlugin = true
		n.CSIControllerPlugins = map[string]*structs.CSIInfo{hostpath: {
			PluginID: hostpath, Healthy: true, HealthDescription: "healthy", Provider: "berth.hostpath",
			RequiresControllerPlugin: true, ControllerInfo: &structs.CSIControllerInfo{SupportsAttachDetach: true},
		}}
	}
	return n
}

// claimedAlloc registers volume "db", runs job jobID with it, and returns
// the placed alloc (with its reserved claim).
func claimedAlloc(t *testing.T, s *cluster.Server, jobID string) *structs.Allocation {
	t.Helper()
	if getVolume(t, s, "", "db") == nil {
		registerVolumes(t, s, "", testVolume("db", hostpath))
	}
	submitJob(t, s, withCSIVolume(schedJob(jobID, 1), "db"))
	a := waitLive(t, s, jobID, 1)[0]
	must.Eq(t, structs.CSIClaimReserved, storedClaim(t, s, "db", a.ID).Step)
	return a
}

func claimRequest(volID string, a *structs.Allocation) *structs.CSIVolumeClaimRequest {
	return &structs.CSIVolumeClaimRequest{
		VolumeID: volID, AllocationID: a.ID, NodeID: a.NodeID, Mode: structs.CSIVolumeClaimWrite,
		AccessMode: structs.CSIVolumeAccessModeSingleNodeWriter, AttachmentMode: structs.CSIVolumeAttachmentModeFilesystem,
	}
}

// nodeSecret is node id's stored secret ("" when unknown): the identity
// its client signs every RPC with. Tests sign as a node with it.
func nodeSecret(s *cluster.Server, id string) string {
	if n, err := s.State().NodeByID(nil, id); err == nil && n != nil {
		return n.SecretID
	}
	return ""
}

func csiClaim(s *cluster.Server, req *structs.CSIVolumeClaimRequest) (*structs.CSIVolumeClaimResponse, error) {
	var reply structs.CSIVolumeClaimResponse
	if req.AuthToken == "" {
		req.AuthToken = nodeSecret(s, req.NodeID)
	}
	err := s.RPC("CSIVolume.Claim", req, &reply)
	return &reply, err
}

// takeClaim claims the volume for a, as its client's csi_hook would, and
// reports the alloc running.
func takeClaim(t *testing.T, s *cluster.Server, volID string, a *structs.Allocation) *structs.CSIVolumeClaimResponse {
	t.Helper()
	reply, err := csiClaim(s, claimRequest(volID, a))
	must.NoError(t, err)
	clientUpdate(t, s, a.ID, structs.AllocClientStatusRunning, false)
	return reply
}

func clientUpdate(t *testing.T, s *cluster.Server, allocID, status string, tasksExited bool) {
	t.Helper()
	a, err := s.State().AllocByID(nil, allocID)
	must.NoError(t, err)
	must.NotNil(t, a)
	req := &structs.AllocUpdateRequest{Alloc: []*structs.Allocation{{
		ID: allocID, NodeID: a.NodeID, ClientStatus: status, TasksExited: tasksExited,
	}}}
	req.AuthToken = nodeSecret(s, a.NodeID)
	must.NoError(t, s.RPC("Node.UpdateAlloc", req, &structs.GenericResponse{}))
}

func unpublish(s *cluster.Server, volID, allocID, nodeID string) error {
	req := &structs.CSIVolumeUnpublishRequest{VolumeID: volID, AllocationID: allocID, NodeID: nodeID}
	req.AuthToken = nodeSecret(s, nodeID)
	return s.RPC("CSIVolume.Unpublish", req, &structs.GenericResponse{})
}

func detach(s *cluster.Server, volID, nodeID string, force bool) error {
	return s.RPC("CSIVolume.Detach", &structs.CSIVolumeDetachRequest{VolumeID: volID, NodeID: nodeID, Force: force},
		&structs.GenericResponse{})
}

func systemGC(t *testing.T, s *cluster.Server) {
	t.Helper()
	must.NoError(t, s.RPC("System.GarbageCollect", &structs.GenericRequest{}, &structs.GenericResponse{}))
}

func stopJob(t *testing.T, s *cluster.Server, jobID string, purge bool) {
	t.Helper()
	must.NoError(t, s.RPC("Job.Deregister", &structs.JobDeregisterRequest{JobID: jobID, Purge: purge}, &structs.JobDeregisterResponse{}))
}

func nodeDown(t *testing.T, s *cluster.Server, nodeID string) {
	t.Helper()
	req := &structs.NodeUpdateStatusRequest{NodeID: nodeID, Status: structs.NodeStatusDown}
	req.AuthToken = nodeSecret(s, nodeID)
	must.NoError(t, s.RPC("Node.UpdateStatus", req, &structs.NodeUpdateResponse{}))
}

// waitStopped waits until the servers have stopped alloc id.
func waitStopped(t *testing.T, s *cluster.Server, id string) {
	t.Helper()
	testutil.WaitForResult(t, func() (bool, error) {
		a, err := s.State().AllocByID(nil, id)
		if err != nil || a == nil {
			return false, fmt.Errorf("alloc %s: %v", id, err)
		}
		return a.TerminalStatus(), fmt.Errorf("alloc %s is desired %s, client %s", id, a.DesiredStatus, a.ClientStatus)
	})
}

func storedClaim(t *testing.T, s *cluster.Server, volID, allocID string) *structs.CSIVolumeClaim {
	t.Helper()
	v, err := s.State().CSIVolumeByID(nil, structs.DefaultNamespace, volID)
	must.NoError(t, err)
	must.NotNil(t, v)
	return v.Claims[allocID]
}

func pastClaim(t *testing.T, s *cluster.Server, volID, allocID string) *structs.CSIVolumeClaim {
	t.Helper()
	v, err := s.State().CSIVolumeByID(nil, structs.DefaultNamespace, volID)
	must.NoError(t, err)
	must.NotNil(t, v)
	for _, c := range v.PastClaims {
		if c.AllocID == allocID {
			return c
		}
	}
	return nil
}

func waitFreed(t *testing.T, s *cluster.Server, volID, allocID string) *structs.CSIVolumeClaim {
	t.Helper()
	var past *structs.CSIVolumeClaim
	testutil.WaitForResult(t, func() (bool, error) {
		if c := storedClaim(t, s, volID, allocID); c != nil {
			return false, fmt.Errorf("claim of alloc %s is %s (attempts %d, last error %q)", allocID, c.Step, c.Attempts, c.LastError)
		}
		past = pastClaim(t, s, volID, allocID)
		return past != nil, errors.New("freed claim not in the past claims")
	})
	must.Eq(t, structs.CSIClaimFreed, past.Step)
	return past
}

// mustStillHold runs the volumewatcher's pass now and checks that the
// claim is still at step.
func mustStillHold(t *testing.T, s *cluster.Server, volID, allocID string, step structs.CSIClaimStep) *structs.CSIVolumeClaim {
	t.Helper()
	must.NoError(t, s.ReconcileVolumeForTest(structs.DefaultNamespace, volID))
	c := storedClaim(t, s, volID, allocID)
	must.NotNil(t, c, must.Sprintf("the claim of alloc %s was freed", allocID))
	must.Eq(t, step, c.Step)
	return c
}

func TestCSIClaim_TakesTheReservation(t *testing.T) {
	s := csiServer(t, nil, nil)
	node := csiNode(0, false)
	joinNode(t, s, node)
	a := claimedAlloc(t, s, "a")

	reply, err := csiClaim(s, claimRequest("db", a))
	must.NoError(t, err)
	must.Positive(t, reply.Index)
	must.Eq(t, "hunter2", reply.Volume.Secrets["password"], must.Sprint("the claiming client gets the secrets"))
	must.Eq(t, []string{"noatime"}, reply.Volume.MountOptions.MountFlags)
	must.MapEmpty(t, reply.PublishContext)
	c := storedClaim(t, s, "db", a.ID)
	must.Eq(t, structs.CSIClaimTaken, c.Step)
	must.Eq(t, "ext-0", c.ExternalNodeID, must.Sprint("captured from the node's fingerprint at claim time"))
	must.Eq(t, structs.CSIVolumeClaimWrite, c.Mode)
	must.Eq(t, "a", c.JobID)
	must.Eq(t, c.ModifyIndex, reply.Index)

	// A retry answers the same and writes nothing.
	again, err := csiClaim(s, claimRequest("db", a))
	must.NoError(t, err)
	must.Eq(t, reply.Volume.ModifyIndex, again.Volume.ModifyIndex)
	must.Eq(t, c.ModifyIndex, storedClaim(t, s, "db", a.ID).ModifyIndex)

	// Another alloc on the single-node-writer volume is refused until the
	// claim is freed, naming the claim that blocks it.
	job := schedJob("b", 1)
	job.Namespace = structs.DefaultNamespace
	raftApply(t, s, structs.ApplyPlanResultsRequestType, &structs.ApplyPlanResultsRequest{
		AllocsUpdated: []*structs.Allocation{{ID: "b-alloc", Namespace: structs.DefaultNamespace, Name: "b.web[0]",
			NodeID: node.ID, JobID: "b", Job: job, TaskGroup: "web"}},
		Timestamp: time.Now().UnixNano(),
	})
	b, err := s.State().AllocByID(nil, "b-alloc")
	must.NoError(t, err)
	_, err = csiClaim(s, claimRequest("db", b))
	must.ErrorIs(t, err, structs.ErrNotReady)
	must.StrContains(t, err.Error(), "b-alloc")
	must.StrContains(t, err.Error(), fmt.Sprintf("already claimed by alloc %s on node %s (in use)", a.ID[:8], node.ID[:8]))
	must.Nil(t, storedClaim(t, s, "db", "b-alloc"))

	cases := []struct {
		name string
		req  func(r *structs.CSIVolumeClaimRequest)
		code error
		want string
	}{
		{"unknown volume", func(r *structs.CSIVolumeClaimRequest) { r.VolumeID = "nope" },
			structs.ErrNotFound, `claiming volume "nope" for alloc ` + a.ID + `: volume not found in namespace "default"`},
		{"unknown alloc", func(r *structs.CSIVolumeClaimRequest) { r.AllocationID = "nope" },
			structs.ErrNotFound, `claiming volume "db": alloc nope not found`},
		{"another node", func(r *structs.CSIVolumeClaimRequest) { r.NodeID, r.AuthToken = "elsewhere", node.SecretID },
			structs.ErrPermissionDenied, "may not act for node elsewhere"},
		{"no node's secret", func(r *structs.CSIVolumeClaimRequest) { r.AuthToken = "forged" },
			structs.ErrPermissionDenied, "needs the calling node's secret"},
		{"missing fields", func(r *structs.CSIVolumeClaimRequest) { r.VolumeID, r.AllocationID = "", "" },
			structs.ErrInvalid, "missing volume ID, alloc ID"},
		{"unknown mode", func(r *structs.CSIVolumeClaimRequest) { r.Mode = "append" },
			structs.ErrInvalid, `unknown claim mode "append"`},
		{"all namespaces", func(r *structs.CSIVolumeClaimRequest) { r.Namespace = "*" },
			structs.ErrInvalid, "only for listing"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			req := claimRequest("db", a)
			tc.req(req)
			_, err := csiClaim(s, req)
			must.ErrorIs(t, err, tc.code)
			must.StrContains(t, err.Error(), tc.want)
		})
	}
}

func TestCSIClaim_ChecksModesAgainstVolumeAndReservation(t *testing.T) {
	s := csiServer(t, nil, nil)
	joinNode(t, s, csiNode(0, false))
	a := claimedAlloc(t, s, "a")

	req := claimRequest("db", a)
	req.AccessMode = structs.CSIVolumeAccessModeMultiNodeMultiWriter
	_, err := csiClaim(s, req)
	must.ErrorIs(t, err, structs.ErrInvalid)
	must.StrContains(t, err.Error(), `access mode "multi-node-multi-writer" differs from the reservation's "single-node-writer"`)

	// Modes left out come from the reservation.
	reply, err := csiClaim(s, &structs.CSIVolumeClaimRequest{VolumeID: "db", AllocationID: a.ID, NodeID: a.NodeID})
	must.NoError(t, err)
	must.Eq(t, structs.CSIVolumeAccessModeSingleNodeWriter, reply.Volume.Claims[a.ID].AccessMode)

	// A stopping alloc may not claim.
	stopJob(t, s, "a", false)
	waitStopped(t, s, a.ID)
	registerVolumes(t, s, "", testVolume("other", hostpath))
	_, err = csiClaim(s, claimRequest("other", a))
	must.ErrorIs(t, err, structs.ErrConflict)
	must.StrContains(t, err.Error(), "stopping")
}

func TestCSIClaim_RunsControllerPublishOnce(t *testing.T) {
	pub := &fakePublisher{
		publishCtx:  map[string]string{"device": "/dev/xvdb"},
		publishErrs: []error{errors.New("attachment limit reached")},
	}
	s := csiServer(t, pub, nil)
	joinNode(t, s, csiNode(0, true))
	a := claimedAlloc(t, s, "a")

	// A failed publish reaches the client as retryable and shows on the
	// reservation.
	_, err := csiClaim(s, claimRequest("db", a))
	must.ErrorIs(t, err, structs.ErrRetryable)
	must.StrContains(t, err.Error(), `volume "db"`)
	must.StrContains(t, err.Error(), a.ID)
	must.StrContains(t, err.Error(), "attachment limit reached")
	c := storedClaim(t, s, "db", a.ID)
	must.Eq(t, structs.CSIClaimReserved, c.Step)
	must.Eq(t, 1, c.Attempts)
	must.StrContains(t, c.LastError, "attachment limit reached")
	must.Eq(t, "ext-0", c.ExternalNodeID, must.Sprint("recorded before the publish, so a lost one can be undone"))

	reply, err := csiClaim(s, claimRequest("db", a))
	must.NoError(t, err)
	must.Eq(t, map[string]string{"device": "/dev/xvdb"}, reply.PublishContext)
	c = storedClaim(t, s, "db", a.ID)
	must.Eq(t, structs.CSIClaimTaken, c.Step)
	must.Eq(t, map[string]string{"device": "/dev/xvdb"}, c.PublishContext)
	must.Eq(t, "", c.LastError)
	must.Eq(t, 0, c.Attempts)

	// Idempotent: the stored context, no second ControllerPublish.
	again, err := csiClaim(s, claimRequest("db", a))
	must.NoError(t, err)
	must.Eq(t, reply.PublishContext, again.PublishContext)
	publishes, _ := pub.calls()
	must.Eq(t, 2, publishes)
	pub.mu.Lock()
	must.Eq(t, "ext-0", pub.publishCalls[1].ExternalNodeID)
	must.Eq(t, structs.CSIVolumeAccessModeSingleNodeWriter, pub.publishCalls[1].AccessMode)
	pub.mu.Unlock()
}

func TestCSIClaim_ControllerRequiredButUnreachable(t *testing.T) {
	s := csiServer(t, nil, nil)
	node := csiNode(0, true)
	joinNode(t, s, node)
	a := claimedAlloc(t, s, "a")
	_, err := csiClaim(s, claimRequest("db", a))
	// No client holds a node session: the claim is retryable and says
	// which node the servers could not reach.
	must.ErrorIs(t, err, structs.ErrRetryable)
	must.StrContains(t, err.Error(), "node "+node.ID+" is not connected to the leader")
	c := storedClaim(t, s, "db", a.ID)
	must.Eq(t, structs.CSIClaimReserved, c.Step)
	must.StrContains(t, c.LastError, "controller publish to node "+node.ID)
}

func TestCSIUnpublish_FreesANodeOnlyClaim(t *testing.T) {
	s := csiServer(t, nil, nil)
	joinNode(t, s, csiNode(0, false))
	a := claimedAlloc(t, s, "a")
	takeClaim(t, s, "db", a)

	// A second job waits for the volume.
	submitJob(t, s, withCSIVolume(schedJob("b", 1), "db"))
	testutil.WaitForResult(t, func() (bool, error) {
		return blockedEvalOf(t, s, "b") != nil, errors.New("job b is not blocked on the volume")
	})

	stopJob(t, s, "a", false)
	waitStopped(t, s, a.ID)
	mustStillHold(t, s, "db", a.ID, structs.CSIClaimTaken) // the client has not unpublished yet

	// A stranger cannot release it: no node's secret.
	err := unpublish(s, "db", a.ID, "another-node")
	must.ErrorIs(t, err, structs.ErrPermissionDenied)

	must.NoError(t, unpublish(s, "db", a.ID, a.NodeID))
	must.Nil(t, storedClaim(t, s, "db", a.ID), must.Sprint("freed before the reply"))
	past := pastClaim(t, s, "db", a.ID)
	must.Eq(t, structs.CSIClaimFreed, past.Step)
	must.Eq(t, "", past.ReleaseReason)
	// Nothing was left for the controller: the node side, the controller
	// side and the free went out in one Raft entry.
	h := past.History
	must.SliceLen(t, 3, h[len(h)-3:])
	for i, to := range []structs.CSIClaimStep{structs.CSIClaimNodeDetached, structs.CSIClaimControllerDetached, structs.CSIClaimFreed} {
		must.Eq(t, to, h[len(h)-3+i].To)
		must.Eq(t, past.ModifyIndex, h[len(h)-3+i].Index, must.Sprintf("transition to %s", to))
	}
	// Idempotent, also for a volume that is gone.
	must.NoError(t, unpublish(s, "db", a.ID, a.NodeID))
	must.NoError(t, unpublish(s, "gone", a.ID, a.NodeID))

	// The freed claim lets the waiting job place.
	b := waitLive(t, s, "b", 1)[0]
	must.Eq(t, structs.CSIClaimReserved, storedClaim(t, s, "db", b.ID).Step)
}

func TestCSIUnpublish_ReservationsOnlyUnpublishWhatMayHaveBeenPublished(t *testing.T) {
	pub := &fakePublisher{publishErrs: []error{errors.New("timed out")}}
	s := csiServer(t, pub, nil)
	joinNode(t, s, csiNode(0, true))
	vol := testVolume("db", hostpath)
	vol.RequestedCapabilities[0].AccessMode = structs.CSIVolumeAccessModeMultiNodeMultiWriter
	registerVolumes(t, s, "", vol)
	place := func(jobID string) *structs.Allocation {
		job := withCSIVolume(schedJob(jobID, 1), "db")
		job.TaskGroups[0].Volumes["data"].AccessMode = structs.CSIVolumeAccessModeMultiNodeMultiWriter
		submitJob(t, s, job)
		return waitLive(t, s, jobID, 1)[0]
	}
	never := place("never") // its client never got to Claim
	tried := place("tried") // its Claim's ControllerPublish timed out
	req := claimRequest("db", tried)
	req.AccessMode = ""
	_, err := csiClaim(s, req)
	must.ErrorIs(t, err, structs.ErrRetryable)

	// Both clients give up and report the node side done.
	must.NoError(t, unpublish(s, "db", never.ID, never.NodeID))
	must.NotNil(t, pastClaim(t, s, "db", never.ID))
	_, unpublishes := pub.calls()
	must.Eq(t, 0, unpublishes, must.Sprint("never published: nothing to undo"))

	must.NoError(t, unpublish(s, "db", tried.ID, tried.NodeID))
	must.NotNil(t, pastClaim(t, s, "db", tried.ID))
	_, unpublishes = pub.calls()
	must.Eq(t, 1, unpublishes, must.Sprint("the timed-out publish may have attached it"))
}

func TestCSIUnpublish_WatcherRetriesControllerFailures(t *testing.T) {
	second, release := make(chan struct{}), make(chan struct{})
	pub := &fakePublisher{unpublishHook: func(ctx context.Context, n int) error {
		switch n {
		case 1:
			return errors.New("volume busy")
		case 2:
			close(second)
			select {
			case <-release:
			case <-ctx.Done():
			}
			return errors.New("volume still busy")
		}
		return nil
	}}
	s := csiServer(t, pub, nil)
	joinNode(t, s, csiNode(0, true))
	a := claimedAlloc(t, s, "a")
	takeClaim(t, s, "db", a)
	stopJob(t, s, "a", false)
	waitStopped(t, s, a.ID)

	// The node side is done: the client hears success, the controller
	// side is left to the watcher.
	must.NoError(t, unpublish(s, "db", a.ID, a.NodeID))
	waitClosed(t, second, "the watcher never retried") // in flight; the claim shows the first failure
	c := storedClaim(t, s, "db", a.ID)
	must.Eq(t, structs.CSIClaimNodeDetached, c.Step)
	must.Eq(t, 1, c.Attempts)
	must.StrContains(t, c.LastError, "volume busy")
	must.StrContains(t, c.LastError, a.NodeID)
	must.Positive(t, c.NextRetry)
	close(release)

	past := waitFreed(t, s, "db", a.ID)
	must.Eq(t, 2, past.Attempts)
	must.StrContains(t, past.LastError, "volume still busy")
	_, unpublishes := pub.calls()
	must.Eq(t, 3, unpublishes)
}

// The new leader does not know whether the dead leader's call ended: it
// unpublishes again, and frees the claim only once that call's deadline
// (UnpublishUntil, in Raft before the call), plus the clock skew, passed.
func TestCSIUnpublish_NewLeaderFinishesWhenTheLeaderDiesMidUnpublish(t *testing.T) {
	clock := &testClock{now: time.Now()}
	started := make(chan struct{})
	pub := &fakePublisher{unpublishHook: func(ctx context.Context, n int) error {
		if n == 1 {
			close(started)
			<-ctx.Done() // the leader dies while the controller works
			return ctx.Err()
		}
		return nil
	}}
	servers := cluster.NewCluster(t, 3, func(i int, c *nomad.Config) {
		csiConfig(pub)(c)
		c.NumSchedulers = 0 // the test places the alloc itself
		c.CSIClock = clock.Now
	})
	leader := cluster.WaitForLeader(t, servers...)
	node := csiNode(1, true)
	joinNode(t, leader, node)
	registerVolumes(t, leader, "", testVolume("db", hostpath))
	job := testJob("web")
	registerJob(t, leader, job)
	placeClaimingAlloc(t, leader, job, "alloc-1", node.ID, "db", structs.CSIClaimReserved)
	a, err := leader.State().AllocByID(nil, "alloc-1")
	must.NoError(t, err)
	takeClaim(t, leader, "db", a)
	clientUpdate(t, leader, a.ID, structs.AllocClientStatusComplete, false)

	done := make(chan error, 1)
	go func() { done <- unpublish(leader, "db", a.ID, a.NodeID) }()
	waitClosed(t, started, "ControllerUnpublish never started")
	// NodeDetached is in Raft before the controller is called, and so is
	// the call's deadline.
	held := storedClaim(t, leader, "db", a.ID)
	must.Eq(t, structs.CSIClaimNodeDetached, held.Step)
	must.Greater(t, clock.Now().UnixNano(), held.UnpublishUntil)
	must.NoError(t, leader.Shutdown())
	select { // whatever it says: the client would retry, and that is idempotent
	case <-done:
	case <-time.After(testutil.WaitTimeout):
		t.Fatal("Unpublish did not return after its leader shut down")
	}

	next := cluster.WaitForLeader(t, followers(servers, leader)...)
	must.NotEq(t, leader.Addr, next.Addr)
	testutil.WaitForResult(t, func() (bool, error) {
		_, unpublishes := pub.calls()
		return unpublishes == 2, fmt.Errorf("%d controller unpublishes, want the new leader's too", unpublishes)
	})
	c := mustStillHold(t, next, "db", a.ID, structs.CSIClaimControllerDetached)
	must.Eq(t, held.UnpublishUntil, c.UnpublishUntil, must.Sprint("the dead leader's call may still run"))
	must.StrContains(t, c.LastError, "may still be running")

	clock.Advance(time.Unix(0, held.UnpublishUntil).Sub(clock.Now()) + claims.ClockSkew)
	systemGC(t, next)
	waitFreed(t, next, "db", a.ID)
	_, unpublishes := pub.calls()
	must.Eq(t, 2, unpublishes)
}

// lateLandingPublisher is a controller that attaches a volume to one node
// at a time, as a single-node volume must be: the first ControllerPublish
// to ext-0 loses its answer (its node session broke) but goes on in the
// client, and lands when the test says (land), if its deadline allows.
type lateLandingPublisher struct {
	clock *testClock
	// mu guards everything below.
	mu         sync.Mutex
	attached   map[string]bool // external node IDs
	twice      []string        // attachments while another node was attached
	lingering  *structs.CSIVolumeClaim
	unpublishd []string
}

func (f *lateLandingPublisher) attachLocked(node string) {
	for other := range f.attached {
		if other != node {
			f.twice = append(f.twice, fmt.Sprintf("%s while %s", node, other))
		}
	}
	f.attached[node] = true
}

func (f *lateLandingPublisher) ControllerPublish(ctx context.Context, vol *structs.CSIVolume, claim *structs.CSIVolumeClaim) (map[string]string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if claim.ExternalNodeID == "ext-0" && f.lingering == nil {
		f.lingering = claim.Copy()
		return nil, fmt.Errorf("calling CSIController.Publish on node 0: its session broke (EOF): %w", nomad.ErrMayStillRunForTest)
	}
	f.attachLocked(claim.ExternalNodeID)
	return nil, nil
}

// land finishes the lingering publish, as the client would until the
// deadline the request carried.
func (f *lateLandingPublisher) land() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.clock.Now().Before(time.Unix(0, f.lingering.PublishUntil)) {
		return false
	}
	f.attachLocked(f.lingering.ExternalNodeID)
	return true
}

func (f *lateLandingPublisher) ControllerUnpublish(ctx context.Context, vol *structs.CSIVolume, claim *structs.CSIVolumeClaim) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.attached, claim.ExternalNodeID)
	f.unpublishd = append(f.unpublishd, claim.ExternalNodeID)
	return nil
}

// TestCSIClaim_APublishThatMayStillLandIsWaitedOut is seed 20144's check-1
// violation, pinned down: a Claim's ControllerPublish lost its answer
// (the node session broke, or the leader changed under it) while the
// client went on retrying it; the alloc stopped; the servers
// controller-unpublished the reservation and freed it, the next alloc
// published the single-node volume to another node, and then the first
// publish landed: attached to two nodes. The reservation now carries the
// deadline of the call (PublishUntil, which the client enforces), and the
// release waits it out before unpublishing.
func TestCSIClaim_APublishThatMayStillLandIsWaitedOut(t *testing.T) {
	clock := &testClock{now: time.Now()}
	pub := &lateLandingPublisher{clock: clock, attached: map[string]bool{}}
	s := cluster.NewServer(t, func(c *nomad.Config) {
		csiConfig(nil)(c)
		c.ControllerPublisher = pub
		c.CSIClock = clock.Now
	})
	joinNode(t, s, csiNode(0, true))
	a := claimedAlloc(t, s, "a")
	_, err := csiClaim(s, claimRequest("db", a))
	must.ErrorIs(t, err, structs.ErrRetryable)
	c := storedClaim(t, s, "db", a.ID)
	must.True(t, c.ControllerPublished)
	must.Greater(t, clock.Now().UnixNano(), c.PublishUntil, must.Sprint("the call's deadline is on the reservation"))
	// Past the failed publish's retry backoff; far from the call's deadline.
	clock.Advance(time.Second)
	must.Less(t, clock.Now().UnixNano(), c.NextRetry)

	stopJob(t, s, "a", false)
	waitStopped(t, s, a.ID)
	c = mustStillHold(t, s, "db", a.ID, structs.CSIClaimReserved)
	must.StrContains(t, c.LastError, "may still be running")
	pub.mu.Lock()
	must.SliceEmpty(t, pub.unpublishd, must.Sprint("no unpublish a late publish could undo"))
	pub.mu.Unlock()

	// The next alloc can only go to node 1, and waits for the volume.
	joinNode(t, s, csiNode(1, true))
	rpcWhileNoLeader(t, s, "Node.UpdateEligibility", &structs.NodeUpdateEligibilityRequest{
		NodeID: a.NodeID, Eligibility: structs.NodeSchedulingIneligible}, &structs.NodeUpdateResponse{})
	submitJob(t, s, withCSIVolume(schedJob("b", 1), "db"))
	must.True(t, pub.land(), must.Sprint("the lingering publish lands before its deadline"))
	must.SliceEmpty(t, live(t, s, "b"))

	clock.Advance(time.Unix(0, c.PublishUntil).Sub(clock.Now()) + claims.ClockSkew + time.Second)
	systemGC(t, s)
	waitFreed(t, s, "db", a.ID)
	b := waitLive(t, s, "b", 1)[0]
	must.NotEq(t, a.NodeID, b.NodeID)
	takeClaim(t, s, "db", b)

	pub.mu.Lock()
	defer pub.mu.Unlock()
	must.Eq(t, []string{"ext-0"}, pub.unpublishd)
	must.SliceEmpty(t, pub.twice, must.Sprint("a single-node volume attached to two nodes"))
	must.Eq(t, map[string]bool{"ext-1": true}, pub.attached)
}

// A final answer to a ControllerPublish that may still be running (the
// server stopped waiting as it came; or, before the fix of seed 26854, the
// answer of a second controller after the first one's session broke under
// the call) fails the alloc, but cannot say the volume is not attached:
// the reservation stays ControllerPublished with the call's deadline, and
// its release controller-unpublishes once the deadline has passed.
func TestCSIClaim_AFinalAnswerFromACallThatMayStillRunKeepsTheAttachment(t *testing.T) {
	clock := &testClock{now: time.Now()}
	s, pub, a, c := claimWithFinalPublishError(t, nomad.ErrMayStillRunForTest, clock)
	must.Greater(t, clock.Now().UnixNano(), c.PublishUntil, must.Sprint("the call's deadline is on the reservation"))

	stopJob(t, s, "a", false)
	waitStopped(t, s, a.ID)
	mustStillHold(t, s, "db", a.ID, structs.CSIClaimReserved)
	_, unpublishes := pub.calls()
	must.Zero(t, unpublishes, must.Sprint("no unpublish the call could overtake"))

	clock.Advance(time.Unix(0, c.PublishUntil).Sub(clock.Now()) + claims.ClockSkew + time.Second)
	systemGC(t, s)
	waitFreed(t, s, "db", a.ID)
	_, unpublishes = pub.calls()
	must.Eq(t, 1, unpublishes, must.Sprint("the release controller-unpublishes what the call may have attached"))
}

// A final ControllerPublish answer that followed another controller's
// retryable one (a plugin's DeadlineExceeded: the attach may still
// complete in the storage system) counts that attempt, as an earlier
// Claim's would: the alloc fails, the reservation stays ControllerPublished,
// and its release controller-unpublishes. The call is over, so the release
// does not wait for its deadline.
func TestCSIClaim_AFinalAnswerAfterARetryableOneKeepsTheAttachment(t *testing.T) {
	s, pub, a, c := claimWithFinalPublishError(t, nomad.ErrTriedBeforeForTest, &testClock{now: time.Now()})
	must.Zero(t, c.PublishUntil, must.Sprint("the call is over"))

	stopJob(t, s, "a", false)
	waitFreed(t, s, "db", a.ID)
	_, unpublishes := pub.calls()
	must.Eq(t, 1, unpublishes, must.Sprint("the release controller-unpublishes what the earlier attempt may have attached"))
}

// claimWithFinalPublishError claims volume "db" for a new alloc through a
// controller whose ControllerPublish answers InvalidArgument with mark in
// its chain; it checks that the answer fails the alloc and that the
// reservation stays ControllerPublished, and returns the reservation.
func claimWithFinalPublishError(t *testing.T, mark error, clock *testClock) (*cluster.Server, *fakePublisher, *structs.Allocation, *structs.CSIVolumeClaim) {
	t.Helper()
	pub := &fakePublisher{publishErrs: []error{fmt.Errorf("%w (%w)",
		structs.NewError(structs.CodeInvalid, "ControllerPublish of volume db: InvalidArgument"), mark)}}
	s := csiServer(t, pub, func(c *nomad.Config) { c.CSIClock = clock.Now })
	joinNode(t, s, csiNode(0, true))
	a := claimedAlloc(t, s, "a")
	_, err := csiClaim(s, claimRequest("db", a))
	must.Eq(t, structs.CodeInvalid, structs.CodeOf(err), must.Sprintf("a final answer fails the alloc: %v", err))
	c := storedClaim(t, s, "db", a.ID)
	must.True(t, c.ControllerPublished, must.Sprint("the call, or an earlier one, may have attached the volume"))
	return s, pub, a, c
}

func TestCSIClaim_DownNodeKeepsItsClaimUntilTheDisconnectDeadline(t *testing.T) {
	clock := &testClock{now: time.Now()}
	s := csiServer(t, nil, func(c *nomad.Config) { c.CSIClock = clock.Now })
	// The node's client promises to stop its allocs 5m after it loses
	// the servers (Node.DisconnectDeadline); the servers default to none.
	promising := csiNode(0, false)
	promising.DisconnectDeadline = 5 * time.Minute
	joinNode(t, s, promising)
	a := claimedAlloc(t, s, "a")
	joinNode(t, s, csiNode(1, false)) // where the replacement could go
	takeClaim(t, s, "db", a)

	nodeDown(t, s, a.NodeID)
	waitStopped(t, s, a.ID) // lost: the scheduler wants a replacement
	c := mustStillHold(t, s, "db", a.ID, structs.CSIClaimTaken)
	must.StrContains(t, c.LastError, "disconnect deadline", must.Sprint("the claim says what it waits for"))
	must.StrContains(t, c.LastError, a.NodeID)
	systemGC(t, s) // claim GC changes nothing before the deadline
	mustStillHold(t, s, "db", a.ID, structs.CSIClaimTaken)
	must.SliceEmpty(t, live(t, s, "a"), must.Sprint("the replacement waits for the volume"))

	clock.Advance(5*time.Minute + time.Second)
	systemGC(t, s)
	past := waitFreed(t, s, "db", a.ID)
	must.Eq(t, claims.ReasonDisconnectPassed, past.ReleaseReason)
	next := waitLive(t, s, "a", 1)[0]
	must.NotEq(t, a.NodeID, next.NodeID)
}

func TestCSIClaim_DownNodeIsFencedThroughTheController(t *testing.T) {
	second, release := make(chan struct{}), make(chan struct{})
	pub := &fakePublisher{unpublishHook: func(ctx context.Context, n int) error {
		switch n {
		case 1:
			return errors.New("controller unreachable")
		case 2:
			close(second)
			select {
			case <-release:
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		return nil
	}}
	s := csiServer(t, pub, nil) // no disconnect deadline: only fencing frees
	joinNode(t, s, csiNode(0, true))
	a := claimedAlloc(t, s, "a")
	takeClaim(t, s, "db", a)

	nodeDown(t, s, a.NodeID)
	waitClosed(t, second, "fencing was never retried")
	c := storedClaim(t, s, "db", a.ID)
	must.Eq(t, structs.CSIClaimTaken, c.Step, must.Sprint("not freed while fencing fails"))
	must.Eq(t, 1, c.Attempts)
	must.StrContains(t, c.LastError, "controller unreachable")
	close(release)

	past := waitFreed(t, s, "db", a.ID)
	must.Eq(t, claims.ReasonFenced, past.ReleaseReason)
	pub.mu.Lock()
	must.Eq(t, "ext-0", pub.unpublishCalls[1].ExternalNodeID)
	pub.mu.Unlock()
}

func TestCSIClaim_PurgeAndAllocGCNeverFreeAClaimEarly(t *testing.T) {
	s := csiServer(t, nil, nil)
	joinNode(t, s, csiNode(0, false))
	a := claimedAlloc(t, s, "a")
	takeClaim(t, s, "db", a)

	stopJob(t, s, "a", true)
	waitStopped(t, s, a.ID)
	mustStillHold(t, s, "db", a.ID, structs.CSIClaimTaken)

	clientUpdate(t, s, a.ID, structs.AllocClientStatusComplete, false) // tasks not reported exited
	mustStillHold(t, s, "db", a.ID, structs.CSIClaimTaken)

	raftApply(t, s, structs.AllocDeleteRequestType, &structs.AllocDeleteRequest{AllocIDs: []string{a.ID}})
	c := mustStillHold(t, s, "db", a.ID, structs.CSIClaimTaken)
	must.StrContains(t, c.LastError, "garbage collected")
	systemGC(t, s)
	mustStillHold(t, s, "db", a.ID, structs.CSIClaimTaken)

	// The client's unpublish, even for a collected alloc, frees it.
	must.NoError(t, unpublish(s, "db", a.ID, a.NodeID))
	must.Eq(t, "", waitFreed(t, s, "db", a.ID).ReleaseReason)
}

func TestCSIClaim_TasksExitedLetsTheWatcherFreeIt(t *testing.T) {
	s := csiServer(t, nil, nil)
	joinNode(t, s, csiNode(0, false))
	a := claimedAlloc(t, s, "a")
	takeClaim(t, s, "db", a)

	// The client's Unpublish was lost, but it reported TasksExited: node
	// unpublish is done.
	clientUpdate(t, s, a.ID, structs.AllocClientStatusComplete, true)
	waitFreed(t, s, "db", a.ID)
}

func TestCSIDetach(t *testing.T) {
	pub := &fakePublisher{unpublishHook: func(ctx context.Context, n int) error {
		if n == 1 {
			return errors.New("detach failed")
		}
		return nil
	}}
	// The watcher would wait an hour before retrying by itself.
	s := csiServer(t, pub, func(c *nomad.Config) { c.CSIClaimRetryBase, c.CSIClaimRetryMax = time.Hour, time.Hour })
	joinNode(t, s, csiNode(0, true))
	a := claimedAlloc(t, s, "a")
	takeClaim(t, s, "db", a)

	err := detach(s, "db", a.NodeID, false)
	must.ErrorIs(t, err, structs.ErrConflict)
	must.StrContains(t, err.Error(), fmt.Sprintf("alloc %s (taken): in use", a.ID))
	err = detach(s, "db", a.NodeID, true)
	must.ErrorIs(t, err, structs.ErrConflict)
	must.StrContains(t, err.Error(), "still run on a live node")
	must.StrContains(t, err.Error(), a.ID)

	stopJob(t, s, "a", false)
	waitStopped(t, s, a.ID)
	err = detach(s, "db", a.NodeID[:8], false)
	must.ErrorIs(t, err, structs.ErrConflict)
	must.StrContains(t, err.Error(), "waiting for node "+a.NodeID+" to unpublish")

	// The client unpublishes; the controller fails, and the watcher backs
	// off. The operator's detach retries now.
	must.NoError(t, unpublish(s, "db", a.ID, a.NodeID))
	c := storedClaim(t, s, "db", a.ID)
	must.Eq(t, structs.CSIClaimNodeDetached, c.Step)
	must.Eq(t, 1, c.Attempts)
	must.NoError(t, detach(s, "db", a.NodeID[:8], false))
	must.Eq(t, "", waitFreed(t, s, "db", a.ID).ReleaseReason)
	_, unpublishes := pub.calls()
	must.Eq(t, 2, unpublishes)

	// Nothing left: fine. Unknown things: named.
	must.NoError(t, detach(s, "db", a.NodeID, false))
	err = detach(s, "nope", a.NodeID, false)
	must.ErrorIs(t, err, structs.ErrNotFound)
	must.StrContains(t, err.Error(), `volume "nope" not found`)
	err = detach(s, "db", "ffff", false)
	must.ErrorIs(t, err, structs.ErrNotFound)
	must.StrContains(t, err.Error(), `node "ffff" not found`)
	must.ErrorIs(t, detach(s, "db", "", false), structs.ErrInvalid)
}

func TestCSIDetach_ForceReleasesADownNodesClaims(t *testing.T) {
	s := csiServer(t, nil, nil) // disconnect deadline: 5m, far off
	joinNode(t, s, csiNode(0, false))
	a := claimedAlloc(t, s, "a")
	takeClaim(t, s, "db", a)

	nodeDown(t, s, a.NodeID)
	waitStopped(t, s, a.ID)
	mustStillHold(t, s, "db", a.ID, structs.CSIClaimTaken)
	err := detach(s, "db", a.NodeID, false)
	must.ErrorIs(t, err, structs.ErrConflict)
	must.StrContains(t, err.Error(), "disconnect deadline")

	must.NoError(t, detach(s, "db", a.NodeID, true))
	must.Nil(t, storedClaim(t, s, "db", a.ID), must.Sprint("a node-only plugin needs nothing more"))
	must.Eq(t, claims.ReasonDetachForce, pastClaim(t, s, "db", a.ID).ReleaseReason)
}

func TestSystem_GarbageCollectDeletesEmptyPlugins(t *testing.T) {
	s := cluster.NewServer(t, nil)
	node := registerPluginNode(t, s, 1, "a", "b", "c")
	registerVolumes(t, s, "", testVolume("vb", "b"))
	job := testJob("web")
	registerJob(t, s, job)
	placeClaimingAlloc(t, s, job, "alloc-1", node.ID, "vb", structs.CSIClaimTaken)

	// The node stops running every plugin; they stay, empty.
	bare := testNode(1)
	bare.Status = structs.NodeStatusReady
	must.NoError(t, s.RPC("Node.Register", &structs.NodeRegisterRequest{Node: bare}, &structs.NodeUpdateResponse{}))
	for _, id := range []string{"a", "b", "c"} {
		p, err := s.State().CSIPluginByID(nil, id)
		must.NoError(t, err)
		must.True(t, p.IsEmpty())
	}

	systemGC(t, s)
	for id, kept := range map[string]bool{"a": false, "b": true, "c": false} {
		p, err := s.State().CSIPluginByID(nil, id)
		must.NoError(t, err)
		must.Eq(t, kept, p != nil, must.Sprintf("plugin %s (only b's volume has a live claim)", id))
	}
}

func TestCSIGC_DeletesPluginsEmptyPastTheThreshold(t *testing.T) {
	s := cluster.NewServer(t, func(c *nomad.Config) {
		c.CSIPluginGCInterval = 10 * time.Millisecond
		c.CSIPluginGCThreshold = 50 * time.Millisecond
	})
	registerPluginNode(t, s, 1, "a")
	bare := testNode(1)
	bare.Status = structs.NodeStatusReady
	must.NoError(t, s.RPC("Node.Register", &structs.NodeRegisterRequest{Node: bare}, &structs.NodeUpdateResponse{}))
	testutil.WaitForResult(t, func() (bool, error) {
		p, err := s.State().CSIPluginByID(nil, "a")
		return p == nil && err == nil, fmt.Errorf("plugin a is still there (%v)", err)
	})
}

// waitClosed waits for ch to close, with a deadline.
func waitClosed(t *testing.T, ch <-chan struct{}, msg string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(testutil.WaitTimeout):
		t.Fatal(msg)
	}
}

// testClock is a clock a test moves by hand.
type testClock struct {
	// mu guards now.
	mu  sync.Mutex
	now time.Time
}

func (c *testClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *testClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}
