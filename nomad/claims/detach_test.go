package claims

import (
	"testing"
	"time"

	"github.com/shoenig/test/must"

	"github.com/berth-io/berth/nomad/structs"
)

func TestDetach(t *testing.T) {
	needsOp := func(blocked structs.CSIClaimStep, unsupported bool) func(c *structs.CSIVolumeClaim) {
		return func(c *structs.CSIVolumeClaim) {
			c.Step, c.BlockedStep, c.Unsupported = structs.CSIClaimNeedsOperator, blocked, unsupported
			c.LastError, c.Attempts = "rpc error: code = Unimplemented", 1
		}
	}
	pub := Profile{ControllerPublish: true}
	cases := []struct {
		name       string
		claim      func(c *structs.CSIVolumeClaim)
		alloc      string
		node       string
		force      bool
		want       DetachKind
		wantStep   structs.CSIClaimStep
		wantReason string
	}{
		{name: "unsupported controller unpublish is skipped", claim: needsOp(structs.CSIClaimNodeDetached, true),
			alloc: "exited", node: "ready", want: DetachWrite, wantStep: structs.CSIClaimControllerDetached, wantReason: ReasonOperatorSkipped},
		{name: "unsupported unpublish of a reservation is skipped", claim: needsOp(structs.CSIClaimReserved, true),
			alloc: "gone", node: "ready", want: DetachWrite, wantStep: structs.CSIClaimControllerDetached, wantReason: ReasonOperatorSkipped},
		{name: "unsupported node detach is skipped to node-detached", claim: needsOp(structs.CSIClaimTaken, true),
			alloc: "gone", node: "ready", want: DetachWrite, wantStep: structs.CSIClaimNodeDetached, wantReason: ReasonOperatorSkipped},
		{name: "a refused step is resumed", claim: needsOp(structs.CSIClaimNodeDetached, false),
			alloc: "exited", node: "ready", want: DetachWrite, wantStep: structs.CSIClaimNodeDetached},
		{name: "a refused node detach is resumed", claim: needsOp(structs.CSIClaimTaken, false),
			alloc: "gone", node: "ready", want: DetachWrite, wantStep: structs.CSIClaimTaken},
		{name: "force skips a refused step", claim: needsOp(structs.CSIClaimNodeDetached, false), force: true,
			alloc: "exited", node: "down", want: DetachWrite, wantStep: structs.CSIClaimControllerDetached, wantReason: ReasonDetachForce},
		{name: "in use is blocked", alloc: "running", node: "ready", want: DetachBlocked},
		{name: "in use is blocked with force on a live node", alloc: "running", node: "ready", force: true, want: DetachBlocked},
		{name: "force on a down node", alloc: "running", node: "down", force: true,
			want: DetachWrite, wantStep: structs.CSIClaimNodeDetached, wantReason: ReasonDetachForce},
		{name: "force on a gone node", alloc: "stopped", node: "gone", force: true,
			want: DetachWrite, wantStep: structs.CSIClaimNodeDetached, wantReason: ReasonDetachForce},
		{name: "waiting for the client is blocked without force", alloc: "stopped", node: "ready", want: DetachBlocked},
		{name: "a releasing claim is released", claim: func(c *structs.CSIVolumeClaim) { c.Step = structs.CSIClaimNodeDetached },
			alloc: "exited", node: "ready", want: DetachRelease},
		{name: "a claim that waits out an abandoned unpublish is releasing", claim: func(c *structs.CSIVolumeClaim) {
			c.Step, c.UnpublishUntil = structs.CSIClaimControllerDetached, stepNow.Add(time.Minute).UnixNano()
		}, alloc: "exited", node: "ready", want: DetachRelease},
		{name: "a releasing claim with force is released", claim: func(c *structs.CSIVolumeClaim) { c.Step = structs.CSIClaimNodeDetached },
			alloc: "exited", node: "ready", force: true, want: DetachRelease},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			claim := stepClaim(structs.CSIClaimTaken)
			if tc.claim != nil {
				tc.claim(claim)
			}
			got := Detach(stepVolume(claim), claim, stepAllocNamed(tc.alloc), stepNodeNamed(tc.node), pub, tc.force, 0, stepNow)
			must.Eq(t, tc.want, got.Kind, must.Sprint(got.Reason))
			must.StrContains(t, got.Reason, stepAlloc)
			if tc.want != DetachWrite {
				must.Nil(t, got.Claim)
				return
			}
			must.Eq(t, tc.wantStep, got.Claim.Step)
			must.Eq(t, tc.wantReason, got.Claim.ReleaseReason)
			must.True(t, claim.Step.CanMoveTo(got.Claim.Step), must.Sprint("the store takes it"))
			must.Zero(t, got.Claim.Attempts)
			must.Eq(t, "", string(got.Claim.BlockedStep))
		})
	}
}

// TestTake: which controller calls a claim makes, per profile and mode.
func TestTake(t *testing.T) {
	vol := stepVolume()
	vol.RequestedCapabilities = []*structs.CSIVolumeCapability{
		{AccessMode: structs.CSIVolumeAccessModeSingleNodeWriter, AttachmentMode: structs.CSIVolumeAttachmentModeFilesystem},
		{AccessMode: structs.CSIVolumeAccessModeMultiNodeReader, AttachmentMode: structs.CSIVolumeAttachmentModeBlockDevice},
	}
	alloc := stepAllocNamed("running")
	for _, tc := range []struct {
		name        string
		prof        Profile
		read        bool
		publish, ro bool
	}{
		{name: "node-only writer", prof: Profile{}},
		{name: "node-only reader", prof: Profile{}, read: true},
		{name: "publishing writer", prof: Profile{ControllerPublish: true}, publish: true},
		{name: "publishing reader without PUBLISH_READONLY", prof: Profile{ControllerPublish: true}, read: true, publish: true},
		{name: "publishing reader with PUBLISH_READONLY", prof: Profile{ControllerPublish: true, PublishReadOnly: true}, read: true, publish: true, ro: true},
		{name: "PUBLISH_READONLY on a writer", prof: Profile{ControllerPublish: true, PublishReadOnly: true}, publish: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := &structs.CSIVolumeClaimRequest{VolumeID: vol.ID, AllocationID: alloc.ID, NodeID: stepNode,
				Mode: structs.CSIVolumeClaimWrite, AccessMode: structs.CSIVolumeAccessModeSingleNodeWriter,
				AttachmentMode: structs.CSIVolumeAttachmentModeFilesystem}
			if tc.read {
				args.Mode, args.AccessMode = structs.CSIVolumeClaimRead, structs.CSIVolumeAccessModeMultiNodeReader
				args.AttachmentMode = structs.CSIVolumeAttachmentModeBlockDevice
			}
			plan, err := Take(vol, nil, alloc, args, tc.prof)
			must.NoError(t, err)
			must.Eq(t, tc.publish, plan.ControllerPublish)
			must.Eq(t, tc.ro, plan.PublishReadOnly)
			must.Eq(t, tc.read, plan.Claim.ReadOnly)
		})
	}
	_, err := Take(vol, nil, alloc, &structs.CSIVolumeClaimRequest{Mode: structs.CSIVolumeClaimWrite,
		AccessMode: structs.CSIVolumeAccessModeMultiNodeReader, AttachmentMode: structs.CSIVolumeAttachmentModeFilesystem}, Profile{})
	must.ErrorIs(t, err, structs.ErrInvalid)
	must.StrContains(t, err.Error(), "has no capability multi-node-reader-only/file-system")
}
