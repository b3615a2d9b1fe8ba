package csi

import (
	"context"
	"testing"
	"time"

	csipb "github.com/container-storage-interface/spec/lib/go/csi"
	"github.com/shoenig/test/must"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/testing/protocmp"
	"google.golang.org/protobuf/types/known/timestamppb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/berth-io/berth/nomad/structs"
)

var (
	fsCap = &VolumeCapability{
		AccessMode:     structs.CSIVolumeAccessModeSingleNodeWriter,
		AttachmentMode: structs.CSIVolumeAttachmentModeFilesystem,
		MountOptions:   &structs.CSIMountOptions{FSType: "ext4", MountFlags: []string{"noatime", "discard"}},
	}
	fsCapPB = &csipb.VolumeCapability{
		AccessMode: &csipb.VolumeCapability_AccessMode{Mode: csipb.VolumeCapability_AccessMode_SINGLE_NODE_WRITER},
		AccessType: &csipb.VolumeCapability_Mount{Mount: &csipb.VolumeCapability_MountVolume{
			FsType: "ext4", MountFlags: []string{"noatime", "discard"}}},
	}
	blockCap = &VolumeCapability{
		AccessMode:     structs.CSIVolumeAccessModeMultiNodeReader,
		AttachmentMode: structs.CSIVolumeAttachmentModeBlockDevice,
	}
	blockCapPB = &csipb.VolumeCapability{
		AccessMode: &csipb.VolumeCapability_AccessMode{Mode: csipb.VolumeCapability_AccessMode_MULTI_NODE_READER_ONLY},
		AccessType: &csipb.VolumeCapability_Block{Block: &csipb.VolumeCapability_BlockVolume{}},
	}
	secrets   = structs.CSISecrets{"token": "s3cret"}
	secretsPB = map[string]string{"token": "s3cret"}
	zoneA     = &structs.CSITopology{Segments: map[string]string{"zone": "a"}}
	zoneB     = &structs.CSITopology{Segments: map[string]string{"zone": "b"}}
)

