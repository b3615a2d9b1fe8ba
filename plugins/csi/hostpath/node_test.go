package hostpath

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"github.com/shoenig/test/must"
	"google.golang.org/grpc/codes"
)

// nodeFixture is a monolith plugin with one controller-published volume and
// paths for staging and publishing it. A fixture whose plugin does not
// stage (Config.Stage off) acts as a CO does with such a plugin: stage and
// unstage call nothing, and publish passes no staging path.
type nodeFixture struct {
	tp      *testPlugin
	staged  bool
	vol     string
	dir     string // the volume directory
	staging string
	paths   string // parent of target paths
	cap     *csi.VolumeCapability
}

func newNodeFixture(t *testing.T, mode csi.VolumeCapability_AccessMode_Mode, staged bool) *nodeFixture {
	t.Helper()
	root := mountRoot(t)
	tp := startPlugin(t, Config{NodeID: "a", Root: filepath.Join(root, "plugin"), Stage: staged})
	v := createVolume(t, tp, "vol", mode)
	_, err := tp.ctrl.ControllerPublishVolume(context.Background(), &csi.ControllerPublishVolumeRequest{
		VolumeId: v.GetVolumeId(), NodeId: "a", VolumeCapability: mountCap(mode),
	})
	must.NoError(t, err)
	f := &nodeFixture{
		tp:      tp,
		staged:  staged,
		vol:     v.GetVolumeId(),
		dir:     v.GetVolumeContext()[volumeContextPath],
		staging: filepath.Join(root, "staging"),
		paths:   filepath.Join(root, "per-alloc"),
		cap:     mountCap(mode),
	}
	must.NoError(t, os.MkdirAll(f.staging, 0o750))
	must.NoError(t, os.MkdirAll(f.paths, 0o750))
	return f
}

// bothStagings runs body against a plugin that stages and one that does not.
func bothStagings(t *testing.T, body func(t *testing.T, staged bool)) {
	t.Run("staged", func(t *testing.T) { body(t, true) })
	t.Run("unstaged", func(t *testing.T) { body(t, false) })
}

func (f *nodeFixture) stage() error {
	if !f.staged {
		return nil
	}
	_, err := f.tp.node.NodeStageVolume(context.Background(), &csi.NodeStageVolumeRequest{
		VolumeId: f.vol, StagingTargetPath: f.staging, VolumeCapability: f.cap,
		PublishContext: map[string]string{publishContextNodeID: "a"},
	})
	return err
}

func (f *nodeFixture) unstage() error {
	if !f.staged {
		return nil
	}
	_, err := f.tp.node.NodeUnstageVolume(context.Background(), &csi.NodeUnstageVolumeRequest{VolumeId: f.vol, StagingTargetPath: f.staging})
	return err
}

func (f *nodeFixture) publish(target string, readonly bool) error {
	staging := ""
	if f.staged {
		staging = f.staging
	}
	_, err := f.tp.node.NodePublishVolume(context.Background(), &csi.NodePublishVolumeRequest{
		VolumeId: f.vol, StagingTargetPath: staging, TargetPath: filepath.Join(f.paths, target),
		VolumeCapability: f.cap, Readonly: readonly,
	})
	return err
}

func (f *nodeFixture) unpublish(target string) error {
	_, err := f.tp.node.NodeUnpublishVolume(context.Background(), &csi.NodeUnpublishVolumeRequest{VolumeId: f.vol, TargetPath: filepath.Join(f.paths, target)})
	return err
}

