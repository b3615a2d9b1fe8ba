package nomad_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/shoenig/test/must"

	"github.com/berth-io/berth/nomad/structs"
	"github.com/berth-io/berth/testutil"
	"github.com/berth-io/berth/testutil/cluster"
)

// The claim protocol against each plugin profile on an in-process server,
// with the fake controller recording every call: no RPC the capabilities
// do not allow is ever made, and a plugin that answers Unimplemented or
// refuses ends in a state an operator can see and clear.

// profileNode is csiNode(0) whose plugin has the controller given (nil:
// node-only, the plugin says it has a controller service but none runs).
func profileNode(ctrl *structs.CSIControllerInfo) *structs.Node {
	n := csiNode(0, false)
	n.CSINodePlugins[hostpath].RequiresControllerPlugin = true
	if ctrl != nil {
		n.CSIControllerPlugins = map[string]*structs.CSIInfo{hostpath: {
			PluginID: hostpath, Healthy: true, HealthDescription: "healthy", Provider: "berth.hostpath",
			RequiresControllerPlugin: true, ControllerInfo: ctrl,
		}}
	}
	return n
}

func TestCSIClaim_CapabilityProfiles(t *testing.T) {
	for _, tc := range []struct {
		name        string
		ctrl        *structs.CSIControllerInfo
		readOnly    bool
		publishes   bool
		wantROField bool
	}{
		{name: "node-only"},
		{name: "controller without PUBLISH_UNPUBLISH_VOLUME", ctrl: &structs.CSIControllerInfo{SupportsCreateDelete: true}},
		{name: "controller with PUBLISH_UNPUBLISH_VOLUME", ctrl: &structs.CSIControllerInfo{SupportsAttachDetach: true},
			publishes: true},
		{name: "read-only claim without PUBLISH_READONLY sends readonly=false", readOnly: true,
			ctrl: &structs.CSIControllerInfo{SupportsAttachDetach: true}, publishes: true},
		{name: "read-only claim with PUBLISH_READONLY sends readonly=true", readOnly: true,
			ctrl: &structs.CSIControllerInfo{SupportsAttachDetach: true, SupportsReadOnlyAttach: true}, publishes: true, wantROField: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pub := &fakePublisher{}
			s := csiServer(t, pub, nil)
			joinNode(t, s, profileNode(tc.ctrl))
			vol := testVolume("db", hostpath)
			vol.RequestedCapabilities = append(vol.RequestedCapabilities, &structs.CSIVolumeCapability{
				AccessMode: structs.CSIVolumeAccessModeMultiNodeReader, AttachmentMode: structs.CSIVolumeAttachmentModeFilesystem})
			registerVolumes(t, s, "", vol)
			job := withCSIVolume(schedJob("a", 1), "db")
			if tc.readOnly {
				v := job.TaskGroups[0].Volumes["data"]
				v.ReadOnly, v.AccessMode = true, structs.CSIVolumeAccessModeMultiNodeReader
			}
			submitJob(t, s, job)
			a := waitLive(t, s, "a", 1)[0]

			req := claimRequest("db", a)
			if tc.readOnly {
				req.Mode, req.AccessMode = structs.CSIVolumeClaimRead, structs.CSIVolumeAccessModeMultiNodeReader
			}
			_, err := csiClaim(s, req)
			must.NoError(t, err)
			c := storedClaim(t, s, "db", a.ID)
			must.Eq(t, structs.CSIClaimTaken, c.Step)
			must.Eq(t, tc.publishes, c.ControllerPublished)

			clientUpdate(t, s, a.ID, structs.AllocClientStatusRunning, false)
			stopJob(t, s, "a", false)
			waitStopped(t, s, a.ID)
			must.NoError(t, unpublish(s, "db", a.ID, a.NodeID))
			waitFreed(t, s, "db", a.ID)

			publishes, unpublishes := pub.calls()
			if !tc.publishes {
				must.Eq(t, 0, publishes, must.Sprint("no ControllerPublish without PUBLISH_UNPUBLISH_VOLUME"))
				must.Eq(t, 0, unpublishes, must.Sprint("no ControllerUnpublish either"))
				return
			}
			must.Eq(t, 1, publishes)
			must.Eq(t, 1, unpublishes)
			pub.mu.Lock()
			defer pub.mu.Unlock()
			must.Eq(t, tc.wantROField, pub.publishCalls[0].ReadOnly, must.Sprint("readonly only with PUBLISH_READONLY"))
		})
	}
}

// A ControllerPublish the plugin does not implement (or refuses) fails
// the alloc's claim with a final code naming the plugin's words, and the
// reservation is freed once the alloc stops: nothing stuck, no retries.
func TestCSIClaim_FinalPublishErrorFreesTheReservation(t *testing.T) {
	for _, tc := range []struct {
		name string
		err  error
		code error
	}{
		{"unimplemented", structs.NewError(structs.CodeUnsupported, "rpc error: code = Unimplemented desc = no attach"), structs.ErrUnsupported},
		{"invalid argument", structs.NewError(structs.CodeInvalid, "rpc error: code = InvalidArgument desc = bad cap"), structs.ErrInvalid},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pub := &fakePublisher{publishErrs: []error{tc.err}}
			s := csiServer(t, pub, nil)
			joinNode(t, s, csiNode(0, true))
			a := claimedAlloc(t, s, "a")
			_, err := csiClaim(s, claimRequest("db", a))
			must.ErrorIs(t, err, tc.code)
			must.StrContains(t, err.Error(), tc.err.Error(), must.Sprint("the plugin's words reach the client"))
			must.StrContains(t, err.Error(), `plugin "hostpath"`)
			c := storedClaim(t, s, "db", a.ID)
			must.Eq(t, structs.CSIClaimReserved, c.Step)
			must.False(t, c.ControllerPublished, must.Sprint("a final refusal published nothing"))
			must.StrContains(t, c.LastError, tc.err.Error())

			// The client fails the alloc; the reservation goes without a
			// ControllerUnpublish.
			clientUpdate(t, s, a.ID, structs.AllocClientStatusFailed, true)
			waitFreed(t, s, "db", a.ID)
			_, unpublishes := pub.calls()
			must.Eq(t, 0, unpublishes)
		})
	}
}

