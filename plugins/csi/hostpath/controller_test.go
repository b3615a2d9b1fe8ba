package hostpath

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"github.com/shoenig/test/must"
	"google.golang.org/grpc/codes"
)

func TestIdentity(t *testing.T) {
	ctx := context.Background()
	cases := []struct {
		name     string
		mode     Mode
		topology bool
		want     []string
	}{
		{name: "monolith", mode: ModeMonolith, want: []string{"CONTROLLER_SERVICE", "ONLINE"}},
		{name: "controller", mode: ModeController, want: []string{"CONTROLLER_SERVICE", "ONLINE"}},
		{name: "node", mode: ModeNode, want: nil},
		{name: "node with topology", mode: ModeNode, topology: true, want: []string{"VOLUME_ACCESSIBILITY_CONSTRAINTS"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tp := startPlugin(t, Config{NodeID: "n1", Root: t.TempDir(), Mode: tc.mode, Topology: tc.topology})
			info, err := tp.id.GetPluginInfo(ctx, &csi.GetPluginInfoRequest{})
			must.NoError(t, err)
			must.EqOp(t, Name, info.GetName())
			must.EqOp(t, Version, info.GetVendorVersion())

			caps, err := tp.id.GetPluginCapabilities(ctx, &csi.GetPluginCapabilitiesRequest{})
			must.NoError(t, err)
			var got []string
			for _, c := range caps.GetCapabilities() {
				if s := c.GetService(); s != nil {
					got = append(got, s.GetType().String())
				}
				if e := c.GetVolumeExpansion(); e != nil {
					got = append(got, e.GetType().String())
				}
			}
			must.Eq(t, tc.want, got)

			probe, err := tp.id.Probe(ctx, &csi.ProbeRequest{})
			must.NoError(t, err)
			must.True(t, probe.GetReady().GetValue())

			// Services outside the mode are unimplemented.
			_, cerr := tp.ctrl.ControllerGetCapabilities(ctx, &csi.ControllerGetCapabilitiesRequest{})
			_, nerr := tp.node.NodeGetCapabilities(ctx, &csi.NodeGetCapabilitiesRequest{})
			if tc.mode.servesController() {
				must.NoError(t, cerr)
			} else {
				mustCode(t, cerr, codes.Unimplemented)
			}
			if tc.mode.servesNode() {
				must.NoError(t, nerr)
			} else {
				mustCode(t, nerr, codes.Unimplemented)
			}
		})
	}
}