func TestNodeStagePublishLifecycle(t *testing.T) {
	requireRoot(t)
	bothStagings(t, func(t *testing.T, staged bool) {
		ctx := context.Background()
		f := newNodeFixture(t, snw, staged)
		rw, ro := filepath.Join(f.paths, "rw"), filepath.Join(f.paths, "ro")

		must.NoError(t, f.stage())
		must.NoError(t, f.stage(), must.Sprint("staging again is idempotent"))
		if staged {
			must.EqOp(t, 1, mountCount(t, f.staging))
		}

		must.NoError(t, f.publish("rw", false))
		must.NoError(t, f.publish("rw", false), must.Sprint("publishing again is idempotent"))
		must.EqOp(t, 1, mountCount(t, rw))
		must.NoError(t, os.WriteFile(filepath.Join(rw, "file"), []byte("data"), 0o644))
		data, err := os.ReadFile(filepath.Join(f.dir, "file"))
		must.NoError(t, err)
		must.EqOp(t, "data", string(data), must.Sprint("a write through the target lands in the volume"))

		// SINGLE_NODE_WRITER: a read-only second target is fine, a second
		// writer is not, and the same target with other arguments is a conflict.
		must.NoError(t, f.publish("ro", true))
		err = os.WriteFile(filepath.Join(ro, "file2"), []byte("x"), 0o644)
		must.True(t, errors.Is(err, syscall.EROFS), must.Sprintf("write to a read-only publish: %v", err))
		data, err = os.ReadFile(filepath.Join(ro, "file"))
		must.NoError(t, err)
		must.EqOp(t, "data", string(data))
		mustCode(t, f.publish("rw2", false), codes.FailedPrecondition, f.vol, "one read-write target path")
		mustCode(t, f.publish("rw", true), codes.AlreadyExists, f.vol, rw)

		stats, err := f.tp.node.NodeGetVolumeStats(ctx, &csi.NodeGetVolumeStatsRequest{VolumeId: f.vol, VolumePath: rw})
		must.NoError(t, err)
		must.SliceLen(t, 2, stats.GetUsage())
		must.Positive(t, stats.GetUsage()[0].GetTotal())
		must.Positive(t, stats.GetUsage()[1].GetTotal())
		// The volume's own usage, not the host disk's: the one 4-byte file.
		must.Eq(t, int64(len("data")), stats.GetUsage()[0].GetUsed())
		must.Eq(t, int64(1), stats.GetUsage()[1].GetUsed())
		_, err = f.tp.node.NodeExpandVolume(ctx, &csi.NodeExpandVolumeRequest{VolumeId: f.vol, VolumePath: rw, CapacityRange: &csi.CapacityRange{RequiredBytes: 1 << 30}})
		must.NoError(t, err)

		if staged {
			mustCode(t, f.unstage(), codes.FailedPrecondition, f.vol, "still published")
		}

		for _, target := range []string{"rw", "ro"} {
			must.NoError(t, f.unpublish(target))
			must.NoError(t, f.unpublish(target), must.Sprint("unpublishing again is idempotent"))
			_, err := os.Stat(filepath.Join(f.paths, target))
			must.True(t, os.IsNotExist(err), must.Sprintf("target %s should be removed: %v", target, err))
		}
		must.NoError(t, f.unstage())
		must.NoError(t, f.unstage(), must.Sprint("unstaging again is idempotent"))
		must.SliceEmpty(t, mountsUnder(t, filepath.Dir(f.staging)))
		_, err = os.Stat(f.staging)
		must.NoError(t, err, must.Sprint("the staging directory belongs to the CO and stays"))
	})
}

// A target the CO created is unmounted but left in place at unpublish.
func TestNodePublishPrecreatedTarget(t *testing.T) {
	requireRoot(t)
	bothStagings(t, func(t *testing.T, staged bool) {
		f := newNodeFixture(t, snw, staged)
		target := filepath.Join(f.paths, "mine")
		must.NoError(t, os.Mkdir(target, 0o750))
		must.NoError(t, f.stage())
		must.NoError(t, f.publish("mine", false))
		must.EqOp(t, 1, mountCount(t, target))
		must.NoError(t, f.unpublish("mine"))
		must.EqOp(t, 0, mountCount(t, target))
		_, err := os.Stat(target)
		must.NoError(t, err)
		must.NoError(t, f.unstage())
	})
}

