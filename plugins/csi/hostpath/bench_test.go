package hostpath

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"github.com/hashicorp/go-hclog"
	"golang.org/x/sys/unix"
)

// The target is: a NodePublishVolume + NodeUnpublishVolume pair costs less
// than 2x a raw bind mount + unmount pair plus one gRPC round trip (Probe).
// Run with: go test -run xxx -bench . -benchtime 2000x ./plugins/csi/hostpath/

// BenchmarkRawBindMountPair is the floor: mount --bind and umount, nothing else.
func BenchmarkRawBindMountPair(b *testing.B) {
	requireRoot(b)
	dir := mountRoot(b)
	src, dst := filepath.Join(dir, "src"), filepath.Join(dir, "dst")
	for _, d := range []string{src, dst} {
		if err := os.Mkdir(d, 0o750); err != nil {
			b.Fatal(err)
		}
	}
	b.ResetTimer()
	for b.Loop() {
		if err := unix.Mount(src, dst, "", unix.MS_BIND, ""); err != nil {
			b.Fatal(err)
		}
		if err := unix.Unmount(dst, 0); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkRawBindMountPairWithTargetDir adds what the CSI spec asks of a
// plugin that creates the target: mkdir before, rmdir after.
func BenchmarkRawBindMountPairWithTargetDir(b *testing.B) {
	requireRoot(b)
	dir := mountRoot(b)
	src, dst := filepath.Join(dir, "src"), filepath.Join(dir, "dst")
	if err := os.Mkdir(src, 0o750); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for b.Loop() {
		if err := os.Mkdir(dst, 0o750); err != nil {
			b.Fatal(err)
		}
		if err := unix.Mount(src, dst, "", unix.MS_BIND, ""); err != nil {
			b.Fatal(err)
		}
		if err := unix.Unmount(dst, 0); err != nil {
			b.Fatal(err)
		}
		if err := os.Remove(dst); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkProbe is one gRPC round trip to the plugin over its unix socket.
func BenchmarkProbe(b *testing.B) {
	tp := startPlugin(b, Config{NodeID: "bench", Root: b.TempDir(), Logger: hclog.NewNullLogger()})
	ctx := context.Background()
	b.ResetTimer()
	for b.Loop() {
		if _, err := tp.id.Probe(ctx, &csi.ProbeRequest{}); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkNodePublishUnpublish is the pair the target is about, against a
// staged volume ("staged": the plugin stages, Config.Stage) or straight from
// the volume directory ("unstaged", the default). "plugin-created" is the
// spec's default (the plugin creates the target directory and removes it
// at unpublish); "precreated" is a CO that creates the target itself, which
// leaves the plugin only the mount.
func BenchmarkNodePublishUnpublish(b *testing.B) {
	requireRoot(b)
	for _, staged := range []bool{true, false} {
		for _, precreate := range []bool{false, true} {
			name := "staged"
			if !staged {
				name = "unstaged"
			}
			name += "/target=plugin-created"
			if precreate {
				name = strings.Replace(name, "plugin-created", "precreated", 1)
			}
			b.Run(name, func(b *testing.B) { benchPublishUnpublish(b, staged, precreate) })
		}
	}
}

func benchPublishUnpublish(b *testing.B, staged, precreate bool) {
	ctx := context.Background()
	dir := mountRoot(b)
	tp := startPlugin(b, Config{NodeID: "bench", Root: filepath.Join(dir, "root"), Logger: hclog.NewNullLogger(), Stage: staged})
	vol := createVolume(b, tp, "bench", snw).GetVolumeId()
	c := mountCap(snw)
	if _, err := tp.ctrl.ControllerPublishVolume(ctx, &csi.ControllerPublishVolumeRequest{VolumeId: vol, NodeId: "bench", VolumeCapability: c}); err != nil {
		b.Fatal(err)
	}
	staging, target := filepath.Join(dir, "staging"), filepath.Join(dir, "target")
	if err := os.Mkdir(staging, 0o750); err != nil {
		b.Fatal(err)
	}
	if precreate {
		if err := os.Mkdir(target, 0o750); err != nil {
			b.Fatal(err)
		}
	}
	pub := &csi.NodePublishVolumeRequest{VolumeId: vol, TargetPath: target, VolumeCapability: c}
	if staged {
		if _, err := tp.node.NodeStageVolume(ctx, &csi.NodeStageVolumeRequest{VolumeId: vol, StagingTargetPath: staging, VolumeCapability: c}); err != nil {
			b.Fatal(err)
		}
		pub.StagingTargetPath = staging
	}
	unpub := &csi.NodeUnpublishVolumeRequest{VolumeId: vol, TargetPath: target}
	b.ResetTimer()
	for b.Loop() {
		if _, err := tp.node.NodePublishVolume(ctx, pub); err != nil {
			b.Fatal(err)
		}
		if _, err := tp.node.NodeUnpublishVolume(ctx, unpub); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	if staged {
		if _, err := tp.node.NodeUnstageVolume(ctx, &csi.NodeUnstageVolumeRequest{VolumeId: vol, StagingTargetPath: staging}); err != nil {
			b.Fatal(err)
		}
	}
}