func TestCreateVolume(t *testing.T) {
	ctx := context.Background()
	const mib = 1 << 20
	tp := startPlugin(t, Config{NodeID: "n1", Root: t.TempDir(), CapacityBytes: 10 * mib})
	first, err := tp.ctrl.CreateVolume(ctx, &csi.CreateVolumeRequest{
		Name:               "first",
		VolumeCapabilities: []*csi.VolumeCapability{mountCap(snw)},
		CapacityRange:      &csi.CapacityRange{RequiredBytes: 4 * mib},
	})
	must.NoError(t, err)
	must.EqOp(t, int64(4*mib), first.GetVolume().GetCapacityBytes())
	dir := first.GetVolume().GetVolumeContext()[volumeContextPath]
	fi, err := os.Stat(dir)
	must.NoError(t, err)
	must.True(t, fi.IsDir())

	cases := []struct {
		name      string
		req       *csi.CreateVolumeRequest
		wantCode  codes.Code
		wantNames []string
		wantID    string
	}{
		{
			name:   "same name, compatible: the same volume",
			req:    &csi.CreateVolumeRequest{Name: "first", VolumeCapabilities: []*csi.VolumeCapability{mountCap(snw)}, CapacityRange: &csi.CapacityRange{RequiredBytes: 2 * mib}},
			wantID: first.GetVolume().GetVolumeId(),
		},
		{
			name:      "same name, larger",
			req:       &csi.CreateVolumeRequest{Name: "first", VolumeCapabilities: []*csi.VolumeCapability{mountCap(snw)}, CapacityRange: &csi.CapacityRange{RequiredBytes: 5 * mib}},
			wantCode:  codes.AlreadyExists,
			wantNames: []string{`"first"`, first.GetVolume().GetVolumeId()},
		},
		{
			name:      "same name, other parameters",
			req:       &csi.CreateVolumeRequest{Name: "first", VolumeCapabilities: []*csi.VolumeCapability{mountCap(snw)}, Parameters: map[string]string{"a": "b"}},
			wantCode:  codes.AlreadyExists,
			wantNames: []string{"parameters"},
		},
		{
			name:      "more than the whole capacity",
			req:       &csi.CreateVolumeRequest{Name: "huge", VolumeCapabilities: []*csi.VolumeCapability{mountCap(snw)}, CapacityRange: &csi.CapacityRange{RequiredBytes: 11 * mib}},
			wantCode:  codes.OutOfRange,
			wantNames: []string{`"huge"`, "whole capacity"},
		},
		{
			name:      "more than is free",
			req:       &csi.CreateVolumeRequest{Name: "big", VolumeCapabilities: []*csi.VolumeCapability{mountCap(snw)}, CapacityRange: &csi.CapacityRange{RequiredBytes: 7 * mib}},
			wantCode:  codes.ResourceExhausted,
			wantNames: []string{`"big"`, "free"},
		},
		{
			name:      "no name",
			req:       &csi.CreateVolumeRequest{VolumeCapabilities: []*csi.VolumeCapability{mountCap(snw)}},
			wantCode:  codes.InvalidArgument,
			wantNames: []string{"name is required"},
		},
		{
			name:      "no capabilities",
			req:       &csi.CreateVolumeRequest{Name: "x"},
			wantCode:  codes.InvalidArgument,
			wantNames: []string{`"x"`, "volume_capabilities"},
		},
		{
			name:      "limit below required",
			req:       &csi.CreateVolumeRequest{Name: "r", VolumeCapabilities: []*csi.VolumeCapability{mountCap(snw)}, CapacityRange: &csi.CapacityRange{RequiredBytes: 2, LimitBytes: 1}},
			wantCode:  codes.InvalidArgument,
			wantNames: []string{"exceeds limit_bytes"},
		},
		{
			name: "unknown source snapshot",
			req: &csi.CreateVolumeRequest{Name: "s", VolumeCapabilities: []*csi.VolumeCapability{mountCap(snw)},
				VolumeContentSource: &csi.VolumeContentSource{Type: &csi.VolumeContentSource_Snapshot{Snapshot: &csi.VolumeContentSource_SnapshotSource{SnapshotId: "snap-nope"}}}},
			wantCode:  codes.NotFound,
			wantNames: []string{"snap-nope"},
		},
		{
			name: "unknown source volume",
			req: &csi.CreateVolumeRequest{Name: "c", VolumeCapabilities: []*csi.VolumeCapability{mountCap(snw)},
				VolumeContentSource: &csi.VolumeContentSource{Type: &csi.VolumeContentSource_Volume{Volume: &csi.VolumeContentSource_VolumeSource{VolumeId: "vol-nope"}}}},
			wantCode:  codes.NotFound,
			wantNames: []string{"vol-nope"},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			resp, err := tp.ctrl.CreateVolume(ctx, tc.req)
			if tc.wantCode != codes.OK {
				mustCode(t, err, tc.wantCode, tc.wantNames...)
				return
			}
			must.NoError(t, err)
			must.EqOp(t, tc.wantID, resp.GetVolume().GetVolumeId())
		})
	}

	cap, err := tp.ctrl.GetCapacity(ctx, &csi.GetCapacityRequest{})
	must.NoError(t, err)
	must.EqOp(t, int64(6*mib), cap.GetAvailableCapacity())

	// Expansion counts against the capacity too.
	_, err = tp.ctrl.ControllerExpandVolume(ctx, &csi.ControllerExpandVolumeRequest{VolumeId: first.GetVolume().GetVolumeId(), CapacityRange: &csi.CapacityRange{RequiredBytes: 11 * mib}})
	mustCode(t, err, codes.OutOfRange, first.GetVolume().GetVolumeId())
	exp, err := tp.ctrl.ControllerExpandVolume(ctx, &csi.ControllerExpandVolumeRequest{VolumeId: first.GetVolume().GetVolumeId(), CapacityRange: &csi.CapacityRange{RequiredBytes: 6 * mib}})
	must.NoError(t, err)
	must.EqOp(t, int64(6*mib), exp.GetCapacityBytes())
	must.False(t, exp.GetNodeExpansionRequired())

	_, err = tp.ctrl.DeleteVolume(ctx, &csi.DeleteVolumeRequest{VolumeId: first.GetVolume().GetVolumeId()})
	must.NoError(t, err)
	_, err = os.Stat(dir)
	must.True(t, os.IsNotExist(err))
	_, err = tp.ctrl.DeleteVolume(ctx, &csi.DeleteVolumeRequest{VolumeId: first.GetVolume().GetVolumeId()})
	must.NoError(t, err, must.Sprint("deleting twice succeeds"))
}