func TestNodePublishReadOnly(t *testing.T) {
	requireRoot(t)
	cases := []struct {
		name     string
		mode     csi.VolumeCapability_AccessMode_Mode
		readonly bool
		wantRO   bool
	}{
		{name: "writer", mode: snw, readonly: false, wantRO: false},
		{name: "writer published read-only", mode: snw, readonly: true, wantRO: true},
		{name: "single node reader only", mode: csi.VolumeCapability_AccessMode_SINGLE_NODE_READER_ONLY, wantRO: true},
		{name: "multi node reader only", mode: csi.VolumeCapability_AccessMode_MULTI_NODE_READER_ONLY, wantRO: true},
		{name: "multi node multi writer", mode: csi.VolumeCapability_AccessMode_MULTI_NODE_MULTI_WRITER, wantRO: false},
	}
	for _, tc := range cases {
		bothStagings(t, func(t *testing.T, staged bool) {
			t.Run(tc.name, func(t *testing.T) {
				f := newNodeFixture(t, tc.mode, staged)
				must.NoError(t, f.stage())
				must.NoError(t, f.publish("t", tc.readonly))
				err := os.WriteFile(filepath.Join(f.paths, "t", "file"), []byte("x"), 0o644)
				if tc.wantRO {
					must.True(t, errors.Is(err, syscall.EROFS), must.Sprintf("want EROFS, got %v", err))
				} else {
					must.NoError(t, err)
				}
				must.NoError(t, f.unpublish("t"))
				must.NoError(t, f.unstage())
			})
		})
	}
}

// Two node plugins sharing a root are two Berth client nodes on one
// machine: a single-node volume in use on one is refused to the other.
func TestNodeSecondNodeConflict(t *testing.T) {
	requireRoot(t)
	ctx := context.Background()

	t.Run("controller-created volume", func(t *testing.T) {
		f := newNodeFixture(t, snw, true)
		b := startPlugin(t, Config{NodeID: "b", Root: f.tp.p.cfg.Root, Mode: ModeNode})
		must.NoError(t, f.stage())

		_, err := f.tp.ctrl.ControllerPublishVolume(ctx, &csi.ControllerPublishVolumeRequest{VolumeId: f.vol, NodeId: "b", VolumeCapability: f.cap})
		mustCode(t, err, codes.FailedPrecondition, f.vol, `node "a"`)

		stagingB := filepath.Join(filepath.Dir(f.staging), "staging-b")
		_, err = b.node.NodeStageVolume(ctx, &csi.NodeStageVolumeRequest{VolumeId: f.vol, StagingTargetPath: stagingB, VolumeCapability: f.cap})
		mustCode(t, err, codes.FailedPrecondition, f.vol, `node "a"`)
		must.EqOp(t, 0, mountCount(t, stagingB))
	})

	cases := []struct {
		mode         csi.VolumeCapability_AccessMode_Mode
		wantConflict bool
	}{
		{csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER, true},
		{csi.VolumeCapability_AccessMode_SINGLE_NODE_READER_ONLY, true},
		{csi.VolumeCapability_AccessMode_SINGLE_NODE_SINGLE_WRITER, true},
		{csi.VolumeCapability_AccessMode_SINGLE_NODE_MULTI_WRITER, true},
		{csi.VolumeCapability_AccessMode_MULTI_NODE_READER_ONLY, false},
		{csi.VolumeCapability_AccessMode_MULTI_NODE_SINGLE_WRITER, false},
		{csi.VolumeCapability_AccessMode_MULTI_NODE_MULTI_WRITER, false},
	}
	for _, tc := range cases {
		bothStagings(t, func(t *testing.T, staged bool) {
			t.Run("static volume "+tc.mode.String(), func(t *testing.T) {
				root := mountRoot(t)
				shared := filepath.Join(root, "plugin")
				a := startPlugin(t, Config{NodeID: "a", Root: shared, Mode: ModeNode, Stage: staged})
				b := startPlugin(t, Config{NodeID: "b", Root: shared, Mode: ModeNode, Stage: staged})
				// use is the node's first use: a stage, or a publish
				// without one; release undoes it.
				use := func(tp *testPlugin, dir string) error {
					path := filepath.Join(root, dir)
					if !staged {
						_, err := tp.node.NodePublishVolume(ctx, &csi.NodePublishVolumeRequest{VolumeId: "static-1", TargetPath: path, VolumeCapability: mountCap(tc.mode)})
						return err
					}
					must.NoError(t, os.MkdirAll(path, 0o750))
					_, err := tp.node.NodeStageVolume(ctx, &csi.NodeStageVolumeRequest{VolumeId: "static-1", StagingTargetPath: path, VolumeCapability: mountCap(tc.mode)})
					return err
				}
				release := func(tp *testPlugin, dir string) {
					path := filepath.Join(root, dir)
					var err error
					if staged {
						_, err = tp.node.NodeUnstageVolume(ctx, &csi.NodeUnstageVolumeRequest{VolumeId: "static-1", StagingTargetPath: path})
					} else {
						_, err = tp.node.NodeUnpublishVolume(ctx, &csi.NodeUnpublishVolumeRequest{VolumeId: "static-1", TargetPath: path})
					}
					must.NoError(t, err)
				}
				must.NoError(t, use(a, "use-a"), must.Sprint("a node-only plugin creates a static volume on first use"))
				err := use(b, "use-b")
				// Two stages are no writers; two read-write publishes of a
				// single-writer volume are two.
				wantConflict := tc.wantConflict || (!staged && tc.mode == csi.VolumeCapability_AccessMode_MULTI_NODE_SINGLE_WRITER)
				if !wantConflict {
					must.NoError(t, err)
					release(b, "use-b")
					release(a, "use-a")
					return
				}
				mustCode(t, err, codes.FailedPrecondition, "static-1", `node "a"`, `node "b"`)
				must.EqOp(t, 0, mountCount(t, filepath.Join(root, "use-b")))

				release(a, "use-a")
				must.NoError(t, use(b, "use-b"), must.Sprint("once node a released it, node b may use it"))
				release(b, "use-b")
			})
		})
	}
}