// TestTranslation checks, for every RPC, that Berth's request arrives at the
// plugin as the right protobuf request and that the plugin's answer comes
// back as the right Berth response.
func TestTranslation(t *testing.T) {
	created := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

	cases := []struct {
		method   string
		setResp  proto.Message // the plugin's answer; nil for the fake's default
		call     func(ctx context.Context, c Client) (any, error)
		wantReq  proto.Message
		wantResp any
	}{
		{
			method: "ControllerPublishVolume",
			call: func(ctx context.Context, c Client) (any, error) {
				return c.ControllerPublishVolume(ctx, &ControllerPublishVolumeRequest{
					ExternalID: "vol-1", NodeID: "node-1", ReadOnly: true, VolumeCapability: blockCap,
					Secrets: secrets, VolumeContext: map[string]string{"k": "v"},
				})
			},
			wantReq: &csipb.ControllerPublishVolumeRequest{
				VolumeId: "vol-1", NodeId: "node-1", Readonly: true, VolumeCapability: blockCapPB,
				Secrets: secretsPB, VolumeContext: map[string]string{"k": "v"},
			},
			wantResp: &ControllerPublishVolumeResponse{PublishContext: map[string]string{"device": "/dev/fake0"}},
		},
		{
			method: "ControllerUnpublishVolume",
			call: func(ctx context.Context, c Client) (any, error) {
				return nil, c.ControllerUnpublishVolume(ctx, &ControllerUnpublishVolumeRequest{
					ExternalID: "vol-1", NodeID: "node-1", Secrets: secrets,
				})
			},
			wantReq: &csipb.ControllerUnpublishVolumeRequest{VolumeId: "vol-1", NodeId: "node-1", Secrets: secretsPB},
		},
		{
			method: "ValidateVolumeCapabilities",
			call: func(ctx context.Context, c Client) (any, error) {
				return nil, c.ControllerValidateCapabilities(ctx, &ControllerValidateVolumeRequest{
					ExternalID:        "vol-1",
					Capabilities:      []*VolumeCapability{fsCap, blockCap},
					VolumeContext:     map[string]string{"k": "v"},
					Parameters:        map[string]string{"type": "ssd"},
					MutableParameters: map[string]string{"iops": "100"},
					Secrets:           secrets,
				})
			},
			wantReq: &csipb.ValidateVolumeCapabilitiesRequest{
				VolumeId:           "vol-1",
				VolumeCapabilities: []*csipb.VolumeCapability{fsCapPB, blockCapPB},
				VolumeContext:      map[string]string{"k": "v"},
				Parameters:         map[string]string{"type": "ssd"},
				MutableParameters:  map[string]string{"iops": "100"},
				Secrets:            secretsPB,
			},
		},
		{
			method: "CreateVolume",
			call: func(ctx context.Context, c Client) (any, error) {
				return c.ControllerCreateVolume(ctx, &ControllerCreateVolumeRequest{
					Name:                      "db",
					CapacityRange:             &CapacityRange{RequiredBytes: 1 << 30, LimitBytes: 2 << 30},
					Capabilities:              []*VolumeCapability{fsCap},
					Parameters:                map[string]string{"type": "ssd"},
					MutableParameters:         map[string]string{"iops": "100"},
					Secrets:                   secrets,
					ContentSource:             &VolumeContentSource{SnapshotID: "snap-1"},
					AccessibilityRequirements: &structs.CSITopologyRequest{Required: []*structs.CSITopology{zoneA}, Preferred: []*structs.CSITopology{zoneB}},
				})
			},
			wantReq: &csipb.CreateVolumeRequest{
				Name:               "db",
				CapacityRange:      &csipb.CapacityRange{RequiredBytes: 1 << 30, LimitBytes: 2 << 30},
				VolumeCapabilities: []*csipb.VolumeCapability{fsCapPB},
				Parameters:         map[string]string{"type": "ssd"},
				MutableParameters:  map[string]string{"iops": "100"},
				Secrets:            secretsPB,
				VolumeContentSource: &csipb.VolumeContentSource{Type: &csipb.VolumeContentSource_Snapshot{
					Snapshot: &csipb.VolumeContentSource_SnapshotSource{SnapshotId: "snap-1"}}},
				AccessibilityRequirements: &csipb.TopologyRequirement{
					Requisite: []*csipb.Topology{{Segments: map[string]string{"zone": "a"}}},
					Preferred: []*csipb.Topology{{Segments: map[string]string{"zone": "b"}}},
				},
			},
			wantResp: &Volume{
				ExternalID:         "vol-db",
				CapacityBytes:      1 << 30,
				VolumeContext:      map[string]string{"type": "ssd"},
				ContentSource:      &VolumeContentSource{SnapshotID: "snap-1"},
				AccessibleTopology: []*structs.CSITopology{zoneA},
			},
		},
		{
			method: "DeleteVolume",
			call: func(ctx context.Context, c Client) (any, error) {
				return nil, c.ControllerDeleteVolume(ctx, &ControllerDeleteVolumeRequest{ExternalID: "vol-1", Secrets: secrets})
			},
			wantReq: &csipb.DeleteVolumeRequest{VolumeId: "vol-1", Secrets: secretsPB},
		},
		{
			method: "ListVolumes",
			setResp: &csipb.ListVolumesResponse{
				Entries: []*csipb.ListVolumesResponse_Entry{{
					Volume: &csipb.Volume{VolumeId: "vol-1", CapacityBytes: 5,
						ContentSource: &csipb.VolumeContentSource{Type: &csipb.VolumeContentSource_Volume{
							Volume: &csipb.VolumeContentSource_VolumeSource{VolumeId: "vol-0"}}}},
					Status: &csipb.ListVolumesResponse_VolumeStatus{
						PublishedNodeIds: []string{"node-1"},
						VolumeCondition:  &csipb.VolumeCondition{Abnormal: true, Message: "degraded"},
					},
				}},
				NextToken: "t2",
			},
			call: func(ctx context.Context, c Client) (any, error) {
				return c.ControllerListVolumes(ctx, &ControllerListVolumesRequest{MaxEntries: 10, StartingToken: "t1"})
			},
			wantReq: &csipb.ListVolumesRequest{MaxEntries: 10, StartingToken: "t1"},
			wantResp: &ControllerListVolumesResponse{
				Entries: []*ListedVolume{{
					Volume:           &Volume{ExternalID: "vol-1", CapacityBytes: 5, ContentSource: &VolumeContentSource{CloneID: "vol-0"}},
					PublishedNodeIDs: []string{"node-1"},
					Condition:        &VolumeCondition{Abnormal: true, Message: "degraded"},
				}},
				NextToken: "t2",
			},
		},
		{
			method: "GetCapacity",
			setResp: &csipb.GetCapacityResponse{
				AvailableCapacity: 100, MaximumVolumeSize: wrapperspb.Int64(50), MinimumVolumeSize: wrapperspb.Int64(1),
			},
			call: func(ctx context.Context, c Client) (any, error) {
				return c.ControllerGetCapacity(ctx, &ControllerGetCapacityRequest{
					Capabilities: []*VolumeCapability{fsCap}, Parameters: map[string]string{"type": "ssd"}, AccessibleTopology: zoneA,
				})
			},
			wantReq: &csipb.GetCapacityRequest{
				VolumeCapabilities: []*csipb.VolumeCapability{fsCapPB},
				Parameters:         map[string]string{"type": "ssd"},
				AccessibleTopology: &csipb.Topology{Segments: map[string]string{"zone": "a"}},
			},
			wantResp: &ControllerGetCapacityResponse{AvailableCapacity: 100, MaximumVolumeSize: 50, MinimumVolumeSize: 1},
		},
		{
			method: "ControllerExpandVolume",
			call: func(ctx context.Context, c Client) (any, error) {
				return c.ControllerExpandVolume(ctx, &ControllerExpandVolumeRequest{
					ExternalID: "vol-1", CapacityRange: &CapacityRange{RequiredBytes: 3 << 30}, Secrets: secrets, VolumeCapability: fsCap,
				})
			},
			wantReq: &csipb.ControllerExpandVolumeRequest{
				VolumeId: "vol-1", CapacityRange: &csipb.CapacityRange{RequiredBytes: 3 << 30}, Secrets: secretsPB, VolumeCapability: fsCapPB,
			},
			wantResp: &ControllerExpandVolumeResponse{CapacityBytes: 3 << 30, NodeExpansionRequired: true},
		},
		{
			method: "ControllerModifyVolume",
			call: func(ctx context.Context, c Client) (any, error) {
				return nil, c.ControllerModifyVolume(ctx, &ControllerModifyVolumeRequest{
					ExternalID: "vol-1", Secrets: secrets, MutableParameters: map[string]string{"note": "x"},
				})
			},
			wantReq: &csipb.ControllerModifyVolumeRequest{
				VolumeId: "vol-1", Secrets: secretsPB, MutableParameters: map[string]string{"note": "x"},
			},
		},
		{
			method: "CreateSnapshot",
			setResp: &csipb.CreateSnapshotResponse{Snapshot: &csipb.Snapshot{
				SnapshotId: "snap-nightly", SourceVolumeId: "vol-1", SizeBytes: 7,
				CreationTime: timestamppb.New(created), ReadyToUse: true,
			}},
			call: func(ctx context.Context, c Client) (any, error) {
				return c.ControllerCreateSnapshot(ctx, &ControllerCreateSnapshotRequest{
					SourceVolumeID: "vol-1", Name: "nightly", Secrets: secrets, Parameters: map[string]string{"p": "q"},
				})
			},
			wantReq: &csipb.CreateSnapshotRequest{
				SourceVolumeId: "vol-1", Name: "nightly", Secrets: secretsPB, Parameters: map[string]string{"p": "q"},
			},
			wantResp: &Snapshot{ID: "snap-nightly", SourceVolumeID: "vol-1", SizeBytes: 7, CreateTime: created, ReadyToUse: true},
		},
		{
			method: "DeleteSnapshot",
			call: func(ctx context.Context, c Client) (any, error) {
				return nil, c.ControllerDeleteSnapshot(ctx, &ControllerDeleteSnapshotRequest{SnapshotID: "snap-1", Secrets: secrets})
			},
			wantReq: &csipb.DeleteSnapshotRequest{SnapshotId: "snap-1", Secrets: secretsPB},
		},
		{
			method: "ListSnapshots",
			setResp: &csipb.ListSnapshotsResponse{
				Entries:   []*csipb.ListSnapshotsResponse_Entry{{Snapshot: &csipb.Snapshot{SnapshotId: "snap-1", SourceVolumeId: "vol-1"}}},
				NextToken: "n",
			},
			call: func(ctx context.Context, c Client) (any, error) {
				return c.ControllerListSnapshots(ctx, &ControllerListSnapshotsRequest{
					MaxEntries: 5, StartingToken: "s", SourceVolumeID: "vol-1", SnapshotID: "snap-1", Secrets: secrets,
				})
			},
			wantReq: &csipb.ListSnapshotsRequest{
				MaxEntries: 5, StartingToken: "s", SourceVolumeId: "vol-1", SnapshotId: "snap-1", Secrets: secretsPB,
			},
			wantResp: &ControllerListSnapshotsResponse{
				Entries:   []*Snapshot{{ID: "snap-1", SourceVolumeID: "vol-1"}},
				NextToken: "n",
			},
		},
		{
			method: "NodeStageVolume",
			call: func(ctx context.Context, c Client) (any, error) {
				return nil, c.NodeStageVolume(ctx, &NodeStageVolumeRequest{
					ExternalID: "vol-1", PublishContext: map[string]string{"device": "/dev/sdb"},
					StagingTargetPath: "/csi/staging/default/vol-1/rw-file-system-single-node-writer",
					VolumeCapability:  fsCap, Secrets: secrets, VolumeContext: map[string]string{"k": "v"},
				})
			},
			wantReq: &csipb.NodeStageVolumeRequest{
				VolumeId: "vol-1", PublishContext: map[string]string{"device": "/dev/sdb"},
				StagingTargetPath: "/csi/staging/default/vol-1/rw-file-system-single-node-writer",
				VolumeCapability:  fsCapPB, Secrets: secretsPB, VolumeContext: map[string]string{"k": "v"},
			},
		},
		{
			method: "NodeUnstageVolume",
			call: func(ctx context.Context, c Client) (any, error) {
				return nil, c.NodeUnstageVolume(ctx, &NodeUnstageVolumeRequest{ExternalID: "vol-1", StagingTargetPath: "/csi/staging/x"})
			},
			wantReq: &csipb.NodeUnstageVolumeRequest{VolumeId: "vol-1", StagingTargetPath: "/csi/staging/x"},
		},
		{
			method: "NodePublishVolume",
			call: func(ctx context.Context, c Client) (any, error) {
				return nil, c.NodePublishVolume(ctx, &NodePublishVolumeRequest{
					ExternalID: "vol-1", PublishContext: map[string]string{"device": "/dev/sdb"},
					StagingTargetPath: "/csi/staging/x", TargetPath: "/csi/per-alloc/a1/vol-1/ro-file-system-single-node-writer",
					VolumeCapability: fsCap, ReadOnly: true, Secrets: secrets, VolumeContext: map[string]string{"k": "v"},
				})
			},
			wantReq: &csipb.NodePublishVolumeRequest{
				VolumeId: "vol-1", PublishContext: map[string]string{"device": "/dev/sdb"},
				StagingTargetPath: "/csi/staging/x", TargetPath: "/csi/per-alloc/a1/vol-1/ro-file-system-single-node-writer",
				VolumeCapability: fsCapPB, Readonly: true, Secrets: secretsPB, VolumeContext: map[string]string{"k": "v"},
			},
		},
		{
			method: "NodeUnpublishVolume",
			call: func(ctx context.Context, c Client) (any, error) {
				return nil, c.NodeUnpublishVolume(ctx, &NodeUnpublishVolumeRequest{ExternalID: "vol-1", TargetPath: "/csi/per-alloc/a1/x"})
			},
			wantReq: &csipb.NodeUnpublishVolumeRequest{VolumeId: "vol-1", TargetPath: "/csi/per-alloc/a1/x"},
		},
		{
			method: "NodeGetVolumeStats",
			setResp: &csipb.NodeGetVolumeStatsResponse{
				Usage: []*csipb.VolumeUsage{
					{Unit: csipb.VolumeUsage_BYTES, Total: 10, Used: 4, Available: 6},
					{Unit: csipb.VolumeUsage_INODES, Total: 3, Used: 1, Available: 2},
					{Unit: csipb.VolumeUsage_Unit(9), Total: 1},
				},
				VolumeCondition: &csipb.VolumeCondition{Message: "fine"},
			},
			call: func(ctx context.Context, c Client) (any, error) {
				return c.NodeGetVolumeStats(ctx, &NodeGetVolumeStatsRequest{ExternalID: "vol-1", VolumePath: "/t", StagingTargetPath: "/s"})
			},
			wantReq: &csipb.NodeGetVolumeStatsRequest{VolumeId: "vol-1", VolumePath: "/t", StagingTargetPath: "/s"},
			wantResp: &VolumeStats{
				Usage: []*VolumeUsage{
					{Unit: "bytes", Total: 10, Used: 4, Available: 6},
					{Unit: "inodes", Total: 3, Used: 1, Available: 2},
					{Unit: "", Total: 1},
				},
				Condition: &VolumeCondition{Message: "fine"},
			},
		},
		{
			method: "NodeExpandVolume",
			call: func(ctx context.Context, c Client) (any, error) {
				return c.NodeExpandVolume(ctx, &NodeExpandVolumeRequest{
					ExternalID: "vol-1", VolumePath: "/t", StagingTargetPath: "/s",
					CapacityRange: &CapacityRange{RequiredBytes: 9}, VolumeCapability: fsCap, Secrets: secrets,
				})
			},
			wantReq: &csipb.NodeExpandVolumeRequest{
				VolumeId: "vol-1", VolumePath: "/t", StagingTargetPath: "/s",
				CapacityRange: &csipb.CapacityRange{RequiredBytes: 9}, VolumeCapability: fsCapPB, Secrets: secretsPB,
			},
			wantResp: &NodeExpandVolumeResponse{CapacityBytes: 9},
		},
	}
	for _, tc := range cases {
		t.Run(tc.method, func(t *testing.T) {
			h := newHarness(t)
			if tc.setResp != nil {
				h.plugin.SetResponse(tc.method, tc.setResp)
			}
			resp, err := tc.call(testCtx(t), h.client)
			must.NoError(t, err)
			must.EqOp(t, 1, h.plugin.Calls(tc.method))
			must.Eq(t, tc.wantReq, h.plugin.LastRequest(tc.method), must.Cmp(protocmp.Transform()))
			if tc.wantResp != nil {
				must.Eq(t, tc.wantResp, resp)
			}
		})
	}
}