func TestSnapshotAndClone(t *testing.T) {
	ctx := context.Background()
	tp := startPlugin(t, Config{NodeID: "n1", Root: t.TempDir()})
	src := createVolume(t, tp, "src", snw)
	srcDir := src.GetVolumeContext()[volumeContextPath]
	must.NoError(t, os.MkdirAll(filepath.Join(srcDir, "sub"), 0o755))
	must.NoError(t, os.WriteFile(filepath.Join(srcDir, "sub", "data"), []byte("hello"), 0o600))
	must.NoError(t, os.Symlink("sub/data", filepath.Join(srcDir, "link")))

	snap, err := tp.ctrl.CreateSnapshot(ctx, &csi.CreateSnapshotRequest{Name: "snap", SourceVolumeId: src.GetVolumeId()})
	must.NoError(t, err)
	must.True(t, snap.GetSnapshot().GetReadyToUse())
	again, err := tp.ctrl.CreateSnapshot(ctx, &csi.CreateSnapshotRequest{Name: "snap", SourceVolumeId: src.GetVolumeId()})
	must.NoError(t, err)
	must.EqOp(t, snap.GetSnapshot().GetSnapshotId(), again.GetSnapshot().GetSnapshotId())

	// Changes after the snapshot are not in it.
	must.NoError(t, os.WriteFile(filepath.Join(srcDir, "sub", "data"), []byte("changed"), 0o600))

	cases := []struct {
		name   string
		source *csi.VolumeContentSource
		want   string
	}{
		{name: "from snapshot", want: "hello", source: &csi.VolumeContentSource{Type: &csi.VolumeContentSource_Snapshot{
			Snapshot: &csi.VolumeContentSource_SnapshotSource{SnapshotId: snap.GetSnapshot().GetSnapshotId()}}}},
		{name: "clone", want: "changed", source: &csi.VolumeContentSource{Type: &csi.VolumeContentSource_Volume{
			Volume: &csi.VolumeContentSource_VolumeSource{VolumeId: src.GetVolumeId()}}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			resp, err := tp.ctrl.CreateVolume(ctx, &csi.CreateVolumeRequest{
				Name: tc.name, VolumeCapabilities: []*csi.VolumeCapability{mountCap(snw)}, VolumeContentSource: tc.source,
			})
			must.NoError(t, err)
			must.NotNil(t, resp.GetVolume().GetContentSource())
			dir := resp.GetVolume().GetVolumeContext()[volumeContextPath]
			data, err := os.ReadFile(filepath.Join(dir, "link"))
			must.NoError(t, err)
			must.EqOp(t, tc.want, string(data))
			fi, err := os.Stat(filepath.Join(dir, "sub", "data"))
			must.NoError(t, err)
			must.EqOp(t, os.FileMode(0o600), fi.Mode().Perm())
		})
	}

	_, err = tp.ctrl.CreateSnapshot(ctx, &csi.CreateSnapshotRequest{Name: "snap", SourceVolumeId: "other"})
	mustCode(t, err, codes.AlreadyExists, `"snap"`, src.GetVolumeId())

	list, err := tp.ctrl.ListSnapshots(ctx, &csi.ListSnapshotsRequest{SourceVolumeId: src.GetVolumeId()})
	must.NoError(t, err)
	must.SliceLen(t, 1, list.GetEntries())

	_, err = tp.ctrl.DeleteSnapshot(ctx, &csi.DeleteSnapshotRequest{SnapshotId: snap.GetSnapshot().GetSnapshotId()})
	must.NoError(t, err)
	_, err = tp.ctrl.GetSnapshot(ctx, &csi.GetSnapshotRequest{SnapshotId: snap.GetSnapshot().GetSnapshotId()})
	mustCode(t, err, codes.NotFound, snap.GetSnapshot().GetSnapshotId())
}