// Without Config.Stage the plugin does not advertise STAGE_UNSTAGE_VOLUME,
// and NodePublish makes the checks NodeStage makes for a plugin that
// stages; a volume staged before a restart without staging is still
// published from, and unstaged at, its staging path.
func TestNodeWithoutStaging(t *testing.T) {
	requireRoot(t)
	ctx := context.Background()
	caps := func(tp *testPlugin) []csi.NodeServiceCapability_RPC_Type {
		resp, err := tp.node.NodeGetCapabilities(ctx, &csi.NodeGetCapabilitiesRequest{})
		must.NoError(t, err)
		var out []csi.NodeServiceCapability_RPC_Type
		for _, c := range resp.GetCapabilities() {
			out = append(out, c.GetRpc().GetType())
		}
		return out
	}
	staged := newNodeFixture(t, snw, true)
	must.SliceContains(t, caps(staged.tp), csi.NodeServiceCapability_RPC_STAGE_UNSTAGE_VOLUME)
	f := newNodeFixture(t, snw, false)
	must.SliceNotContains(t, caps(f.tp), csi.NodeServiceCapability_RPC_STAGE_UNSTAGE_VOLUME)

	t.Run("refusals", func(t *testing.T) {
		other := createVolume(t, f.tp, "not-published", snw).GetVolumeId()
		target := filepath.Join(f.paths, "refused")
		_, err := f.tp.node.NodePublishVolume(ctx, &csi.NodePublishVolumeRequest{VolumeId: other, TargetPath: target, VolumeCapability: f.cap})
		mustCode(t, err, codes.FailedPrecondition, other, `not controller-published to node "a"`)
		_, err = f.tp.node.NodePublishVolume(ctx, &csi.NodePublishVolumeRequest{VolumeId: f.vol, TargetPath: target, VolumeCapability: f.cap,
			PublishContext: map[string]string{publishContextNodeID: "b"}})
		mustCode(t, err, codes.FailedPrecondition, f.vol, `"b"`)
		_, err = f.tp.node.NodePublishVolume(ctx, &csi.NodePublishVolumeRequest{VolumeId: "vol-nope", TargetPath: target, VolumeCapability: f.cap})
		mustCode(t, err, codes.NotFound, "vol-nope")
		_, err = os.Stat(target)
		must.True(t, os.IsNotExist(err), must.Sprintf("a refused publish made its target: %v", err))
	})

	t.Run("staged before a restart without staging", func(t *testing.T) {
		g := newNodeFixture(t, snw, true)
		must.NoError(t, g.stage())
		g.tp.stop()
		cfg := g.tp.p.cfg
		cfg.Logger, cfg.Stage = nil, false
		g.tp = startPlugin(t, cfg)
		must.NoError(t, g.publish("t", false), must.Sprint("a publish from the recorded staging"))
		target := filepath.Join(g.paths, "t")
		must.EqOp(t, 1, mountCount(t, target))
		ok, err := mountShows(target, g.staging)
		must.NoError(t, err)
		must.True(t, ok, must.Sprint("the target should be a bind of the staging path"))
		must.NoError(t, g.unpublish("t"))
		must.NoError(t, g.unstage())
		must.SliceEmpty(t, mountsUnder(t, filepath.Dir(g.staging)))
	})
}