// NotFound on teardown means the work is done.
func TestNotFoundIsAlreadyDone(t *testing.T) {
	cases := []struct {
		method string
		call   func(ctx context.Context, c Client) error
	}{
		{"NodeUnpublishVolume", func(ctx context.Context, c Client) error {
			return c.NodeUnpublishVolume(ctx, &NodeUnpublishVolumeRequest{ExternalID: "vol-1", TargetPath: "/t"})
		}},
		{"NodeUnstageVolume", func(ctx context.Context, c Client) error {
			return c.NodeUnstageVolume(ctx, &NodeUnstageVolumeRequest{ExternalID: "vol-1", StagingTargetPath: "/s"})
		}},
		{"ControllerUnpublishVolume", func(ctx context.Context, c Client) error {
			return c.ControllerUnpublishVolume(ctx, &ControllerUnpublishVolumeRequest{ExternalID: "vol-1", NodeID: "n"})
		}},
		{"DeleteVolume", func(ctx context.Context, c Client) error {
			return c.ControllerDeleteVolume(ctx, &ControllerDeleteVolumeRequest{ExternalID: "vol-1"})
		}},
		{"DeleteSnapshot", func(ctx context.Context, c Client) error {
			return c.ControllerDeleteSnapshot(ctx, &ControllerDeleteSnapshotRequest{SnapshotID: "snap-1"})
		}},
	}
	for _, tc := range cases {
		t.Run(tc.method, func(t *testing.T) {
			h := newHarness(t)
			h.plugin.NextErr(tc.method, codes.NotFound)
			must.NoError(t, tc.call(testCtx(t), h.client))
			must.EqOp(t, 1, h.plugin.Calls(tc.method))
		})
	}

	t.Run("not on publish", func(t *testing.T) {
		h := newHarness(t)
		h.plugin.NextErr("NodePublishVolume", codes.NotFound)
		err := h.client.NodePublishVolume(testCtx(t), publishReq())
		must.ErrorIs(t, err, ErrFinal)
		must.EqOp(t, codes.NotFound, status.Code(err))
	})
}