func TestListVolumesPagination(t *testing.T) {
	ctx := context.Background()
	tp := startPlugin(t, Config{NodeID: "n1", Root: t.TempDir()})
	want := map[string]bool{}
	for _, n := range []string{"a", "b", "c", "d", "e"} {
		want[createVolume(t, tp, n, snw).GetVolumeId()] = true
	}
	got := map[string]bool{}
	token := ""
	for pages := 0; ; pages++ {
		must.Less(t, 3, pages)
		resp, err := tp.ctrl.ListVolumes(ctx, &csi.ListVolumesRequest{MaxEntries: 2, StartingToken: token})
		must.NoError(t, err)
		must.LessEq(t, 2, len(resp.GetEntries()))
		for _, e := range resp.GetEntries() {
			must.False(t, got[e.GetVolume().GetVolumeId()], must.Sprint("duplicate entry"))
			got[e.GetVolume().GetVolumeId()] = true
		}
		if token = resp.GetNextToken(); token == "" {
			break
		}
	}
	must.Eq(t, want, got)

	_, err := tp.ctrl.ListVolumes(ctx, &csi.ListVolumesRequest{StartingToken: "invalid-token"})
	mustCode(t, err, codes.Aborted, "invalid-token")
}

// Controller publishes are recorded per node and checked against the access
// mode, the node list and each node's volume limit.
func TestControllerPublish(t *testing.T) {
	ctx := context.Background()
	root := t.TempDir()
	ctrl := startPlugin(t, Config{NodeID: "a", Root: root, MaxVolumesPerNode: 2})
	startPlugin(t, Config{NodeID: "b", Root: root, Mode: ModeNode, MaxVolumesPerNode: 2})

	pub := func(vol, node string, mode csi.VolumeCapability_AccessMode_Mode, ro bool) error {
		_, err := ctrl.ctrl.ControllerPublishVolume(ctx, &csi.ControllerPublishVolumeRequest{
			VolumeId: vol, NodeId: node, VolumeCapability: mountCap(mode), Readonly: ro,
		})
		return err
	}
	single := createVolume(t, ctrl, "single", snw).GetVolumeId()
	multi := createVolume(t, ctrl, "multi", csi.VolumeCapability_AccessMode_MULTI_NODE_MULTI_WRITER).GetVolumeId()

	must.NoError(t, pub(single, "a", snw, false))
	must.NoError(t, pub(single, "a", snw, false), must.Sprint("publishing again is idempotent"))
	mustCode(t, pub(single, "b", snw, false), codes.FailedPrecondition, single, `node "a"`, "SINGLE_NODE_WRITER")
	mustCode(t, pub(single, "a", snw, true), codes.AlreadyExists, single, "readonly")
	mustCode(t, pub(single, "nobody", snw, false), codes.NotFound, single, `"nobody"`)
	mustCode(t, pub("vol-nope", "a", snw, false), codes.NotFound, "vol-nope")

	mmw := csi.VolumeCapability_AccessMode_MULTI_NODE_MULTI_WRITER
	must.NoError(t, pub(multi, "a", mmw, false))
	must.NoError(t, pub(multi, "b", mmw, false))
	list, err := ctrl.ctrl.ListVolumes(ctx, &csi.ListVolumesRequest{})
	must.NoError(t, err)
	for _, e := range list.GetEntries() {
		if e.GetVolume().GetVolumeId() == multi {
			must.Eq(t, []string{"a", "b"}, e.GetStatus().GetPublishedNodeIds())
		}
	}

	// Node a has reached its limit of 2.
	third := createVolume(t, ctrl, "third", snw).GetVolumeId()
	mustCode(t, pub(third, "a", snw, false), codes.ResourceExhausted, third, `"a"`)

	// Deleting a published volume is refused.
	_, err = ctrl.ctrl.DeleteVolume(ctx, &csi.DeleteVolumeRequest{VolumeId: single})
	mustCode(t, err, codes.FailedPrecondition, single, `node "a"`)

	// Unpublishing frees the volume for the other node; unpublishing what
	// is not published succeeds.
	for range 2 {
		_, err = ctrl.ctrl.ControllerUnpublishVolume(ctx, &csi.ControllerUnpublishVolumeRequest{VolumeId: single, NodeId: "a"})
		must.NoError(t, err)
	}
	must.NoError(t, pub(single, "b", snw, false))
	_, err = ctrl.ctrl.ControllerUnpublishVolume(ctx, &csi.ControllerUnpublishVolumeRequest{VolumeId: "vol-nope", NodeId: "a"})
	must.NoError(t, err)
	_, err = ctrl.ctrl.ControllerUnpublishVolume(ctx, &csi.ControllerUnpublishVolumeRequest{VolumeId: multi})
	must.NoError(t, err)
	get, err := ctrl.ctrl.ControllerGetVolume(ctx, &csi.ControllerGetVolumeRequest{VolumeId: multi})
	must.NoError(t, err)
	must.SliceEmpty(t, get.GetStatus().GetPublishedNodeIds())
}