// SINGLE_NODE_SINGLE_WRITER allows one target path on the node.
func TestNodeSingleWriterOneTarget(t *testing.T) {
	requireRoot(t)
	bothStagings(t, func(t *testing.T, staged bool) {
		f := newNodeFixture(t, csi.VolumeCapability_AccessMode_SINGLE_NODE_SINGLE_WRITER, staged)
		must.NoError(t, f.stage())
		must.NoError(t, f.publish("t1", false))
		mustCode(t, f.publish("t2", true), codes.FailedPrecondition, f.vol, "one target path")
		must.NoError(t, f.unpublish("t1"))
		must.NoError(t, f.publish("t2", false))
		must.NoError(t, f.unpublish("t2"))
		must.NoError(t, f.unstage())
	})
}

// A restarted plugin knows its volumes, stages and publishes: repeated calls
// are idempotent against the existing mounts, conflicts still hold, and
// unpublish removes what the first run created.
func TestNodeRestartKeepsState(t *testing.T) {
	requireRoot(t)
	bothStagings(t, func(t *testing.T, staged bool) {
		ctx := context.Background()
		f := newNodeFixture(t, snw, staged)
		target := filepath.Join(f.paths, "t")
		must.NoError(t, f.stage())
		must.NoError(t, f.publish("t", false))
		f.tp.stop()

		cfg := f.tp.p.cfg
		cfg.Logger = nil
		f.tp = startPlugin(t, cfg)
		startPlugin(t, Config{NodeID: "b", Root: cfg.Root, Mode: ModeNode})

		list, err := f.tp.ctrl.ListVolumes(ctx, &csi.ListVolumesRequest{})
		must.NoError(t, err)
		must.SliceLen(t, 1, list.GetEntries())
		must.Eq(t, []string{"a"}, list.GetEntries()[0].GetStatus().GetPublishedNodeIds())

		must.NoError(t, f.stage())
		must.NoError(t, f.publish("t", false))
		wantStaging := 0
		if staged {
			wantStaging = 1
		}
		must.EqOp(t, wantStaging, mountCount(t, f.staging))
		must.EqOp(t, 1, mountCount(t, target))
		_, err = f.tp.ctrl.ControllerPublishVolume(ctx, &csi.ControllerPublishVolumeRequest{VolumeId: f.vol, NodeId: "b", VolumeCapability: f.cap})
		mustCode(t, err, codes.FailedPrecondition, f.vol, `node "a"`)
		_, err = f.tp.node.NodeGetVolumeStats(ctx, &csi.NodeGetVolumeStatsRequest{VolumeId: f.vol, VolumePath: target})
		must.NoError(t, err)

		must.NoError(t, f.unpublish("t"))
		_, err = os.Stat(target)
		must.True(t, os.IsNotExist(err))
		must.NoError(t, f.unstage())
		must.SliceEmpty(t, mountsUnder(t, filepath.Dir(f.staging)))
	})
}

// A mount that the state does not record (the plugin died between mounting
// and recording) is adopted when it shows the volume, and unpublish cleans
// it up.
func TestNodeAdoptsUnrecordedMount(t *testing.T) {
	requireRoot(t)
	bothStagings(t, func(t *testing.T, staged bool) {
		f := newNodeFixture(t, snw, staged)
		must.NoError(t, f.stage())
		target := filepath.Join(f.paths, "t")
		must.NoError(t, os.Mkdir(target, 0o750))
		src := f.dir // what a publish binds
		if staged {
			src = f.staging
		}
		must.NoError(t, bindMount(src, target, false))

		must.NoError(t, f.publish("t", false))
		must.EqOp(t, 1, mountCount(t, target), must.Sprint("no second mount is stacked"))
		must.NoError(t, f.unpublish("t"))
		must.EqOp(t, 0, mountCount(t, target))

		// Something else mounted at the target is in the way.
		other := t.TempDir()
		must.NoError(t, bindMount(other, target, false))
		mustCode(t, f.publish("t", false), codes.AlreadyExists, f.vol, target)
		must.NoError(t, f.unpublish("t"), must.Sprint("unpublish leaves a foreign mount alone"))
		must.EqOp(t, 1, mountCount(t, target))
		_, err := unmountAll(target)
		must.NoError(t, err)
		must.NoError(t, f.unstage())
	})
}