// TestCapabilitiesFor: mount options go with file-system attachments only,
// as copies, and nil requests are skipped.
func TestCapabilitiesFor(t *testing.T) {
	o := &structs.CSIMountOptions{FSType: "ext4", MountFlags: []string{"noatime"}}
	got := CapabilitiesFor([]*structs.CSIVolumeCapability{
		{AccessMode: structs.CSIVolumeAccessModeSingleNodeWriter, AttachmentMode: structs.CSIVolumeAttachmentModeFilesystem},
		nil,
		{AccessMode: structs.CSIVolumeAccessModeMultiNodeReader, AttachmentMode: structs.CSIVolumeAttachmentModeBlockDevice},
	}, o)
	must.Eq(t, []*VolumeCapability{
		{AccessMode: structs.CSIVolumeAccessModeSingleNodeWriter, AttachmentMode: structs.CSIVolumeAttachmentModeFilesystem, MountOptions: o},
		{AccessMode: structs.CSIVolumeAccessModeMultiNodeReader, AttachmentMode: structs.CSIVolumeAttachmentModeBlockDevice},
	}, got)
	got[0].MountOptions.MountFlags[0] = "changed"
	must.Eq(t, "noatime", o.MountFlags[0]) // a copy, not the caller's
	for _, c := range got {
		must.NoError(t, c.Validate())
	}
}