// Node RPCs check their arguments before touching anything, so these run
// without root.
func TestNodeArguments(t *testing.T) {
	ctx := context.Background()
	tp := startPlugin(t, Config{NodeID: "n1", Root: t.TempDir(), Stage: true})
	vol := createVolume(t, tp, "v", snw).GetVolumeId()
	stage := t.TempDir()
	cases := []struct {
		name      string
		call      func() error
		wantCode  codes.Code
		wantNames []string
	}{
		{"stage without volume id", func() error {
			_, err := tp.node.NodeStageVolume(ctx, &csi.NodeStageVolumeRequest{StagingTargetPath: stage, VolumeCapability: mountCap(snw)})
			return err
		}, codes.InvalidArgument, []string{"volume_id"}},
		{"stage without path", func() error {
			_, err := tp.node.NodeStageVolume(ctx, &csi.NodeStageVolumeRequest{VolumeId: vol, VolumeCapability: mountCap(snw)})
			return err
		}, codes.InvalidArgument, []string{vol, "staging_target_path"}},
		{"stage with relative path", func() error {
			_, err := tp.node.NodeStageVolume(ctx, &csi.NodeStageVolumeRequest{VolumeId: vol, StagingTargetPath: "rel", VolumeCapability: mountCap(snw)})
			return err
		}, codes.InvalidArgument, []string{vol, "absolute"}},
		{"stage unknown volume", func() error {
			_, err := tp.node.NodeStageVolume(ctx, &csi.NodeStageVolumeRequest{VolumeId: "vol-nope", StagingTargetPath: stage, VolumeCapability: mountCap(snw)})
			return err
		}, codes.NotFound, []string{"vol-nope"}},
		{"stage without controller publish", func() error {
			_, err := tp.node.NodeStageVolume(ctx, &csi.NodeStageVolumeRequest{VolumeId: vol, StagingTargetPath: stage, VolumeCapability: mountCap(snw)})
			return err
		}, codes.FailedPrecondition, []string{vol, `not controller-published to node "n1"`}},
		{"stage with another node's publish context", func() error {
			_, err := tp.node.NodeStageVolume(ctx, &csi.NodeStageVolumeRequest{VolumeId: vol, StagingTargetPath: stage, VolumeCapability: mountCap(snw),
				PublishContext: map[string]string{publishContextNodeID: "n2"}})
			return err
		}, codes.FailedPrecondition, []string{vol, `"n2"`}},
		{"publish without staging path", func() error {
			_, err := tp.node.NodePublishVolume(ctx, &csi.NodePublishVolumeRequest{VolumeId: vol, TargetPath: stage + "/t", VolumeCapability: mountCap(snw)})
			return err
		}, codes.FailedPrecondition, []string{vol, "NodeStageVolume"}},
		{"publish not staged", func() error {
			_, err := tp.node.NodePublishVolume(ctx, &csi.NodePublishVolumeRequest{VolumeId: vol, TargetPath: stage + "/t", StagingTargetPath: stage, VolumeCapability: mountCap(snw)})
			return err
		}, codes.FailedPrecondition, []string{vol, "not staged"}},
		{"unpublish unknown volume", func() error {
			_, err := tp.node.NodeUnpublishVolume(ctx, &csi.NodeUnpublishVolumeRequest{VolumeId: "vol-nope", TargetPath: stage + "/t"})
			return err
		}, codes.NotFound, []string{"vol-nope"}},
		{"unpublish what is not published", func() error {
			_, err := tp.node.NodeUnpublishVolume(ctx, &csi.NodeUnpublishVolumeRequest{VolumeId: vol, TargetPath: stage + "/missing"})
			return err
		}, codes.OK, nil},
		{"unstage what is not staged", func() error {
			_, err := tp.node.NodeUnstageVolume(ctx, &csi.NodeUnstageVolumeRequest{VolumeId: vol, StagingTargetPath: stage})
			return err
		}, codes.OK, nil},
		{"stats of a path the volume is not at", func() error {
			_, err := tp.node.NodeGetVolumeStats(ctx, &csi.NodeGetVolumeStatsRequest{VolumeId: vol, VolumePath: stage})
			return err
		}, codes.NotFound, []string{vol, stage}},
		{"expand unknown volume", func() error {
			_, err := tp.node.NodeExpandVolume(ctx, &csi.NodeExpandVolumeRequest{VolumeId: "vol-nope", VolumePath: stage})
			return err
		}, codes.NotFound, []string{"vol-nope"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.call()
			if tc.wantCode == codes.OK {
				must.NoError(t, err)
				return
			}
			mustCode(t, err, tc.wantCode, tc.wantNames...)
		})
	}
}