func TestFencingDropsNodeRecords(t *testing.T) {
	requireRoot(t)
	ctx := context.Background()
	f := newNodeFixture(t, snw, true)
	b := startPlugin(t, Config{NodeID: "b", Root: f.tp.p.cfg.Root, Mode: ModeNode})
	must.NoError(t, f.stage())
	must.NoError(t, f.publish("t", false))

	// Node a is "down": the CO fences it with a controller unpublish.
	_, err := f.tp.ctrl.ControllerUnpublishVolume(ctx, &csi.ControllerUnpublishVolumeRequest{VolumeId: f.vol, NodeId: "a"})
	must.NoError(t, err)
	resp, err := f.tp.ctrl.ControllerPublishVolume(ctx, &csi.ControllerPublishVolumeRequest{VolumeId: f.vol, NodeId: "b", VolumeCapability: f.cap})
	must.NoError(t, err)
	stagingB := filepath.Join(filepath.Dir(f.staging), "staging-b")
	must.NoError(t, os.Mkdir(stagingB, 0o750))
	_, err = b.node.NodeStageVolume(ctx, &csi.NodeStageVolumeRequest{VolumeId: f.vol, StagingTargetPath: stagingB, VolumeCapability: f.cap, PublishContext: resp.GetPublishContext()})
	must.NoError(t, err)

	// Node a comes back and cleans up: the mounts go, without error.
	must.NoError(t, f.unpublish("t"))
	must.NoError(t, f.unstage())
	must.EqOp(t, 0, mountCount(t, f.staging))
	_, err = b.node.NodeUnstageVolume(ctx, &csi.NodeUnstageVolumeRequest{VolumeId: f.vol, StagingTargetPath: stagingB})
	must.NoError(t, err)
}

// TestNodePublishBlock: the block access type publishes a loop device of
// the volume's image on a target file; what is written through it is in
// the image; unpublish unmounts it, detaches the loop device and removes
// the target file; a second publish sees the data.
func TestNodePublishBlock(t *testing.T) {
	bothStagings(t, func(t *testing.T, staged bool) {
		f := newNodeFixture(t, snw, staged)
		f.cap = blockCap()
		must.NoError(t, f.stage())
		must.NoError(t, f.publish("t1", false))
		target := filepath.Join(f.paths, "t1")
		dev, backing, ok := loopAt(target)
		must.True(t, ok, must.Sprint("the target is not a loop device"))
		must.Eq(t, filepath.Join(f.dir, blockImageName), backing)
		fi, err := os.Stat(filepath.Join(f.dir, blockImageName))
		must.NoError(t, err)
		must.Eq(t, int64(DefaultBlockSize), fi.Size())

		w, err := os.OpenFile(target, os.O_WRONLY, 0)
		must.NoError(t, err)
		_, err = w.WriteAt([]byte("BLKDATA"), 4096)
		must.NoError(t, err)
		must.NoError(t, w.Sync())
		must.NoError(t, w.Close())
		must.NoError(t, f.publish("t1", false), must.Sprint("idempotent"))

		must.NoError(t, f.unpublish("t1"))
		_, err = os.Stat(target)
		must.True(t, errors.Is(err, os.ErrNotExist), must.Sprintf("target left behind: %v", err))
		_, err = os.ReadFile("/sys/block/" + filepath.Base(dev) + "/loop/backing_file")
		must.Error(t, err, must.Sprintf("%s is still attached", dev))

		must.NoError(t, f.publish("t2", true))
		r, err := os.Open(filepath.Join(f.paths, "t2"))
		must.NoError(t, err)
		buf := make([]byte, 7)
		_, err = r.ReadAt(buf, 4096)
		r.Close()
		must.NoError(t, err)
		must.Eq(t, "BLKDATA", string(buf))
		must.NoError(t, f.unpublish("t2"))
		must.NoError(t, f.unstage())
		must.SliceEmpty(t, mountsUnder(t, f.paths))
	})
}