// A ControllerUnpublish the plugin does not implement, or refuses, stops
// the release at needs-operator (no retry on a timer), visible with the
// reason; `volume detach` then skips an unimplemented step, and retries a
// refused one once the operator says so.
func TestCSIClaim_FinalUnpublishErrorNeedsOperator(t *testing.T) {
	for _, tc := range []struct {
		name        string
		err         error
		unsupported bool
	}{
		{"unimplemented", structs.NewError(structs.CodeUnsupported, "rpc error: code = Unimplemented desc = nope"), true},
		{"invalid argument", structs.NewError(structs.CodeInvalid, "rpc error: code = InvalidArgument desc = bad node"), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pub := &fakePublisher{}
			pub.unpublishHook = func(_ context.Context, n int) error {
				if n == 1 {
					return tc.err
				}
				return nil
			}
			s := csiServer(t, pub, nil)
			joinNode(t, s, csiNode(0, true))
			a := claimedAlloc(t, s, "a")
			takeClaim(t, s, "db", a)
			stopJob(t, s, "a", false)
			waitStopped(t, s, a.ID)
			must.NoError(t, unpublish(s, "db", a.ID, a.NodeID))

			var c *structs.CSIVolumeClaim
			testutil.WaitForResult(t, func() (bool, error) {
				c = storedClaim(t, s, "db", a.ID)
				return c.Step == structs.CSIClaimNeedsOperator, fmt.Errorf("claim at %s (%s)", c.Step, c.LastError)
			})
			must.Eq(t, structs.CSIClaimNodeDetached, c.BlockedStep)
			must.Eq(t, tc.unsupported, c.Unsupported)
			must.Zero(t, c.NextRetry, must.Sprint("never retried on a timer"))
			must.StrContains(t, c.LastError, tc.err.Error())
			must.StrContains(t, c.LastError, `volume "db"`)

			must.NoError(t, detach(s, "db", a.NodeID, false))
			past := waitFreed(t, s, "db", a.ID)
			_, unpublishes := pub.calls()
			if tc.unsupported {
				must.Eq(t, 1, unpublishes, must.Sprint("an unimplemented step is skipped, not called again"))
				must.StrContains(t, past.ReleaseReason, "does not implement")
			} else {
				must.Eq(t, 2, unpublishes, must.Sprint("detach retries a refused step"))
			}
		})
	}
}

// A client that cannot publish or unpublish on its node (its node plugin
// is down) reports it, and the claim shows the step, attempts, error and
// next retry; a report from another node is refused; success clears it.
func TestCSIClaim_ReportProgress(t *testing.T) {
	s := csiServer(t, nil, nil)
	joinNode(t, s, csiNode(0, false))
	a := claimedAlloc(t, s, "a")
	takeClaim(t, s, "db", a)

	next := time.Now().Add(time.Minute).UnixNano()
	report := func(nodeID, errText string, attempts int) error {
		req := &structs.CSIVolumeClaimProgressRequest{
			VolumeID: "db", AllocationID: a.ID, NodeID: nodeID, Phase: structs.CSIClaimPhaseUnpublish,
			Error: errText, Attempts: attempts, NextRetry: next,
		}
		req.AuthToken = nodeSecret(s, nodeID)
		return s.RPC("CSIVolume.ReportProgress", req, &structs.GenericResponse{})
	}
	must.NoError(t, report(a.NodeID, `node plugin "hostpath" not running`, 3))
	c := storedClaim(t, s, "db", a.ID)
	must.Eq(t, structs.CSIClaimTaken, c.Step)
	must.Eq(t, 3, c.Attempts)
	must.Eq(t, next, c.NextRetry)
	must.Eq(t, fmt.Sprintf(`node %s: unpublish failed: node plugin "hostpath" not running`, a.NodeID), c.LastError)

	err := report("elsewhere", "forged", 1)
	must.ErrorIs(t, err, structs.ErrPermissionDenied, must.Sprint("no node's secret: refused, ACLs or not"))
	must.Eq(t, 3, storedClaim(t, s, "db", a.ID).Attempts)

	bad := &structs.CSIVolumeClaimProgressRequest{VolumeID: "db", AllocationID: a.ID, NodeID: a.NodeID, Phase: "mount"}
	bad.AuthToken = nodeSecret(s, a.NodeID)
	err = s.RPC("CSIVolume.ReportProgress", bad, &structs.GenericResponse{})
	must.ErrorIs(t, err, structs.ErrInvalid)
	must.StrContains(t, err.Error(), `unknown phase "mount"`)

	// The stopped alloc's claim waits for its client; the watcher's passes
	// keep the client's report.
	stopJob(t, s, "a", false)
	waitStopped(t, s, a.ID)
	must.Eq(t, 3, storedClaim(t, s, "db", a.ID).Attempts)

	must.NoError(t, report(a.NodeID, "", 4))
	c = storedClaim(t, s, "db", a.ID)
	must.Eq(t, "", c.LastError)
	must.Zero(t, c.Attempts)
	must.NoError(t, unpublish(s, "db", a.ID, a.NodeID))
	waitFreed(t, s, "db", a.ID)
	must.NoError(t, report(a.NodeID, "late", 1), must.Sprint("a stale report is dropped"))
}

var _ = cluster.NewServer
