package csi

import (
	"context"
	"testing"

	csipb "github.com/container-storage-interface/spec/lib/go/csi"
	"github.com/shoenig/test/must"

	"github.com/berth-io/berth/nomad/structs"
)

func TestVolumeCapability_Validate(t *testing.T) {
	cases := []struct {
		name string
		cap  *VolumeCapability
		msgs []string // empty: valid
	}{
		{name: "file system with options", cap: fsCap},
		{name: "block", cap: blockCap},
		{
			name: "block with empty options",
			cap: &VolumeCapability{
				AccessMode:     structs.CSIVolumeAccessModeSingleNodeWriter,
				AttachmentMode: structs.CSIVolumeAttachmentModeBlockDevice,
				MountOptions:   &structs.CSIMountOptions{},
			},
		},
		{name: "nil", cap: nil, msgs: []string{"missing volume capability"}},
		{
			name: "unknown modes",
			cap:  &VolumeCapability{AccessMode: "single-node-sometimes", AttachmentMode: ""},
			msgs: []string{`unknown access mode "single-node-sometimes"`, `unknown attachment mode ""`},
		},
		{
			name: "block with mount flags",
			cap: &VolumeCapability{
				AccessMode:     structs.CSIVolumeAccessModeSingleNodeWriter,
				AttachmentMode: structs.CSIVolumeAttachmentModeBlockDevice,
				MountOptions:   &structs.CSIMountOptions{MountFlags: []string{"ro"}},
			},
			msgs: []string{"mount options are not allowed with attachment mode block-device"},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.cap.Validate()
			if len(tc.msgs) == 0 {
				must.NoError(t, err)
				return
			}
			must.Error(t, err)
			for _, m := range tc.msgs {
				must.StrContains(t, err.Error(), m)
			}
		})
	}
}

func TestVolumeCapability_AllAccessModes(t *testing.T) {
	modes := []structs.CSIVolumeAccessMode{
		structs.CSIVolumeAccessModeSingleNodeReader, structs.CSIVolumeAccessModeSingleNodeWriter,
		structs.CSIVolumeAccessModeSingleNodeSingleWriter, structs.CSIVolumeAccessModeSingleNodeMultiWriter,
		structs.CSIVolumeAccessModeMultiNodeReader, structs.CSIVolumeAccessModeMultiNodeSingleWriter,
		structs.CSIVolumeAccessModeMultiNodeMultiWriter,
	}
	for _, m := range modes {
		t.Run(string(m), func(t *testing.T) {
			in := &VolumeCapability{AccessMode: m, AttachmentMode: structs.CSIVolumeAttachmentModeFilesystem}
			must.NoError(t, in.Validate())
			pb := in.toProto()
			must.NotEq(t, csipb.VolumeCapability_AccessMode_UNKNOWN, pb.GetAccessMode().GetMode())
			out, ok := volumeCapabilityFromProto(pb)
			must.True(t, ok)
			must.Eq(t, in, out)
		})
	}
}

