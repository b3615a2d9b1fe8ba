package hostpath

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"github.com/shoenig/test/must"
	"golang.org/x/sys/unix"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// CheckMountPrivileges must agree with the kernel: it says "can mount"
// exactly when a bind mount works.
func TestCheckMountPrivileges_AgreesWithABindMount(t *testing.T) {
	src, dst := t.TempDir(), t.TempDir()
	mountErr := unix.Mount(src, dst, "", unix.MS_BIND, "")
	if mountErr == nil {
		t.Cleanup(func() {
			if err := unix.Unmount(dst, unix.MNT_DETACH); err != nil {
				t.Errorf("unmounting %s: %v", dst, err)
			}
		})
	}
	err := CheckMountPrivileges()
	if mountErr == nil {
		must.NoError(t, err, must.Sprint("a bind mount worked, so the check must pass"))
		return
	}
	must.True(t, errors.Is(mountErr, unix.EPERM), must.Sprintf("bind mount failed for another reason: %v", mountErr))
	must.Error(t, err, must.Sprint("a bind mount was refused, so the check must fail"))
	must.StrContains(t, err.Error(), "CAP_SYS_ADMIN")
}

func TestMountPrivilegeError(t *testing.T) {
	cases := []struct {
		name string
		uid  int
		want []string
	}{
		{name: "not root", uid: 1000, want: []string{"hostpath: not running as root (uid 1000)", "CAP_SYS_ADMIN", "run the Berth agent as root", "sudo make dev"}},
		{name: "root without the capability", uid: 0, want: []string{"hostpath: running as root but without CAP_SYS_ADMIN", "run the Berth agent as root"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			msg := mountPrivilegeError(tc.uid).Error()
			for _, w := range tc.want {
				must.StrContains(t, msg, w)
			}
		})
	}
}

// A plugin that cannot mount still starts and answers Probe, so the CO
// registers it; NodeGetInfo then fails with the reason, which the CO shows
// as the node plugin's health. The controller is unaffected.
func TestCannotMount_NodeGetInfoSaysWhy(t *testing.T) {
	ctx := context.Background()
	cases := []struct {
		name     string
		canMount func() error
		wantErr  bool
	}{
		{name: "can mount", canMount: func() error { return nil }},
		{name: "cannot mount", canMount: func() error { return mountPrivilegeError(1000) }, wantErr: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tp := startPlugin(t, Config{NodeID: "n1", Root: t.TempDir(), CanMount: tc.canMount})

			probe, err := tp.id.Probe(ctx, &csi.ProbeRequest{})
			must.NoError(t, err)
			must.True(t, probe.GetReady().GetValue(), must.Sprint("Probe stays ready, or the CO never asks why"))
			_, err = tp.node.NodeGetCapabilities(ctx, &csi.NodeGetCapabilitiesRequest{})
			must.NoError(t, err)
			_, err = tp.ctrl.ControllerGetCapabilities(ctx, &csi.ControllerGetCapabilitiesRequest{})
			must.NoError(t, err)

			info, err := tp.node.NodeGetInfo(ctx, &csi.NodeGetInfoRequest{})
			if !tc.wantErr {
				must.NoError(t, err)
				must.EqOp(t, "n1", info.GetNodeId())
				return
			}
			mustCode(t, err, codes.FailedPrecondition)
			must.EqOp(t, mountPrivilegeError(1000).Error(), status.Convert(err).Message(),
				must.Sprint("the reason reaches the CO word for word"))
		})
	}
}

// The check is made only for the node service: a controller never mounts.
func TestCannotMount_ControllerModeDoesNotAsk(t *testing.T) {
	asked := 0
	startPlugin(t, Config{Root: t.TempDir(), Mode: ModeController, CanMount: func() error { asked++; return nil }})
	must.EqOp(t, 0, asked)
	startPlugin(t, Config{NodeID: "n1", Root: t.TempDir(), Mode: ModeNode, CanMount: func() error { asked++; return nil }})
	must.EqOp(t, 1, asked)
}