// ControllerModifyVolume sets the known mutable parameter "note" and keeps
// it in the plugin's state; an unknown one is InvalidArgument, at create
// and at modify, naming the known ones.
func TestModifyVolume(t *testing.T) {
	ctx := context.Background()
	tp := startPlugin(t, Config{NodeID: "n1", Root: t.TempDir(), CapacityBytes: 1 << 30})
	caps, err := tp.ctrl.ControllerGetCapabilities(ctx, &csi.ControllerGetCapabilitiesRequest{})
	must.NoError(t, err)
	advertised := false
	for _, c := range caps.GetCapabilities() {
		advertised = advertised || c.GetRpc().GetType() == csi.ControllerServiceCapability_RPC_MODIFY_VOLUME
	}
	must.True(t, advertised, must.Sprint("MODIFY_VOLUME should be advertised"))

	_, err = tp.ctrl.CreateVolume(ctx, &csi.CreateVolumeRequest{
		Name: "bad", VolumeCapabilities: []*csi.VolumeCapability{mountCap(snw)},
		MutableParameters: map[string]string{"iops": "9000"},
	})
	mustCode(t, err, codes.InvalidArgument, `"iops" is not supported`)

	vol, err := tp.ctrl.CreateVolume(ctx, &csi.CreateVolumeRequest{
		Name: "v", VolumeCapabilities: []*csi.VolumeCapability{mountCap(snw)},
		MutableParameters: map[string]string{"note": "first"},
	})
	must.NoError(t, err)
	id := vol.GetVolume().GetVolumeId()
	note := func() string {
		var out string
		must.NoError(t, tp.p.store.read(ctx, func(st *State) error {
			out = st.Volumes[id].MutableParameters["note"]
			return nil
		}))
		return out
	}
	must.EqOp(t, "first", note())

	_, err = tp.ctrl.ControllerModifyVolume(ctx, &csi.ControllerModifyVolumeRequest{VolumeId: id, MutableParameters: map[string]string{"note": "second"}})
	must.NoError(t, err)
	must.EqOp(t, "second", note())

	_, err = tp.ctrl.ControllerModifyVolume(ctx, &csi.ControllerModifyVolumeRequest{VolumeId: id, MutableParameters: map[string]string{"iops": "1"}})
	mustCode(t, err, codes.InvalidArgument, `knows ["note"]`)
	must.EqOp(t, "second", note())
	_, err = tp.ctrl.ControllerModifyVolume(ctx, &csi.ControllerModifyVolumeRequest{VolumeId: "nope", MutableParameters: map[string]string{"note": "x"}})
	mustCode(t, err, codes.NotFound, "nope")
	_, err = tp.ctrl.ControllerModifyVolume(ctx, &csi.ControllerModifyVolumeRequest{MutableParameters: map[string]string{"note": "x"}})
	mustCode(t, err, codes.InvalidArgument, "volume_id")
}