// Requests that fail Validate are never sent, and say what is missing.
func TestRequests_Validate(t *testing.T) {
	cases := []struct {
		name   string
		method string
		call   func(ctx context.Context, c Client) error
		msgs   []string
	}{
		{
			name: "controller publish", method: "ControllerPublishVolume",
			call: func(ctx context.Context, c Client) error {
				_, err := c.ControllerPublishVolume(ctx, &ControllerPublishVolumeRequest{})
				return err
			},
			msgs: []string{"missing volume external ID", "missing node ID", "missing volume capability"},
		},
		{
			name: "controller publish nil", method: "ControllerPublishVolume",
			call: func(ctx context.Context, c Client) error {
				_, err := c.ControllerPublishVolume(ctx, nil)
				return err
			},
			msgs: []string{"missing request"},
		},
		{
			name: "controller unpublish needs a node", method: "ControllerUnpublishVolume",
			call: func(ctx context.Context, c Client) error {
				return c.ControllerUnpublishVolume(ctx, &ControllerUnpublishVolumeRequest{ExternalID: "vol-1"})
			},
			msgs: []string{`volume "vol-1"`, "missing node ID"},
		},
		{
			name: "validate capabilities", method: "ValidateVolumeCapabilities",
			call: func(ctx context.Context, c Client) error {
				return c.ControllerValidateCapabilities(ctx, &ControllerValidateVolumeRequest{ExternalID: "vol-1"})
			},
			msgs: []string{"missing volume capabilities"},
		},
		{
			name: "create volume", method: "CreateVolume",
			call: func(ctx context.Context, c Client) error {
				_, err := c.ControllerCreateVolume(ctx, &ControllerCreateVolumeRequest{
					CapacityRange: &CapacityRange{RequiredBytes: 10, LimitBytes: 5},
					Capabilities:  []*VolumeCapability{fsCap, {AccessMode: "bogus", AttachmentMode: structs.CSIVolumeAttachmentModeFilesystem}},
					ContentSource: &VolumeContentSource{SnapshotID: "s", CloneID: "v"},
				})
				return err
			},
			msgs: []string{
				"missing volume name", "required capacity exceeds capacity limit",
				`volume capability 1: unknown access mode "bogus"`, "exactly one of snapshot ID and clone ID",
			},
		},
		{
			name: "delete volume", method: "DeleteVolume",
			call: func(ctx context.Context, c Client) error {
				return c.ControllerDeleteVolume(ctx, &ControllerDeleteVolumeRequest{})
			},
			msgs: []string{"missing volume external ID"},
		},
		{
			name: "list volumes", method: "ListVolumes",
			call: func(ctx context.Context, c Client) error {
				_, err := c.ControllerListVolumes(ctx, &ControllerListVolumesRequest{MaxEntries: -1})
				return err
			},
			msgs: []string{"max entries must not be negative"},
		},
		{
			name: "expand volume", method: "ControllerExpandVolume",
			call: func(ctx context.Context, c Client) error {
				_, err := c.ControllerExpandVolume(ctx, &ControllerExpandVolumeRequest{ExternalID: "vol-1"})
				return err
			},
			msgs: []string{"missing capacity range"},
		},
		{
			name: "modify volume", method: "ControllerModifyVolume",
			call: func(ctx context.Context, c Client) error {
				return c.ControllerModifyVolume(ctx, &ControllerModifyVolumeRequest{ExternalID: "vol-1"})
			},
			msgs: []string{"no mutable parameters to set"},
		},
		{
			name: "create snapshot", method: "CreateSnapshot",
			call: func(ctx context.Context, c Client) error {
				_, err := c.ControllerCreateSnapshot(ctx, &ControllerCreateSnapshotRequest{})
				return err
			},
			msgs: []string{"missing source volume external ID", "missing snapshot name"},
		},
		{
			name: "delete snapshot", method: "DeleteSnapshot",
			call: func(ctx context.Context, c Client) error {
				return c.ControllerDeleteSnapshot(ctx, &ControllerDeleteSnapshotRequest{})
			},
			msgs: []string{"missing snapshot ID"},
		},
		{
			name: "node stage", method: "NodeStageVolume",
			call: func(ctx context.Context, c Client) error {
				return c.NodeStageVolume(ctx, &NodeStageVolumeRequest{ExternalID: "vol-1", VolumeCapability: fsCap})
			},
			msgs: []string{`csi NodeStageVolume for volume "vol-1"`, "missing staging target path"},
		},
		{
			name: "node unstage", method: "NodeUnstageVolume",
			call: func(ctx context.Context, c Client) error {
				return c.NodeUnstageVolume(ctx, &NodeUnstageVolumeRequest{})
			},
			msgs: []string{"missing volume external ID", "missing staging target path"},
		},
		{
			name: "node publish", method: "NodePublishVolume",
			call: func(ctx context.Context, c Client) error {
				return c.NodePublishVolume(ctx, &NodePublishVolumeRequest{ExternalID: "vol-1"})
			},
			msgs: []string{"missing target path", "missing volume capability"},
		},
		{
			name: "node unpublish", method: "NodeUnpublishVolume",
			call: func(ctx context.Context, c Client) error {
				return c.NodeUnpublishVolume(ctx, &NodeUnpublishVolumeRequest{ExternalID: "vol-1"})
			},
			msgs: []string{"missing target path"},
		},
		{
			name: "node stats", method: "NodeGetVolumeStats",
			call: func(ctx context.Context, c Client) error {
				_, err := c.NodeGetVolumeStats(ctx, &NodeGetVolumeStatsRequest{ExternalID: "vol-1"})
				return err
			},
			msgs: []string{"missing volume path"},
		},
		{
			name: "node expand", method: "NodeExpandVolume",
			call: func(ctx context.Context, c Client) error {
				_, err := c.NodeExpandVolume(ctx, &NodeExpandVolumeRequest{ExternalID: "vol-1", CapacityRange: &CapacityRange{RequiredBytes: -1}})
				return err
			},
			msgs: []string{"missing volume path", "capacity must not be negative"},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t)
			err := tc.call(testCtx(t), h.client)
			must.ErrorIs(t, err, ErrInvalidRequest)
			must.ErrorIs(t, err, ErrFinal)
			for _, m := range tc.msgs {
				must.StrContains(t, err.Error(), m)
			}
			must.EqOp(t, 0, h.plugin.Calls(tc.method))
		})
	}
}

func TestValidateCapabilities_NotConfirmed(t *testing.T) {
	req := &ControllerValidateVolumeRequest{ExternalID: "vol-1", Capabilities: []*VolumeCapability{fsCap, blockCap}}
	cases := []struct {
		name string
		resp *csipb.ValidateVolumeCapabilitiesResponse
		msg  string
	}{
		{
			name: "refused with message",
			resp: &csipb.ValidateVolumeCapabilitiesResponse{Message: "block is not supported"},
			msg:  `plugin says "block is not supported"`,
		},
		{
			name: "refused silently",
			resp: &csipb.ValidateVolumeCapabilitiesResponse{},
			msg:  "plugin gave no reason",
		},
		{
			name: "confirmed only some",
			resp: &csipb.ValidateVolumeCapabilitiesResponse{Confirmed: &csipb.ValidateVolumeCapabilitiesResponse_Confirmed{
				VolumeCapabilities: []*csipb.VolumeCapability{fsCapPB},
			}},
			msg: "capability multi-node-reader-only/block-device missing from confirmation",
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t)
			h.plugin.SetResponse("ValidateVolumeCapabilities", tc.resp)
			err := h.client.ControllerValidateCapabilities(testCtx(t), req)
			must.ErrorIs(t, err, ErrNotConfirmed)
			must.ErrorIs(t, err, ErrFinal)
			must.StrContains(t, err.Error(), `csi ValidateVolumeCapabilities for volume "vol-1"`)
			must.StrContains(t, err.Error(), tc.msg)
		})
	}
}