// With StaticVolumes, the controller publishes a volume it never created
// (one an operator registered with the CO): ValidateVolumeCapabilities
// confirms it and the first ControllerPublishVolume creates it empty.
// Without it, such a volume is NotFound (TestControllerPublish).
func TestStaticVolumes_ControllerPublishCreates(t *testing.T) {
	ctx := context.Background()
	root := t.TempDir()
	tp := startPlugin(t, Config{NodeID: "a", Root: root, StaticVolumes: true})

	v, err := tp.ctrl.ValidateVolumeCapabilities(ctx, &csi.ValidateVolumeCapabilitiesRequest{
		VolumeId: "data", VolumeCapabilities: []*csi.VolumeCapability{mountCap(snw)},
	})
	must.NoError(t, err)
	must.NotNil(t, v.GetConfirmed(), must.Sprintf("not confirmed: %s", v.GetMessage()))

	pub := func(vol, node string) error {
		_, err := tp.ctrl.ControllerPublishVolume(ctx, &csi.ControllerPublishVolumeRequest{
			VolumeId: vol, NodeId: node, VolumeCapability: mountCap(snw),
		})
		return err
	}
	must.NoError(t, pub("data", "a"))
	must.NoError(t, pub("data", "a"), must.Sprint("publishing again is idempotent"))
	fi, err := os.Stat(filepath.Join(root, volumesDirName, "data"))
	must.NoError(t, err)
	must.True(t, fi.IsDir())

	get, err := tp.ctrl.ControllerGetVolume(ctx, &csi.ControllerGetVolumeRequest{VolumeId: "data"})
	must.NoError(t, err)
	must.Eq(t, []string{"a"}, get.GetStatus().GetPublishedNodeIds())

	mustCode(t, pub(".hidden", "a"), codes.InvalidArgument, ".hidden")
	mustCode(t, pub("other", "nobody"), codes.NotFound, `"nobody"`)
	_, err = os.Stat(filepath.Join(root, volumesDirName, "other"))
	must.True(t, os.IsNotExist(err), must.Sprint("a refused publish creates nothing"))

	// The access mode is enforced as for created volumes.
	startPlugin(t, Config{NodeID: "b", Root: root, Mode: ModeNode})
	mustCode(t, pub("data", "b"), codes.FailedPrecondition, "data", `node "a"`)
}

// A static volume published by the controller stages and publishes on
// the node like a created one.
func TestStaticVolumes_NodeLifecycle(t *testing.T) {
	requireRoot(t)
	ctx := context.Background()
	root := mountRoot(t)
	tp := startPlugin(t, Config{NodeID: "a", Root: filepath.Join(root, "plugin"), StaticVolumes: true})
	_, err := tp.ctrl.ControllerPublishVolume(ctx, &csi.ControllerPublishVolumeRequest{
		VolumeId: "data", NodeId: "a", VolumeCapability: mountCap(snw),
	})
	must.NoError(t, err)
	f := &nodeFixture{
		tp: tp, vol: "data", dir: filepath.Join(root, "plugin", volumesDirName, "data"),
		staging: filepath.Join(root, "staging"), paths: filepath.Join(root, "per-alloc"), cap: mountCap(snw),
	}
	must.NoError(t, os.MkdirAll(f.staging, 0o750))
	must.NoError(t, os.MkdirAll(f.paths, 0o750))
	must.NoError(t, f.stage())
	must.NoError(t, f.publish("rw", false))
	must.NoError(t, os.WriteFile(filepath.Join(f.paths, "rw", "hello.txt"), []byte("hello"), 0o644))
	data, err := os.ReadFile(filepath.Join(f.dir, "hello.txt"))
	must.NoError(t, err)
	must.EqOp(t, "hello", string(data))
	must.NoError(t, f.unpublish("rw"))
	must.NoError(t, f.unstage())
}
